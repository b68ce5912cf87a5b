"""Bit allocation: the ILP against brute force, constraints, infeasible budgets, baselines."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.quant.moe.allocation import (
    InfeasibleBudgetError,
    allocation_cost,
    brute_force_allocation,
    c2c3_floors,
    global_ilp,
    greedy_allocation,
    minimum_budget,
    per_layer_ilp,
    uniform_allocation,
)

BITS = (1, 2, 3)


def random_cost(layers: int, experts: int, seed: int) -> np.ndarray:
    """Costs that fall with the width (as quantization errors do), with random scales per expert."""
    rng = np.random.default_rng(seed)
    scale = rng.lognormal(0, 1.5, (layers, experts, 1))
    return scale * (4.0 ** -np.array(BITS)) * rng.uniform(0.5, 1.5, (layers, experts, len(BITS)))


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("budget", [1.5, 2.0, 2.5])
def test_ilp_equals_brute_force_2_layers_2_experts(seed, budget):
    cost = random_cost(2, 2, seed)
    widths = global_ilp(cost, BITS, budget)
    _, best = brute_force_allocation(cost, BITS, budget)
    assert allocation_cost(cost, BITS, widths) == pytest.approx(best, rel=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_ilp_equals_brute_force_with_c2c3_on_2x3(seed):
    cost = random_cost(2, 3, seed)  # 3**6 = 729 allocations
    floors = c2c3_floors(BITS)
    widths = global_ilp(cost, BITS, 2.0, floors)
    _, best = brute_force_allocation(cost, BITS, 2.0, floors)
    assert allocation_cost(cost, BITS, widths) == pytest.approx(best, rel=1e-9)


@pytest.mark.parametrize("budget", [1.5, 2.0, 2.5])
def test_budget_is_tight_and_c2c3_holds(budget):
    cost = random_cost(4, 8, 0)
    widths = global_ilp(cost, BITS, budget, c2c3_floors(BITS))
    assert widths.sum() == budget * widths.size  # errors fall with bits, so the whole budget is spent
    for row in widths:
        assert (row == 3).sum() >= 1 and (row == 2).sum() >= 1


def test_global_trades_bits_between_layers_per_layer_cannot():
    cost = random_cost(2, 4, 1)
    cost[0] *= 1000.0  # layer 0 matters far more
    global_widths = global_ilp(cost, BITS, 2.0)
    layer_widths = per_layer_ilp(cost, BITS, 2.0)
    assert global_widths[0].mean() > global_widths[1].mean()
    assert layer_widths[0].mean() == layer_widths[1].mean() == 2.0
    assert allocation_cost(cost, BITS, global_widths) <= allocation_cost(cost, BITS, layer_widths)


def test_budget_below_minimum_feasible_is_a_clear_error():
    assert minimum_budget(BITS, 8, c2c3_floors(BITS)) == pytest.approx((3 + 2 + 6) / 8)
    with pytest.raises(InfeasibleBudgetError, match=r"below the minimum feasible 1.375.*raise the budget"):
        global_ilp(random_cost(2, 8, 0), BITS, 1.2, c2c3_floors(BITS))
    with pytest.raises(InfeasibleBudgetError, match="minimum feasible 1"):
        global_ilp(random_cost(2, 8, 0), BITS, 0.5)
    with pytest.raises(InfeasibleBudgetError):
        per_layer_ilp(random_cost(2, 8, 0), BITS, 1.2, c2c3_floors(BITS))


def test_fixed_experts_are_respected():
    cost = random_cost(2, 4, 2)
    widths = global_ilp(cost, BITS, 1.5, fixed={(0, 1): 3, (1, 2): 3})
    assert widths[0, 1] == 3 and widths[1, 2] == 3 and widths.mean() <= 1.5


def test_uniform_split_by_expert_index():
    assert uniform_allocation(2, 8, BITS, 2.5).tolist() == [[3, 3, 3, 3, 2, 2, 2, 2]] * 2
    assert uniform_allocation(1, 8, BITS, 1.5).tolist() == [[2, 2, 2, 2, 1, 1, 1, 1]]
    assert uniform_allocation(1, 8, BITS, 2.0).tolist() == [[2] * 8]
    with pytest.raises(ValueError, match="needs widths"):
        uniform_allocation(1, 8, (2, 3), 1.5)


def test_greedy_is_feasible_and_close_to_optimal():
    gaps = []
    for seed in range(20):
        cost = random_cost(4, 8, seed)
        floors = c2c3_floors(BITS)
        greedy = greedy_allocation(cost, BITS, 2.0, floors)
        assert greedy.mean() <= 2.0 and all((row == 3).any() and (row == 2).any() for row in greedy)
        optimum = allocation_cost(cost, BITS, global_ilp(cost, BITS, 2.0, floors))
        gaps.append(allocation_cost(cost, BITS, greedy) / optimum - 1)
    assert min(gaps) >= -1e-9
    assert np.mean(gaps) < 0.05
