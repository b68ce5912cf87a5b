"""The spectral residual (issue 75): physics on the lowest sine modes, blind to pixel-level noise."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.fft import dstn

from zoo.repa_p.pde import (
    grid_spacing,
    laplacian_5pt,
    lowpass_dst,
    poisson_residual,
    sine_modes,
    solve_poisson,
    spectral_residual,
)
from zoo.repa_p.tasks import get_task


def test_white_noise_of_one_percent_does_not_lift_the_spectral_residual_above_the_zero_field():
    """The issue's noise test: exact solution + white noise of rms 0.001 (>= 1% of the fields' spread), 32 x 32."""
    task = get_task("poisson", 32)
    x0, condition = task.generate("val", 32, seed=0)
    rms = 0.001
    assert rms >= 0.01 * x0.std().item()  # the fields' standard deviation is 0.081
    zero = torch.zeros_like(x0)
    for seed in range(3):
        noisy = x0 + rms * torch.randn(x0.shape, generator=torch.Generator().manual_seed(seed))
        # The new residual: noise adds ~0.16, the zero field's is ~11 (default k = 8).
        assert task.spectral_residual(noisy, condition).mean() < task.spectral_residual(zero, condition).mean()
        # The old 5-point mean |R| fails the same test (3.43 against 2.00): the test can fail, the filter passes it.
        assert task.residual(noisy, condition)[0].abs().mean() > task.residual(zero, condition)[0].abs().mean()
    # Keeping every mode is no filter: the noise term grows to the rms of the 5-point residual (~4.3).
    noisy_all = task.spectral_residual(noisy, condition, k=30).mean().item()
    per_field_rms = task.residual(noisy, condition)[0].square().mean((1, 2, 3)).sqrt().mean().item()
    assert noisy_all == pytest.approx(per_field_rms, rel=1e-5)
    assert noisy_all > 20 * task.spectral_residual(noisy, condition).mean().item()


def test_single_sine_mode_has_its_closed_form_spectral_residual():
    """U = sin(pi x) sin(2 pi y) on 17 x 17 nodes: a discrete eigenfunction, Delta_h U = -(lam_1 + lam_2) U."""
    n, m = 17, 15
    x = np.linspace(0.0, 1.0, n)
    potential = torch.from_numpy(np.sin(np.pi * x)[:, None] * np.sin(2 * np.pi * x)[None, :])[None, None]
    interior, _ = poisson_residual(potential, torch.zeros_like(potential))
    # Hand-computed: lam_a = (2 - 2 cos(pi a / 16)) * 256, lam_1 = 9.83794, lam_2 = 38.97368; the field is
    # (m + 1) / 2 = 8 times the product of the orthonormal modes 1 and 2, so its single coefficient is
    # -(lam_1 + lam_2) * 8 and the rms over 15^2 nodes is 48.81162 * 8 / 15 = 26.03287.
    lam = [(2 - 2 * math.cos(math.pi * a / 16)) * 256 for a in (1, 2)]
    assert lam == pytest.approx([9.83794, 38.97368], abs=1e-5)
    expected = 26.03287
    for k in (2, 3, m):
        assert spectral_residual(interior, k).item() == pytest.approx(expected, rel=1e-6)
    assert spectral_residual(interior, 1).item() < 1e-10  # mode (1, 2) is not among the lowest 1 x 1
    # With every mode kept it is the rms of the 5-point residual (Parseval).
    assert interior.square().mean().sqrt().item() == pytest.approx(expected, rel=1e-6)


def test_sine_modes_are_the_orthonormal_dst_and_lowpass_is_the_residual_of_the_lowpassed_field():
    m, k = 12, 5
    basis = sine_modes(m, k)
    assert torch.allclose(basis.T @ basis, torch.eye(k, dtype=torch.float64), atol=1e-12)
    values = np.random.default_rng(0).standard_normal((3, 1, m, m))
    full = dstn(values, type=1, axes=(-2, -1), norm="ortho")
    coefficients = basis.T @ torch.from_numpy(values) @ basis
    np.testing.assert_allclose(coefficients.numpy(), full[..., :k, :k], atol=1e-12)
    # The projection commutes with the 5-point Laplacian of zero-boundary fields.
    n = m + 2
    potential = torch.zeros(3, 1, n, n, dtype=torch.float64)
    potential[..., 1:-1, 1:-1] = torch.from_numpy(values)
    charge = torch.from_numpy(np.random.default_rng(1).standard_normal((3, 1, n, n)))
    interior, _ = poisson_residual(potential, charge)
    smooth = torch.zeros_like(potential)
    smooth[..., 1:-1, 1:-1] = lowpass_dst(potential[..., 1:-1, 1:-1], k)
    h = grid_spacing(n)
    expected = laplacian_5pt(smooth, h) + lowpass_dst(charge[..., 1:-1, 1:-1] / h**2, k)
    assert torch.allclose(lowpass_dst(interior, k), expected, rtol=1e-9, atol=1e-6)
    assert torch.allclose(spectral_residual(interior, k), lowpass_dst(interior, k).square().mean((1, 2, 3)).sqrt())


def test_exact_solution_has_zero_spectral_residual_and_batches_are_per_field():
    task = get_task("poisson", 32)
    x0, condition = task.generate("id", 8, seed=0)
    zero = task.spectral_residual(torch.zeros_like(x0), condition)
    charge = condition.double()
    exact = task.spectral_residual(torch.from_numpy(solve_poisson(charge.numpy())), charge)
    assert exact.shape == (8,) and exact.max().item() < 1e-10 * zero.min().item()  # float64 solve: round-off
    assert task.spectral_residual(x0, condition).max().item() < 1e-6 * zero.min().item()  # the float32 test pairs
    assert torch.allclose(task.spectral_residual(torch.zeros_like(x0[3:5]), condition[3:5]), zero[3:5])


def test_bad_inputs_give_clear_errors():
    interior = torch.zeros(2, 1, 6, 6)
    for k in (0, 7, 2.5, True):
        with pytest.raises(ValueError, match=r"k \(sine modes per axis\) must be an integer in \[1, m = 6\]"):
            spectral_residual(interior, k)
    for shape in ((6, 6), (2, 2, 6, 6), (2, 1, 6, 5)):
        with pytest.raises(ValueError, match="expected interior fields of shape \\(B, 1, m, m\\)"):
            spectral_residual(torch.zeros(shape), 2)
    with pytest.raises(ValueError, match="at least one interior node"):
        sine_modes(0, 1)
    with pytest.raises(ValueError, match="differ in grid size"):
        get_task("poisson", 16).spectral_residual(torch.zeros(1, 1, 16, 16), torch.zeros(1, 1, 8, 8))
