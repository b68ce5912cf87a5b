"""PDE data from our own solvers, and the torch residual operators the physics losses use.

Two problems on the unit square, discretised on an ``n x n`` node grid that includes the boundary
(``h = 1 / (n - 1)``):

* **Poisson / electrostatics** (the paper's "charge" task): ``-Delta U = rho`` with ``U = 0`` on the
  boundary. ``rho`` holds point charges: the condition channel stores the charge ``q`` at its node (as
  the authors' v2 data does), the physical source is ``q / h^2``. Solved exactly for the 5-point
  Laplacian by a type-I discrete sine transform (:func:`solve_poisson`), so the residual of the ground
  truth is round-off (~1e-12 relative).
* **Darcy flow** (reconstructed, FNO-style rather than PIDM's fixed-source variant): ``-div(K grad p) = f``
  with ``p = 0`` on the boundary, ``K`` in {12, 3} from a thresholded Gaussian random field. Solved by a
  cell-centred-at-nodes finite-volume scheme with harmonic-mean face permeabilities and a sparse direct
  solve (:func:`solve_darcy`); :func:`darcy_residual` is the same discrete operator in torch.

The residual operators return the interior residual in physical units (the units of the source term)
and the boundary residual separately; the physics losses use both, the reported metric uses the interior.
:func:`spectral_residual` scores an interior residual on its lowest sine modes only: the 5-point
residual of a field with white noise of rms 1% of its spread is larger than that of ``U = 0``, so the raw
residual measures pixel-level roughness; its low-mode part measures the physics at the scale a model resolves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

__all__ = [
    "ChargeConfig",
    "DarcyConfig",
    "boundary_values",
    "darcy_residual",
    "darcy_source",
    "fd_solve_poisson",
    "grid_spacing",
    "laplacian_5pt",
    "lowpass_dst",
    "poisson_residual",
    "sample_charges",
    "sample_permeability",
    "SPECTRAL_MODES",
    "spectral_residual",
    "sine_modes",
    "solve_darcy",
    "solve_poisson",
]


def grid_spacing(size: int) -> float:
    """Node spacing ``h = 1 / (size - 1)`` of a ``size x size`` grid with nodes on the boundary."""
    if size < 4:
        raise ValueError(f"grid size must be at least 4 nodes per side (boundary included), got {size}")
    return 1.0 / (size - 1)


# --------------------------------------------------------------------------------------------- Poisson


@dataclass
class ChargeConfig:
    """How point-charge sources are drawn.

    Args:
        num_charges: Charges per field (the paper's K).
        q_min: Smallest charge magnitude.
        q_max: Largest charge magnitude (signs are random).
        wall_band: If > 0, charges lie within this many nodes of the wall (the "shifted boundary" OOD
            split); 0 means anywhere on the interior.
    """

    num_charges: int = 2
    q_min: float = 0.5
    q_max: float = 1.5
    wall_band: int = 0


def sample_charges(num: int, size: int, config: ChargeConfig, rng: np.random.Generator) -> np.ndarray:
    """Charge maps ``(num, size, size)``: ``q`` at each charge's node, 0 elsewhere and on the boundary.

    Args:
        num: Number of fields.
        size: Nodes per side, boundary included.
        config: Number, magnitude and placement of the charges.
        rng: Random generator.
    """
    if config.num_charges < 1 or not 0 < config.q_min <= config.q_max:
        raise ValueError(f"need num_charges >= 1 and 0 < q_min <= q_max, got {config}")
    interior = size - 2
    rho = np.zeros((num, size, size))
    shape = (num, config.num_charges)
    charges = rng.choice([-1.0, 1.0], size=shape) * rng.uniform(config.q_min, config.q_max, size=shape)
    if config.wall_band > 0:
        band = min(config.wall_band, interior // 2)
        # A node whose distance to the nearest wall is < band: draw both coordinates, then pin one of
        # them into the band next to a random wall.
        i = rng.integers(0, interior, size=shape)
        j = rng.integers(0, interior, size=shape)
        offset = rng.integers(0, band, size=shape)
        near = np.where(rng.random(shape) < 0.5, offset, interior - 1 - offset)
        pin_i = rng.random(shape) < 0.5
        i = np.where(pin_i, near, i)
        j = np.where(pin_i, j, near)
    else:
        i = rng.integers(0, interior, size=shape)
        j = rng.integers(0, interior, size=shape)
    rows = np.repeat(np.arange(num), config.num_charges)
    np.add.at(rho, (rows, i.ravel() + 1, j.ravel() + 1), charges.ravel())
    return rho


def solve_poisson(charge: np.ndarray) -> np.ndarray:
    """Exact solution of the 5-point ``-Delta_h U = charge / h^2`` with ``U = 0`` on the boundary.

    The type-I DST diagonalises the Dirichlet 5-point Laplacian, so one forward transform, a division
    by its eigenvalues and one inverse transform solve the linear system to round-off.

    Args:
        charge: ``(..., n, n)`` charge maps (boundary entries are ignored).

    Returns:
        ``(..., n, n)`` potentials, zero on the boundary.
    """
    from scipy.fft import dstn, idstn

    charge = np.asarray(charge, dtype=np.float64)
    n = charge.shape[-1]
    h = grid_spacing(n)
    m = np.arange(1, n - 1)
    # Eigenvalues of -Delta_h (1-D) with Dirichlet ends: (2 - 2 cos(pi m / (n - 1))) / h^2.
    lam = (2.0 - 2.0 * np.cos(np.pi * m / (n - 1))) / h**2
    source = charge[..., 1:-1, 1:-1] / h**2
    coeffs = dstn(source, type=1, axes=(-2, -1), norm="ortho") / (lam[:, None] + lam[None, :])
    potential = np.zeros_like(charge)
    potential[..., 1:-1, 1:-1] = idstn(coeffs, type=1, axes=(-2, -1), norm="ortho")
    return potential


def fd_solve_poisson(charge: np.ndarray) -> np.ndarray:
    """Solve the same 5-point system as :func:`solve_poisson` by a sparse LU factorisation (no transform).

    An independent route to the discrete solution: the Dirichlet 5-point matrix of the interior is assembled
    explicitly and factorised once, then every charge map is one triangular solve. It is the
    ``reference_fd_solver`` arm of ``zoo eval repa_p`` (the physical limit of any learned model) and checks
    the DST ground truth.

    Args:
        charge: ``(..., n, n)`` charge maps (boundary entries are ignored).

    Returns:
        ``(..., n, n)`` potentials, zero on the boundary.
    """
    import scipy.sparse as sp
    from scipy.sparse.linalg import splu

    charge = np.asarray(charge, dtype=np.float64)
    n = charge.shape[-1]
    m = n - 2
    second = sp.diags([-np.ones(m - 1), 2 * np.ones(m), -np.ones(m - 1)], [-1, 0, 1])  # -h^2 d^2/dx^2
    eye = sp.identity(m)
    minus_laplacian = (sp.kron(second, eye) + sp.kron(eye, second)).tocsc()  # -h^2 Delta_h on the interior
    rhs = charge[..., 1:-1, 1:-1].reshape(-1, m * m).T  # -h^2 Delta_h U = h^2 (q / h^2) = q
    potential = np.zeros_like(charge)
    potential[..., 1:-1, 1:-1] = splu(minus_laplacian).solve(rhs).T.reshape(*charge.shape[:-2], m, m)
    return potential


_LAPLACE_KERNEL = torch.tensor([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]])


def laplacian_5pt(field: torch.Tensor, h: float) -> torch.Tensor:
    """Second-order 5-point Laplacian on the interior nodes: ``(B, 1, n, n) -> (B, 1, n-2, n-2)``."""
    kernel = _LAPLACE_KERNEL.to(dtype=field.dtype, device=field.device).view(1, 1, 3, 3)
    return F.conv2d(field, kernel) / h**2


def boundary_values(field: torch.Tensor) -> torch.Tensor:
    """The ``4 (n - 1)`` boundary nodes of ``(B, 1, n, n)`` fields, each once: ``(B, 4 (n - 1))``."""
    return torch.cat(
        [field[:, 0, 0, :], field[:, 0, -1, :], field[:, 0, 1:-1, 0], field[:, 0, 1:-1, -1]],
        dim=1,
    )


def poisson_residual(potential: torch.Tensor, charge: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Residual of ``-Delta U = q / h^2`` with ``U = 0`` on the boundary.

    Args:
        potential: ``(B, 1, n, n)`` potentials ``U``.
        charge: ``(B, 1, n, n)`` charge maps (``q`` at a charge's node).

    Returns:
        ``(interior, boundary)``: ``Delta_h U + q / h^2`` on the ``(n-2)^2`` interior nodes, shape
        ``(B, 1, n-2, n-2)``, in the units of the source; and ``U`` on the boundary, ``(B, 4 (n - 1))``.
    """
    _check_fields(potential, charge)
    h = grid_spacing(potential.shape[-1])
    interior = laplacian_5pt(potential, h) + charge[..., 1:-1, 1:-1] / h**2
    return interior, boundary_values(potential)


# ----------------------------------------------------------------------------------- spectral residual

#: Default number ``k`` of sine modes per axis of :func:`spectral_residual`: what an 8 x 8 grid, the coarsest
#: level of the published U-Net, carries (fixed before any model was scored with it).
SPECTRAL_MODES = 8


def sine_modes(m: int, k: int, dtype: torch.dtype = torch.float64, device=None) -> torch.Tensor:
    """The first ``k`` orthonormal type-I sine vectors on ``m`` interior nodes, as columns: ``(m, k)``.

    Column ``a`` (``a = 1 .. k``) is ``sqrt(2 / (m + 1)) sin(pi a i / (m + 1))`` at nodes ``i = 1 .. m``: the
    Dirichlet eigenvectors of the 1-D 3-point Laplacian, so the 2-D 5-point Laplacian of a field that is zero
    on the boundary is diagonal in the products of two columns, with eigenvalue ``-(lam_a + lam_b)``,
    ``lam_a = (2 - 2 cos(pi a / (m + 1))) / h^2``. ``S^T X S`` is the orthonormal DST-I (``scipy.fft.dstn(X,
    type=1, norm="ortho")``) of an ``(m, m)`` array, truncated to its ``k x k`` lowest modes.
    """
    _check_modes(m, k)
    i = torch.arange(1, m + 1, dtype=torch.float64)
    a = torch.arange(1, k + 1, dtype=torch.float64)
    basis = (2.0 / (m + 1)) ** 0.5 * torch.sin(torch.pi * i[:, None] * a[None, :] / (m + 1))
    return basis.to(dtype=dtype, device=device)


def lowpass_dst(interior: torch.Tensor, k: int) -> torch.Tensor:
    """Projection of interior fields onto their lowest ``k x k`` sine modes: ``(B, 1, m, m) -> (B, 1, m, m)``.

    The projection commutes with the 5-point Laplacian of zero-boundary fields, so the low-pass of a residual
    ``Delta_h U + q / h^2`` is the residual of the low-passed field against the low-passed source: the
    spectral residual and "the residual of a low-pass-filtered sample" are one quantity.
    """
    basis = _interior_modes(interior, k)
    return basis @ (basis.T @ interior @ basis) @ basis.T


def spectral_residual(interior: torch.Tensor, k: int = SPECTRAL_MODES) -> torch.Tensor:
    """Root mean square, over the interior nodes, of the part of a residual on its lowest ``k x k`` sine modes.

    ``sqrt(sum_{a, b <= k} c_ab^2) / m`` with ``c = S^T R S`` the orthonormal DST-I coefficients of the interior
    residual ``R`` (:func:`sine_modes`): by Parseval, the rms of :func:`lowpass_dst` ``(R, k)`` over the ``m^2``
    interior nodes. With ``k = m`` it is the rms of the 5-point residual itself. Scales below about ``1 / k`` of
    the domain do not count: white noise of rms ``s`` on a 32 x 32 potential adds about ``0.16 * s / 0.001`` at
    ``k = 8`` against about ``4.3 * s / 0.001`` (rms) to the full residual. Boundary values are not scored
    separately (they enter the residual of the nodes next to the wall through the stencil).

    Args:
        interior: ``(B, 1, m, m)`` interior residuals, e.g. the first output of :func:`poisson_residual`.
        k: Sine modes per axis kept, ``1 <= k <= m``.

    Returns:
        ``(B,)``: one value per field, in the units of ``interior`` (for :func:`poisson_residual`, the source's
        ``q / h^2``).
    """
    basis = _interior_modes(interior, k)
    coefficients = basis.T @ interior[:, 0] @ basis
    return coefficients.square().sum(dim=(-2, -1)).sqrt() / interior.shape[-1]


def _interior_modes(interior: torch.Tensor, k: int) -> torch.Tensor:
    if interior.ndim != 4 or interior.shape[1] != 1 or interior.shape[-1] != interior.shape[-2]:
        raise ValueError(f"expected interior fields of shape (B, 1, m, m), got {tuple(interior.shape)}")
    return sine_modes(interior.shape[-1], k, dtype=interior.dtype, device=interior.device)


def _check_modes(m: int, k: int) -> None:
    if m < 1:
        raise ValueError(f"need at least one interior node per side, got m = {m}")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= m:
        raise ValueError(f"k (sine modes per axis) must be an integer in [1, m = {m}], got {k!r}")


# ----------------------------------------------------------------------------------------------- Darcy


@dataclass
class DarcyConfig:
    """How permeability fields and sources are drawn.

    Args:
        length_scale: Correlation length of the Gaussian random field (fraction of the domain).
        k_high: Permeability where the field is positive.
        k_low: Permeability where it is negative.
        source: Constant source ``f`` on the interior.
        source_box: ``(i0, i1, j0, j1)`` fractions of the domain where the source acts (default: everywhere);
            a shifted box is the Darcy OOD split.
    """

    length_scale: float = 0.1
    k_high: float = 12.0
    k_low: float = 3.0
    source: float = 1.0
    source_box: tuple[float, float, float, float] = (0.0, 1.0, 0.0, 1.0)


def sample_permeability(num: int, size: int, config: DarcyConfig, rng: np.random.Generator) -> np.ndarray:
    """Two-valued permeability maps ``(num, size, size)``: a thresholded Gaussian random field.

    The field is white noise filtered in Fourier space by a squared-exponential spectrum of the given
    correlation length, so one FFT per field suffices.
    """
    freq = np.fft.fftfreq(size, d=1.0 / size)
    k2 = freq[:, None] ** 2 + freq[None, :] ** 2
    spectrum = np.exp(-0.5 * (2 * np.pi * config.length_scale) ** 2 * k2)
    noise = rng.standard_normal((num, size, size))
    field = np.fft.ifft2(np.fft.fft2(noise) * np.sqrt(spectrum)).real
    return np.where(field >= 0, config.k_high, config.k_low)


def darcy_source(size: int, config: DarcyConfig) -> np.ndarray:
    """The source ``f`` on the node grid ``(size, size)``."""
    i0, i1, j0, j1 = config.source_box
    x = np.linspace(0.0, 1.0, size)
    mask = ((x[:, None] >= i0) & (x[:, None] <= i1)) & ((x[None, :] >= j0) & (x[None, :] <= j1))
    return np.where(mask, config.source, 0.0)


def _harmonic(a, b):
    return 2.0 * a * b / (a + b)


def solve_darcy(permeability: np.ndarray, source: np.ndarray) -> np.ndarray:
    """Finite-volume solution of ``-div(K grad p) = f``, ``p = 0`` on the boundary.

    Each interior node is a control volume of side ``h``; the flux through a face uses the harmonic
    mean of the two nodes' permeabilities, giving a symmetric positive-definite 5-point system that
    one sparse LU solves.

    Args:
        permeability: ``(n, n)`` or ``(B, n, n)`` positive permeabilities.
        source: ``(n, n)`` source ``f`` (same for the whole batch) or ``(B, n, n)``.

    Returns:
        Pressures of the same shape as ``permeability``, zero on the boundary.
    """
    import scipy.sparse as sp
    from scipy.sparse.linalg import splu

    permeability = np.asarray(permeability, dtype=np.float64)
    if permeability.ndim == 2:
        return solve_darcy(permeability[None], source)[0]
    if (permeability <= 0).any():
        raise ValueError("permeability must be positive everywhere")
    batch, n, _ = permeability.shape
    h = grid_spacing(n)
    source = np.broadcast_to(np.asarray(source, dtype=np.float64), permeability.shape)
    m = n - 2
    index = np.arange(m * m).reshape(m, m)
    out = np.zeros_like(permeability)
    for b in range(batch):
        k = permeability[b]
        c = k[1:-1, 1:-1]
        east, west = _harmonic(c, k[1:-1, 2:]), _harmonic(c, k[1:-1, :-2])
        north, south = _harmonic(c, k[2:, 1:-1]), _harmonic(c, k[:-2, 1:-1])
        rows, cols, vals = [index.ravel()], [index.ravel()], [(east + west + north + south).ravel()]
        # Off-diagonal couplings to interior neighbours; boundary neighbours have p = 0 and drop out.
        for coef, di, dj in ((east, 0, 1), (west, 0, -1), (north, 1, 0), (south, -1, 0)):
            ii, jj = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
            ni, nj = ii + di, jj + dj
            inside = (ni >= 0) & (ni < m) & (nj >= 0) & (nj < m)
            rows.append(index[ii[inside], jj[inside]])
            cols.append(index[ni[inside], nj[inside]])
            vals.append(-coef[inside])
        matrix = sp.csc_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(m * m, m * m)
        )
        rhs = source[b, 1:-1, 1:-1].ravel() * h**2
        out[b, 1:-1, 1:-1] = splu(matrix).solve(rhs).reshape(m, m)
    return out


