"""ProMiSE's multi-state metrics as pure, batched torch functions (float64; CPU or GPU).

Every function takes C-alpha coordinates as ``(..., L, 3)`` arrays (numpy or torch) with one fixed residue
correspondence, checks them (:func:`check_coords`) and broadcasts over the leading dimensions, so thousands of
samples are scored in one call. The metrics follow the reconstruction in :mod:`zoo.promise` (spec 04):

* :func:`kabsch_rmsd`: C-alpha RMSD after the optimal (Kabsch) superposition.
* :func:`tm_score`: TM-score with a fixed correspondence, maximised over superpositions by the TM-score
  program's search (Kabsch on seed fragments of length L, L/2, L/4 and 8, each refined on the residues within
  ``max(d0, 4.5)`` A). It is never above TM-align's score, which may also change the correspondence.
* :func:`state_coverage`, :func:`multistate_success`, :func:`state_preference`, :func:`context_delta` and
  :func:`path_fidelity`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

#: The TM-score program refines on residues closer than this (A), or d0 when that is larger.
TM_SEARCH_FLOOR = 4.5
#: Length of the shortest seed fragment of the TM search.
TM_MIN_FRAGMENT = 8
DTYPE = torch.float64


def check_coords(coords, name: str = "coordinates", n_residues: int | None = None, batched: bool = True):
    """Return ``coords`` as a float64 tensor, or raise a ``ValueError`` that says what is wrong.

    Args:
        coords: ``(L, 3)`` or ``(..., L, 3)`` C-alpha coordinates (numpy array, torch tensor or nested lists).
        name: What the array is, for the message.
        n_residues: The residue count it must have (that of the reference states), if known.
        batched: Allow leading batch dimensions (False: exactly ``(L, 3)``).
    """
    if isinstance(coords, torch.Tensor):
        tensor = coords.detach().to(DTYPE)
    else:
        try:
            tensor = torch.as_tensor(np.asarray(coords, dtype=np.float64))
        except (TypeError, ValueError) as error:
            raise ValueError(f"{name}: expected numeric C-alpha coordinates of shape (N, 3), got {error}") from None
    shape = tuple(tensor.shape)
    if tensor.dim() < 2 or shape[-1] != 3 or (not batched and tensor.dim() != 2):
        expected = "(N, 3)" if not batched else "(N, 3) or (..., N, 3)"
        raise ValueError(f"{name}: expected C-alpha coordinates of shape {expected}, got an array of shape {shape}")
    if tensor.numel() == 0:
        raise ValueError(f"{name}: empty array of shape {shape}; an ensemble needs at least one structure")
    if n_residues is not None and shape[-2] != n_residues:
        raise ValueError(
            f"{name}: {shape[-2]} residues, but the reference states have {n_residues}; the metrics need one "
            "fixed residue correspondence (select the same C-alpha atoms in both)"
        )
    # One reduction instead of an elementwise mask: any NaN or infinity makes the sum non-finite (the full mask
    # is built only then, to count the bad rows; a finite array can only fail here by overflowing ~1e308).
    if not torch.isfinite(tensor.sum()):
        bad = int((~torch.isfinite(tensor)).any(dim=-1).sum())
        if bad:
            raise ValueError(f"{name}: {bad} coordinate row(s) are NaN or infinite")
        raise ValueError(f"{name}: coordinates too large to sum in float64 (expected A, about 1e2)")
    return tensor


def check_ensemble(ensemble, n_residues: int | None = None, name: str = "ensemble") -> torch.Tensor:
    """An ensemble as a ``(N, L, 3)`` float64 tensor (one structure ``(L, 3)`` becomes ``N = 1``)."""
    tensor = check_coords(ensemble, name, n_residues)
    if tensor.dim() == 2:
        tensor = tensor.unsqueeze(0)
    if tensor.dim() != 3:
        raise ValueError(f"{name}: expected (N, L, 3) structures, got shape {tuple(tensor.shape)}")
    if tensor.shape[0] == 0:
        raise ValueError(f"{name}: the ensemble is empty; a model must return at least one structure")
    return tensor


def _pair(x, y) -> tuple[torch.Tensor, torch.Tensor]:
    x = check_coords(x, "first structure(s)")
    y = check_coords(y, "second structure(s)")
    if x.shape[-2] != y.shape[-2]:
        raise ValueError(
            f"residue counts differ: {x.shape[-2]} vs {y.shape[-2]}; the metrics need one fixed residue correspondence"
        )
    device = x.device if x.device.type != "cpu" else y.device
    return x.to(device), y.to(device)


def kabsch_transform(mobile: torch.Tensor, target: torch.Tensor, weights: torch.Tensor | None = None):
    """Rotation ``R`` and translation ``t`` minimising ``sum_i w_i |R x_i + t - y_i|^2`` (batched Kabsch).

    Args:
        mobile: ``(..., L, 3)`` coordinates moved onto ``target``.
        target: ``(..., L, 3)`` coordinates (broadcast against ``mobile``).
        weights: ``(..., L)`` non-negative weights (a 0/1 mask selects a subset); None: all ones.

    Returns:
        ``R (..., 3, 3)`` (a proper rotation, det +1) and ``t (..., 3)``; apply as ``mobile @ R.mT + t``.
    """
    if weights is None:
        mobile_centre, target_centre = mobile.mean(dim=-2), target.mean(dim=-2)
        covariance = (mobile - mobile_centre.unsqueeze(-2)).mT @ (target - target_centre.unsqueeze(-2))
    else:
        # Weighted moments as batched matmuls over the residues: w @ x, w @ (x outer y); one (.., L, 9) product
        # serves every seed fragment of the TM search (the masks only change w).
        w = (weights / weights.sum(dim=-1, keepdim=True).clamp_min(1e-300)).unsqueeze(-2)
        mobile_centre, target_centre = (w @ mobile).squeeze(-2), (w @ target).squeeze(-2)
        outer = (mobile.unsqueeze(-1) * target.unsqueeze(-2)).flatten(-2)
        covariance = (w @ outer).squeeze(-2).unflatten(-1, (3, 3))
        covariance = covariance - mobile_centre.unsqueeze(-1) * target_centre.unsqueeze(-2)
    rotation = _rotation_from_covariance(covariance)
    translation = target_centre - (rotation @ mobile_centre.unsqueeze(-1)).squeeze(-1)
    return rotation, translation


def _rotation_from_covariance(covariance: torch.Tensor) -> torch.Tensor:
    """The proper rotation ``R`` maximising ``tr(R H)`` for ``H = sum_l x_l y_l^T`` (``(..., 3, 3)``, by SVD)."""
    u, _, vh = torch.linalg.svd(covariance)
    # The reflection fix: flip the last singular direction where the best orthogonal map is improper.
    sign = torch.sign(torch.linalg.det(vh.mT @ u.mT))
    sign = torch.where(sign == 0, torch.ones_like(sign), sign)
    correction = torch.ones((*sign.shape, 3), dtype=covariance.dtype, device=covariance.device)
    correction[..., 2] = sign
    return vh.mT @ (correction.unsqueeze(-1) * u.mT)


def superpose(mobile, target, weights: torch.Tensor | None = None) -> torch.Tensor:
    """``mobile`` moved onto ``target`` by the (weighted) Kabsch superposition; shapes broadcast."""
    mobile, target = _pair(mobile, target)
    rotation, translation = kabsch_transform(mobile, target, weights)
    return mobile @ rotation.mT + translation.unsqueeze(-2)


def kabsch_rmsd(x, y) -> torch.Tensor:
    """C-alpha RMSD after optimal superposition, ``(...)`` for ``(..., L, 3)`` inputs that broadcast.

    Equal to ``MDAnalysis.analysis.rms.rmsd(x, y, center=True, superposition=True)`` (to 1e-6 A in the tests).
    The RMSD needs no rotation: each input is centred once (before broadcasting), the ``(..., 3, 3)``
    covariances of every pair come from one batched contraction over the residues, and the minimal squared
    deviation is ``G_x + G_y - 2 lambda_max`` with ``lambda_max`` the largest eigenvalue of Horn's 4x4 quaternion
    key matrix of the covariance (a proper rotation; reflections are excluded by construction), found by
    Newton's method on its characteristic polynomial as in QCP (Theobald 2005), all in float64.
    """
    x, y = _pair(x, y)
    length = x.shape[-2]
    centre_x, centre_y = x.mean(dim=-2, keepdim=True), y.mean(dim=-2, keepdim=True)
    # G = sum_l |z_l - mean|^2 = sum_l |z_l|^2 - L |mean|^2 (no centred copy of the big input), broadcast.
    inner = sum(
        z.square().sum(dim=(-2, -1)) - length * m.square().sum(dim=(-2, -1)) for z, m in ((x, centre_x), (y, centre_y))
    )
    # sum_l (x_l - mx)(y_l - my)^T = sum_l x_l (y_l - my)^T: centring one input suffices, so centre the smaller.
    if y.numel() <= x.numel():
        covariance = torch.einsum("...li,...lj->...ij", x, y - centre_y)  # every broadcast pair in one contraction
    else:
        covariance = torch.einsum("...li,...lj->...ij", x - centre_x, y)
    largest = _qcp_largest_eigenvalue(covariance, 0.5 * inner)
    inner = inner.expand_as(largest)
    squared = (inner - 2.0 * largest).clamp_min(0.0)  # L x MSD
    # G - 2 lambda cancels to ~1e-16 G; near-identical pairs (L x MSD below 1e-6 G, RMSD under ~0.03 A for AdK)
    # are recomputed from the explicit superposition, so an RMSD of 0 stays 0 rather than ~1e-7.
    close = squared <= 1e-6 * inner
    if bool(close.any()):
        mobile, target = (z[close] for z in torch.broadcast_tensors(x - centre_x, y - centre_y))
        moved = mobile @ kabsch_transform(mobile, target)[0].mT
        squared = squared.masked_scatter(close, (moved - target).square().sum(dim=(-2, -1)))
    return (squared / length).sqrt()


def _key_matrix(covariance: torch.Tensor) -> torch.Tensor:
    """Horn's symmetric 4x4 quaternion matrix ``(..., 4, 4)`` of covariances ``S = sum_l x_l y_l^T (..., 3, 3)``.

    Its largest eigenvalue is ``max over proper rotations R of tr(R S) = sum_l y_l . (R x_l)`` (Horn 1987).
    """
    (sxx, sxy, sxz), (syx, syy, syz), (szx, szy, szz) = (covariance[..., i, :].unbind(-1) for i in range(3))
    rows = (
        (sxx + syy + szz, syz - szy, szx - sxz, sxy - syx),
        (syz - szy, sxx - syy - szz, sxy + syx, szx + sxz),
        (szx - sxz, sxy + syx, -sxx + syy - szz, syz + szy),
        (sxy - syx, szx + sxz, syz + szy, -sxx - syy + szz),
    )
    return torch.stack([torch.stack(row, dim=-1) for row in rows], dim=-2)


def _qcp_largest_eigenvalue(covariance: torch.Tensor, bound: torch.Tensor, iterations: int = 50) -> torch.Tensor:
    """Largest eigenvalue ``(...)`` of :func:`_key_matrix` by Newton's method from the upper bound ``(G_x + G_y)/2``.

    The key matrix is traceless, so its characteristic polynomial is ``l^4 + c2 l^2 + c1 l + c0`` with
    ``c2 = -2 |S|_F^2``, ``c1 = -8 det S`` and ``c0 = det K``. Its roots are real and ``(G_x + G_y)/2`` is at or
    above the largest, so Newton's iterates fall monotonically onto it (quadratically for a simple root, still
    to float64 precision within ``iterations`` for a double one). Any pair not converged then is solved by
    ``torch.linalg.eigvalsh``.
    """
    key = _key_matrix(covariance)
    c2 = -2.0 * covariance.square().sum(dim=(-2, -1))
    c1 = -8.0 * torch.linalg.det(covariance)
    c0 = torch.linalg.det(key)
    value = bound.expand_as(c2).clone()
    converged = False
    for _ in range(iterations):
        square = value * value
        polynomial = (square + c2) * square + c1 * value + c0
        slope = (4.0 * square + 2.0 * c2) * value + c1
        step = torch.where(slope > 0, polynomial / slope.clamp_min(1e-300), torch.zeros_like(value))
        value = value - step
        if bool((step.abs() <= 1e-13 * value.abs().clamp_min(1.0)).all()):
            converged = True
            break
    if not converged:
        square = value * value
        residual = ((square + c2) * square + c1 * value + c0).abs()
        slope = ((4.0 * square + 2.0 * c2) * value + c1).abs()
        unsure = ~(residual <= 1e-10 * slope.clamp_min(1e-300) * value.abs().clamp_min(1.0))
        if bool(unsure.any()):
            value = torch.where(unsure, torch.linalg.eigvalsh(key)[..., -1], value)
    return value


def tm_d0(length: int) -> float:
    """TM-score's distance scale ``d0 = 1.24 (L - 15)^(1/3) - 1.8`` (0.5 for L <= 21, as the program)."""
    if length <= 21:
        return 0.5
    return max(0.5, 1.24 * (length - 15) ** (1.0 / 3.0) - 1.8)


