"""Anisotropic network model (ANM) in numpy: the physics-only multi-state sampler of ProMiSE's baselines.

ProDy's ANM, re-implemented (its source build fails here): springs of constant ``gamma`` between C-alpha pairs
closer than ``cutoff`` (15 A), the ``3L x 3L`` Hessian, its softest non-rigid modes (the six zero modes of
rigid-body motion skipped). The sampler moves the open state along the 3 softest modes with Gaussian amplitudes
proportional to ``1/sqrt(eigenvalue)`` (the Boltzmann weights), one global scale calibrated so the mean RMSD
to the start is ``target_rmsd`` (3 A).
"""

from __future__ import annotations

import numpy as np

RIGID_MODES = 6


def anm_hessian(coords: np.ndarray, cutoff: float = 15.0, gamma: float = 1.0) -> np.ndarray:
    """The ANM Hessian ``(3L, 3L)`` of ``(L, 3)`` C-alpha coordinates."""
    coords = np.asarray(coords, dtype=np.float64)
    if coords.ndim != 2 or coords.shape[1] != 3:
        raise ValueError(f"ANM needs (L, 3) coordinates, got shape {coords.shape}")
    n = coords.shape[0]
    delta = coords[None, :, :] - coords[:, None, :]  # (L, L, 3): r_j - r_i
    squared = (delta**2).sum(-1)
    contact = (squared <= cutoff**2) & ~np.eye(n, dtype=bool)
    safe = np.where(contact, squared, 1.0)
    blocks = -gamma * delta[:, :, :, None] * delta[:, :, None, :] / safe[:, :, None, None]  # (L, L, 3, 3)
    blocks = np.where(contact[:, :, None, None], blocks, 0.0)
    diagonal = -blocks.sum(axis=1)  # super-element: minus the sum of the row's off-diagonal blocks
    blocks[np.arange(n), np.arange(n)] = diagonal
    return blocks.transpose(0, 2, 1, 3).reshape(3 * n, 3 * n)


def anm_modes(coords: np.ndarray, n_modes: int = 3, cutoff: float = 15.0, gamma: float = 1.0):
    """The ``n_modes`` softest non-rigid modes: eigenvalues ``(k,)`` and unit eigenvectors ``(k, L, 3)``."""
    hessian = anm_hessian(coords, cutoff, gamma)
    values, vectors = np.linalg.eigh(hessian)
    values = values[RIGID_MODES : RIGID_MODES + n_modes]
    vectors = vectors[:, RIGID_MODES : RIGID_MODES + n_modes].T.reshape(n_modes, -1, 3)
    if values[0] <= 1e-8:
        raise ValueError("the elastic network has more than six zero modes: is it disconnected (cutoff too small)?")
    return values, vectors


def overlap(mode: np.ndarray, displacement: np.ndarray) -> float:
    """Cosine between a mode and a displacement (both ``(L, 3)``), in ``[-1, 1]``."""
    mode, displacement = np.ravel(mode), np.ravel(displacement)
    return float(mode @ displacement / (np.linalg.norm(mode) * np.linalg.norm(displacement)))


class ANMSampler:
    """Samples along the softest ANM modes of a start structure.

    Args:
        start: ``(L, 3)`` C-alpha coordinates (the open state).
        n_modes: Modes used (3).
        target_rmsd: Mean RMSD (A, without refitting) of the samples to ``start``; sets the amplitude scale.
        cutoff: Contact cutoff (A).
        gamma: Spring constant.
        calibration_draws: Draws of the fixed calibration sample.
    """

    def __init__(
        self,
        start: np.ndarray,
        n_modes: int = 3,
        target_rmsd: float = 3.0,
        cutoff: float = 15.0,
        gamma: float = 1.0,
        calibration_draws: int = 4096,
    ) -> None:
        self.start = np.asarray(start, dtype=np.float64)
        self.values, self.modes = anm_modes(self.start, n_modes, cutoff, gamma)
        # Modes are orthonormal and orthogonal to rigid motion, so the RMSD of a draw is
        # scale * |z / sqrt(lambda)| / sqrt(L); the calibration fixes scale by a seed-independent draw.
        z = np.random.default_rng(12345).standard_normal((calibration_draws, n_modes))
        unit = np.sqrt(((z**2) / self.values).sum(axis=1) / self.start.shape[0]).mean()
        self.scale = target_rmsd / unit

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``(n, L, 3)`` structures ``start + scale * sum_k z_k v_k / sqrt(lambda_k)``, ``z ~ N(0, 1)``."""
        z = rng.standard_normal((n, len(self.values))) / np.sqrt(self.values)
        return self.start + self.scale * np.einsum("nk,kla->nla", z, self.modes)