def darcy_residual(
    pressure: torch.Tensor, permeability: torch.Tensor, source: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Residual of the finite-volume Darcy operator, ``div_h(K grad_h p) + f``.

    Args:
        pressure: ``(B, 1, n, n)`` pressures.
        permeability: ``(B, 1, n, n)`` permeabilities.
        source: ``(B, 1, n, n)`` or ``(1, 1, n, n)`` sources.

    Returns:
        ``(interior, boundary)`` as in :func:`poisson_residual`: the interior residual in the units of ``f``,
        and ``p`` on the boundary.
    """
    _check_fields(pressure, permeability)
    h = grid_spacing(pressure.shape[-1])
    k, p = permeability[:, 0], pressure[:, 0]
    c = k[:, 1:-1, 1:-1]
    pc = p[:, 1:-1, 1:-1]
    flux = (
        _harmonic(c, k[:, 1:-1, 2:]) * (p[:, 1:-1, 2:] - pc)
        + _harmonic(c, k[:, 1:-1, :-2]) * (p[:, 1:-1, :-2] - pc)
        + _harmonic(c, k[:, 2:, 1:-1]) * (p[:, 2:, 1:-1] - pc)
        + _harmonic(c, k[:, :-2, 1:-1]) * (p[:, :-2, 1:-1] - pc)
    )
    interior = (flux / h**2 + source[:, 0, 1:-1, 1:-1]).unsqueeze(1)
    return interior, boundary_values(pressure)


def _check_fields(field: torch.Tensor, other: torch.Tensor) -> None:
    if field.ndim != 4 or field.shape[1] != 1 or field.shape[-1] != field.shape[-2]:
        raise ValueError(f"expected fields of shape (B, 1, n, n), got {tuple(field.shape)}")
    if other.shape[-2:] != field.shape[-2:]:
        raise ValueError(f"field {tuple(field.shape)} and condition {tuple(other.shape)} differ in grid size")