def _seed_masks(length: int, device) -> torch.Tensor:
    """The TM search's seed fragments as ``(S, L)`` 0/1 masks: lengths L, L/2, L/4 and 8, tiling the chain."""
    sizes = []
    for size in (length, length // 2, length // 4, TM_MIN_FRAGMENT):
        size = min(length, max(size, 3))
        if size not in sizes:
            sizes.append(size)
    rows = []
    for size in sizes:
        step = size  # non-overlapping windows (the TM-score program slides by 1; see the module docstring)
        starts = list(range(0, length - size + 1, step))
        if starts[-1] != length - size:
            starts.append(length - size)
        for start in starts:
            row = torch.zeros(length, dtype=torch.float32, device=device)
            row[start : start + size] = 1.0
            rows.append(row)
    return torch.stack(rows)


def tm_score(x, y, iterations: int = 20, chunk: int = 256) -> torch.Tensor:
    """TM-score of ``x`` against ``y`` with a fixed residue correspondence, ``(...)`` for ``(..., L, 3)`` inputs.

    ``TM = max over superpositions of (1/L) sum_i 1 / (1 + (d_i / d0)^2)`` with ``L`` the length of the pair and
    ``d0`` from :func:`tm_d0`. The maximum is searched as the TM-score program does: Kabsch on every seed fragment
    (lengths L, L/2, L/4 and 8), then up to ``iterations`` refinements, each a Kabsch on the residues with
    ``d_i < max(d0, 4.5)`` under the current superposition (kept while at least 3 residues qualify).

    Args:
        x: ``(..., L, 3)`` model structures.
        y: ``(..., L, 3)`` reference structures (broadcast against ``x``).
        iterations: Refinement rounds per seed.
        chunk: Pairs scored at once (bounds memory: a chunk holds ``chunk x seeds x L`` distances).
    """
    x, y = _pair(x, y)
    x, y = torch.broadcast_tensors(x, y)
    shape, length = x.shape[:-2], x.shape[-2]
    flat_x, flat_y = x.reshape(-1, length, 3), y.reshape(-1, length, 3)
    d0 = tm_d0(length)
    cutoff = max(d0, TM_SEARCH_FLOOR)
    seeds = _seed_masks(length, x.device)
    scores = []
    for start in range(0, flat_x.shape[0], chunk):
        mobile, target = flat_x[start : start + chunk], flat_y[start : start + chunk]
        # A canonical frame before the float32 search: the target centred on its principal axes, the mobile
        # structure superposed onto it (float64). The search then sees the same numbers whatever rigid motion
        # either input had (so the score is invariant to 1e-6), and centred coordinates lose little to the
        # cancellation in its expanded distances.
        target = _principal_frame(target - target.mean(dim=-2, keepdim=True))
        rotation, translation = kabsch_transform(mobile, target)
        mobile = mobile @ rotation.mT + translation.unsqueeze(-2)
        best_mask = _tm_search(mobile.float(), target.float(), seeds, d0, cutoff, iterations)
        # The final score in float64, from the residue set whose superposition scored best in the search.
        rotation, translation = kabsch_transform(mobile, target, best_mask.to(DTYPE))
        distance = (mobile @ rotation.mT + translation.unsqueeze(-2) - target).square().sum(-1).sqrt()
        scores.append((1.0 / (1.0 + (distance / d0) ** 2)).mean(dim=-1))
    return torch.cat(scores).reshape(shape)


def _principal_frame(centred: torch.Tensor) -> torch.Tensor:
    """Centred ``(B, L, 3)`` structures rotated onto their principal axes (signs fixed by the third moment)."""
    _, axes = torch.linalg.eigh(centred.mT @ centred)  # (B, 3, 3), columns ascending
    projected = centred @ axes
    signs = torch.sign((projected**3).sum(dim=-2))
    signs = torch.where(signs == 0, torch.ones_like(signs), signs)
    projected = projected * signs.unsqueeze(-2)
    # Keep it a proper rotation: flip the first (least spread) axis when the frame is a reflection.
    proper = torch.linalg.det(axes * signs.unsqueeze(-2)) < 0
    return torch.where(proper.view(-1, 1, 1), projected * torch.tensor([-1.0, 1.0, 1.0], dtype=DTYPE), projected)


def _tm_search(mobile, target, seeds, d0: float, cutoff: float, iterations: int) -> torch.Tensor:
    """The residue set whose superposition scores best, ``(B, L)``, over the seed fragments of ``(B, L, 3)`` pairs.

    Every (pair, seed) row refines until its residue set stops changing (or ``iterations`` rounds); a pair
    leaves the batch once all its rows have converged. A row's superposition (R, t) comes from the weighted
    moments ``w @ x``, ``w @ y`` and ``w @ (y outer x)``, and its squared distances ``|R x_l + t - y_l|^2``
    expand into ``|x_l|^2 + |y_l|^2 + |t|^2 - 2 t.y_l + 2 (R^T t).x_l - 2 <R, y_l x_l^T>``: batched matmuls
    over the residues, with no ``(B, S, L, 3)`` array. Runs in the inputs' dtype (float32 from :func:`tm_score`).
    """
    outer = (target.unsqueeze(-1) * mobile.unsqueeze(-2)).flatten(-2)  # (B, L, 9): y_l x_l^T, row-major
    norms = mobile.square().sum(-1) + target.square().sum(-1)  # (B, L)
    mask = seeds.to(mobile.dtype).unsqueeze(0).repeat(mobile.shape[0], 1, 1)  # (B, S, L)
    best = torch.full((mobile.shape[0],), -1.0, dtype=mobile.dtype, device=mobile.device)
    best_mask = mask[:, 0].clone()
    active = torch.arange(mobile.shape[0], device=mobile.device)
    for _ in range(iterations + 1):
        x, y, xy, current = mobile[active], target[active], outer[active], mask[active]
        w = current / current.sum(dim=-1, keepdim=True).clamp_min(1e-30)  # (A, S, L)
        mobile_centre, target_centre = w @ x, w @ y  # (A, S, 3)
        covariance = (w @ xy).unflatten(-1, (3, 3)).mT  # sum_l w_l x_l y_l^T
        covariance = covariance - mobile_centre.unsqueeze(-1) * target_centre.unsqueeze(-2)
        rotation = _rotation_from_covariance(covariance)  # (A, S, 3, 3)
        translation = target_centre - (rotation @ mobile_centre.unsqueeze(-1)).squeeze(-1)
        squared = (
            norms[active].unsqueeze(1)
            + translation.square().sum(-1, keepdim=True)
            - 2 * translation @ y.mT
            + 2 * (rotation.mT @ translation.unsqueeze(-1)).squeeze(-1) @ x.mT
            - 2 * rotation.flatten(-2) @ xy.mT
        )
        distance = squared.clamp_min(0).sqrt()  # (A, S, L)
        score, seed = (1.0 / (1.0 + (distance / d0) ** 2)).mean(dim=-1).max(dim=-1)
        improved = score > best[active]
        best[active[improved]] = score[improved]
        best_mask[active[improved]] = current[improved, seed[improved]]
        new_mask = (distance < cutoff).to(mobile.dtype)
        changed = (new_mask.sum(dim=-1) >= 3) & (new_mask != current).any(dim=-1)  # (A, S)
        mask[active] = torch.where(changed.unsqueeze(-1), new_mask, current)
        active = active[changed.any(dim=-1)]
        if active.numel() == 0:
            break
    return best_mask


def distance_matrix(ensemble, states, metric: str = "rmsd") -> torch.Tensor:
    """``(N, M)`` RMSD (or TM-score) of every sample of ``ensemble (N, L, 3)`` to every state ``(M, L, 3)``."""
    ensemble = check_ensemble(ensemble)
    states = check_ensemble(states, name="states")
    ensemble = check_ensemble(ensemble, states.shape[1])
    if metric == "rmsd":
        return kabsch_rmsd(ensemble.unsqueeze(1), states.unsqueeze(0))
    if metric == "tm":
        return tm_score(ensemble.unsqueeze(1), states.unsqueeze(0))
    raise ValueError(f"metric must be 'rmsd' or 'tm', got {metric!r}")


def state_coverage(ensemble, states, threshold: float = 2.0, metric: str = "rmsd") -> torch.Tensor:
    """``(M,)`` 0/1: whether some sample is within ``threshold`` of each state.

    ``cov_s = 1[min_j RMSD(X_j, S_s) <= threshold]`` (default 2.0 A), or with ``metric="tm"``
    ``1[max_j TM(X_j, S_s) >= threshold]`` (the spec's alternative, 0.9).
    """
    table = distance_matrix(ensemble, states, metric)
    covered = table.min(dim=0).values <= threshold if metric == "rmsd" else table.max(dim=0).values >= threshold
    return covered.to(DTYPE)


def multistate_success(coverage: torch.Tensor) -> torch.Tensor:
    """1 when every state is covered (``coverage (..., M)`` from :func:`state_coverage`)."""
    return coverage.min(dim=-1).values


def nearest_state(ensemble, states) -> torch.Tensor:
    """``(N,)`` index of the state each sample is nearest to (by RMSD)."""
    return distance_matrix(ensemble, states).argmin(dim=1)


def state_preference(ensemble, state_a, state_b) -> torch.Tensor:
    """Fraction of samples nearer (by RMSD) ``state_a`` than ``state_b`` (ties count as nearer ``state_b``)."""
    ensemble = check_ensemble(ensemble)
    a = check_coords(state_a, "state_a", ensemble.shape[1], batched=False)
    b = check_coords(state_b, "state_b", ensemble.shape[1], batched=False)
    return (kabsch_rmsd(ensemble, a) < kabsch_rmsd(ensemble, b)).to(DTYPE).mean()


def context_delta(ligand_ensemble, apo_ensemble, holo_state, apo_state) -> torch.Tensor:
    """Context sensitivity ``P(nearer holo | ligand context) - P(nearer holo | apo context)``.

    An ideal model gives 1, a context-blind one about 0.
    """
    return state_preference(ligand_ensemble, holo_state, apo_state) - state_preference(
        apo_ensemble, holo_state, apo_state
    )


def path_fidelity(frames, ensemble) -> torch.Tensor:
    """``(F,)`` RMSD from each transition frame ``(F, L, 3)`` to its nearest sample: do samples cover intermediates?"""
    frames = check_ensemble(frames, name="path frames")
    ensemble = check_ensemble(ensemble, frames.shape[1])
    return kabsch_rmsd(frames.unsqueeze(1), ensemble.unsqueeze(0)).min(dim=1).values


def random_rotation(generator: torch.Generator | None = None) -> torch.Tensor:
    """A uniformly random proper rotation ``(3, 3)`` (QR of a Gaussian matrix), float64."""
    q, r = torch.linalg.qr(torch.randn(3, 3, dtype=DTYPE, generator=generator))
    q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)
    if torch.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


def rigid_motion(coords, generator: torch.Generator | None = None, shift: float = 20.0) -> torch.Tensor:
    """``coords`` under one random rotation and translation (for invariance checks)."""
    coords = check_coords(coords)
    rotation = random_rotation(generator)
    translation = (torch.rand(3, dtype=DTYPE, generator=generator) - 0.5) * 2 * shift
    return coords @ rotation.mT + translation


def summary(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation of a list (0 for one value)."""
    values = [float(v) for v in values]
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
