"""Solvers and residual operators: exact solutions have (near-)zero residual, analytic fields check the stencils."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zoo.repa_p.pde import (
    ChargeConfig,
    DarcyConfig,
    darcy_residual,
    darcy_source,
    fd_solve_poisson,
    grid_spacing,
    laplacian_5pt,
    poisson_residual,
    sample_charges,
    sample_permeability,
    solve_darcy,
    solve_poisson,
)
from zoo.repa_p.tasks import get_task


def _grid(n):
    x = np.linspace(0.0, 1.0, n)
    return np.meshgrid(x, x, indexing="ij")


@pytest.mark.parametrize("size", [16, 32])
def test_dst_solution_has_round_off_residual(size):
    rng = np.random.default_rng(0)
    charge = sample_charges(64, size, ChargeConfig(), rng)
    potential = solve_poisson(charge)
    interior, boundary = poisson_residual(torch.from_numpy(potential[:, None]), torch.from_numpy(charge[:, None]))
    source_scale = np.abs(charge).max() / grid_spacing(size) ** 2
    assert interior.abs().max().item() / source_scale < 1e-10
    assert boundary.abs().max().item() == 0.0
    # A wrong potential is caught: the residual of a perturbed solution is large.
    interior_bad, _ = poisson_residual(torch.from_numpy(1.01 * potential[:, None]), torch.from_numpy(charge[:, None]))
    assert interior_bad.abs().max().item() / source_scale > 1e-3


def test_fd_solver_has_near_zero_residual_on_its_own_solution_and_matches_the_dst():
    """The reference_fd_solver arm: an assembled sparse 5-point system, independent of the DST route."""
    rng = np.random.default_rng(4)
    charge = sample_charges(16, 32, ChargeConfig(num_charges=4), rng)
    potential = fd_solve_poisson(charge)
    interior, boundary = poisson_residual(torch.from_numpy(potential[:, None]), torch.from_numpy(charge[:, None]))
    source = np.abs(charge).sum(axis=(1, 2)).mean() / grid_spacing(32) ** 2 / 30**2  # mean |q / h^2| per node
    assert interior.abs().mean().item() < 1e-9 * source and boundary.abs().max().item() == 0.0
    np.testing.assert_allclose(potential, solve_poisson(charge), atol=1e-12)
    assert fd_solve_poisson(charge[0]).shape == (32, 32)
    # A wrong stencil is caught: the DST of a 1% stronger source is not a solution of this one.
    wrong, _ = poisson_residual(
        torch.from_numpy(solve_poisson(1.01 * charge)[:, None]), torch.from_numpy(charge[:, None])
    )
    assert wrong.abs().mean().item() > 1e-3 * source


def test_laplacian_is_zero_on_harmonic_and_exact_on_quadratics():
    n = 17
    x, y = _grid(n)
    h = grid_spacing(n)
    harmonic = torch.from_numpy(x**2 - y**2)[None, None]
    assert laplacian_5pt(harmonic, h).abs().max().item() < 1e-9
    bowl = torch.from_numpy(x**2 + y**2)[None, None]
    assert torch.allclose(laplacian_5pt(bowl, h), torch.full((1, 1, n - 2, n - 2), 4.0, dtype=torch.float64))
    # Hand-computed stencil value: a unit spike at the centre gives -4 / h^2 there and 1 / h^2 next to it.
    spike = torch.zeros(1, 1, 5, 5, dtype=torch.float64)
    spike[0, 0, 2, 2] = 1.0
    lap = laplacian_5pt(spike, 0.5)
    assert lap[0, 0, 1, 1].item() == -16.0 and lap[0, 0, 0, 1].item() == 4.0 and lap[0, 0, 0, 0].item() == 0.0


def test_single_charge_potential_is_positive_and_symmetric():
    n = 17
    charge = np.zeros((n, n))
    charge[8, 8] = 1.0
    potential = solve_poisson(charge)
    assert potential[8, 8] == potential.max() > 0
    np.testing.assert_allclose(potential, potential.T, atol=1e-14)
    np.testing.assert_allclose(potential, potential[::-1, :], atol=1e-14)


def test_darcy_solution_has_round_off_residual():
    rng = np.random.default_rng(1)
    config = DarcyConfig()
    k = sample_permeability(8, 24, config, rng)
    f = darcy_source(24, config)
    p = solve_darcy(k, f)
    interior, boundary = darcy_residual(
        torch.from_numpy(p[:, None]), torch.from_numpy(k[:, None]), torch.from_numpy(f[None, None])
    )
    assert interior.abs().max().item() < 1e-9
    assert boundary.abs().max().item() == 0.0
    assert set(np.unique(k)) == {3.0, 12.0}
    assert (p[:, 1:-1, 1:-1] > 0).all()  # f > 0 with p = 0 on the wall: pressure is positive inside


def test_darcy_with_unit_permeability_matches_the_dst_poisson_solver():
    n = 20
    rng = np.random.default_rng(2)
    f = rng.uniform(0, 1, (n, n))
    p = solve_darcy(np.ones((n, n)), f)
    u = solve_poisson(f * grid_spacing(n) ** 2)  # charge q = f h^2 gives source f
    np.testing.assert_allclose(p, u, atol=1e-12)


def test_charge_sampling_respects_the_split_configs():
    rng = np.random.default_rng(3)
    rho = sample_charges(500, 32, ChargeConfig(num_charges=4, q_min=1.5, q_max=2.5), rng)
    assert (rho[:, 0, :] == 0).all() and (rho[:, :, -1] == 0).all()
    nonzero = rho[rho != 0]
    assert np.abs(nonzero).max() <= 4 * 2.5 and (np.count_nonzero(rho, axis=(1, 2)) <= 4).all()
    single = np.abs(sample_charges(500, 32, ChargeConfig(num_charges=1, q_min=1.5, q_max=2.5), rng))
    assert single[single > 0].min() >= 1.5 and single.max() <= 2.5
    wall = sample_charges(500, 32, ChargeConfig(wall_band=3), rng)
    _, i, j = np.nonzero(wall)
    distance = np.minimum.reduce([i - 1, j - 1, 30 - i, 30 - j])  # nodes 1..30 are interior
    assert distance.max() <= 2 and distance.min() == 0


def test_task_splits_are_deterministic_and_independent():
    task = get_task("poisson", 16)
    a, ca = task.generate("id", 10, seed=0)
    b, cb = task.generate("id", 10, seed=0)
    assert torch.equal(a, b) and torch.equal(ca, cb)
    c, _ = task.generate("ood_k4", 10, seed=0)
    assert not torch.equal(a, c)
    assert task.residual(a, ca)[0].abs().max() < 1e-3  # float32 storage of an exact solution


def test_bad_inputs_give_clear_errors():
    with pytest.raises(ValueError, match="grid size must be at least 4"):
        grid_spacing(3)
    with pytest.raises(ValueError, match="unknown task 'heat'"):
        get_task("heat", 32)
    with pytest.raises(ValueError, match="unknown split 'ood_x'"):
        get_task("poisson", 16).generate("ood_x", 4, 0)
    with pytest.raises(ValueError, match=r"expected fields of shape \(B, 1, n, n\)"):
        poisson_residual(torch.zeros(2, 16, 16), torch.zeros(2, 1, 16, 16))
    with pytest.raises(ValueError, match="permeability must be positive"):
        solve_darcy(np.zeros((8, 8)), np.ones((8, 8)))
    with pytest.raises(ValueError, match="q_min <= q_max"):
        sample_charges(1, 16, ChargeConfig(q_min=2.0, q_max=1.0), np.random.default_rng(0))
