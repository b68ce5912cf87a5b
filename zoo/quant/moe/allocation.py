"""Bit allocation across experts: GEMQ's global integer program and the baselines it is compared with.

All solvers return an integer array ``widths[l, e]`` (bits of expert ``e`` of MoE block ``l``) whose average is at
most ``budget`` bits per expert.

* :func:`global_ilp` (GEMQ): binary ``x[l, e, k]`` = "expert (l, e) gets width ``bits[k]``"; minimise
  ``sum c[l, e, k] x[l, e, k]`` subject to one width per expert, ``sum bits[k] x <= budget * L * E`` and optional
  per-layer floors (GEMQ's ``c2c3``: at least one expert at the highest and one at the second-highest width in
  every layer). Solved exactly with HiGHS through ``scipy.optimize.milp`` (the paper uses Gurobi).
* :func:`per_layer_ilp`: the same program solved independently per layer with budget ``budget * E`` each
  (MC-MoE / PMQ style), normally on layer-local unweighted errors.
* :func:`uniform_allocation`: importance-blind; fractional budgets split by expert index.
* :func:`frequency_allocation`: more bits to frequently routed experts (per layer).
* :func:`greedy_allocation`: marginal-gain upgrades, for models with thousands of experts (no solver); its gap
  to the ILP is measured in the tests.
* :func:`brute_force_allocation`: exhaustive search, the ground truth for tiny instances.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np

from zoo._errors import ZooError

BUDGET_TOL = 1e-6


class InfeasibleBudgetError(ZooError, ValueError):
    """A bit budget that no allocation satisfying the constraints can meet."""


def c2c3_floors(bits: Sequence[int]) -> dict[int, int]:
    """GEMQ's ``c2c3`` constraint as floors: one expert at the highest and one at the second-highest width."""
    ordered = sorted(set(bits))
    return {ordered[-1]: 1, ordered[-2]: 1} if len(ordered) >= 2 else {ordered[-1]: 1}


def minimum_budget(bits: Sequence[int], num_experts: int, floors: Mapping[int, int] | None = None) -> float:
    """The smallest average bits per expert that any allocation meeting ``floors`` can reach."""
    floors = dict(floors or {})
    pinned = sum(floors.values())
    if pinned > num_experts:
        raise InfeasibleBudgetError(f"floors {floors} ask for {pinned} experts per layer but a layer has {num_experts}")
    return (sum(w * n for w, n in floors.items()) + (num_experts - pinned) * min(bits)) / num_experts


def check_budget(budget: float, bits: Sequence[int], num_experts: int, floors: Mapping[int, int] | None = None) -> None:
    """Raise :class:`InfeasibleBudgetError` (saying what to change) if ``budget`` cannot be met."""
    unknown = sorted(set(floors or {}) - set(bits))
    if unknown:
        raise ValueError(f"floors name widths {unknown} that are not among the candidate widths {sorted(bits)}")
    lowest = minimum_budget(bits, num_experts, floors)
    if budget < lowest - BUDGET_TOL:
        hint = " or drop the per-layer floors (c2c3=False)" if floors else ""
        raise InfeasibleBudgetError(
            f"budget {budget:g} bits/expert is below the minimum feasible {lowest:g} for widths {sorted(bits)} "
            f"with floors {dict(floors or {})} and {num_experts} experts per layer; raise the budget{hint}"
        )


def global_ilp(
    cost: np.ndarray,
    bits: Sequence[int],
    budget: float,
    floors: Mapping[int, int] | None = None,
    fixed: Mapping[tuple[int, int], int] | None = None,
    sizes: np.ndarray | None = None,
    time_limit: float | None = None,
) -> np.ndarray:
    """GEMQ's global allocation: the exact minimiser of the summed cost under a model-wide budget.

    Args:
        cost: ``[L, E, B]`` cost of giving expert (l, e) width ``bits[k]``.
        bits: The ``B`` candidate widths.
        budget: Average bits per expert (weighted by ``sizes`` if given).
        floors: Per-layer minimum counts by width, e.g. :func:`c2c3_floors`.
        fixed: Experts whose width is imposed, ``{(l, e): width}`` (e.g. experts to keep high).
        sizes: ``[L, E]`` relative expert sizes for the budget (default: all equal).
        time_limit: HiGHS time limit in seconds.

    Returns:
        ``[L, E]`` integer widths.
    """
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    cost = np.asarray(cost, dtype=np.float64)
    n_layers, n_experts, n_bits = cost.shape
    bits_arr = np.asarray(bits, dtype=np.float64)
    if len(bits_arr) != n_bits:
        raise ValueError(f"cost has {n_bits} widths on its last axis but bits={list(bits)}")
    floors = dict(floors or {})
    if sizes is None:
        check_budget(budget, bits, n_experts, floors)
    sizes_arr = np.ones((n_layers, n_experts)) if sizes is None else np.asarray(sizes, dtype=np.float64)
    index = np.arange(cost.size).reshape(cost.shape)

    rows, cols, vals, lower, upper = [], [], [], [], []

    def add_row(variables: np.ndarray, coefficients: np.ndarray, lo: float, hi: float) -> None:
        r = len(lower)
        rows.extend([r] * len(variables))
        cols.extend(variables.tolist())
        vals.extend(coefficients.tolist())
        lower.append(lo)
        upper.append(hi)

    for layer in range(n_layers):
        for expert in range(n_experts):
            add_row(index[layer, expert], np.ones(n_bits), 1.0, 1.0)
    add_row(index.ravel(), (sizes_arr[..., None] * bits_arr).ravel(), -np.inf, budget * sizes_arr.sum() + BUDGET_TOL)
    for width, count in floors.items():
        k = list(bits).index(width)
        for layer in range(n_layers):
            add_row(index[layer, :, k], np.ones(n_experts), float(count), np.inf)
    lb, ub = np.zeros(cost.size), np.ones(cost.size)
    for (layer, expert), width in (fixed or {}).items():
        lb[index[layer, expert, list(bits).index(width)]] = 1.0
    matrix = coo_matrix((vals, (rows, cols)), shape=(len(lower), cost.size)).tocsr()
    scale = np.abs(cost).max() or 1.0  # HiGHS tolerances are absolute: solve on a unit scale
    options = {"time_limit": time_limit} if time_limit else {}
    result = milp(
        (cost / scale).ravel(),
        integrality=np.ones(cost.size),
        bounds=Bounds(lb, ub),
        constraints=LinearConstraint(matrix, lower, upper),
        options=options,
    )
    if result.x is None:
        raise InfeasibleBudgetError(
            f"no allocation meets budget {budget:g} bits/expert with floors {floors} and fixed {dict(fixed or {})} "
            f"({result.message}); raise the budget or relax the constraints"
        )
    choice = np.round(result.x).reshape(cost.shape).argmax(-1)
    return bits_arr[choice].astype(int)


def per_layer_ilp(
    cost: np.ndarray, bits: Sequence[int], budget: float, floors: Mapping[int, int] | None = None
) -> np.ndarray:
    """Each layer solves its own program with ``budget * E`` bits (no trade-off between layers)."""
    return np.concatenate([global_ilp(cost[layer : layer + 1], bits, budget, floors) for layer in range(len(cost))])


def uniform_allocation(num_layers: int, num_experts: int, bits: Sequence[int], budget: float) -> np.ndarray:
    """Importance-blind allocation: every expert at ``budget`` bits, or for a fractional budget the first
    ``round(frac * E)`` experts of every layer at ``ceil(budget)`` and the rest at ``floor(budget)``."""
    low, high = int(np.floor(budget + BUDGET_TOL)), int(np.ceil(budget - BUDGET_TOL))
    missing = sorted({low, high} - set(bits))
    if missing:
        raise ValueError(
            f"uniform allocation at {budget:g} bits needs widths {missing} among the candidates {list(bits)}"
        )
    n_high = int(round((budget - low) * num_experts)) if high != low else 0
    row = np.array([high] * n_high + [low] * (num_experts - n_high))
    return np.tile(row, (num_layers, 1))


def frequency_allocation(
    frequency: np.ndarray, bits: Sequence[int], budget: float, floors: Mapping[int, int] | None = None
) -> np.ndarray:
    """Per-layer allocation that gives frequently routed experts more bits: cost ``freq[l, e] * 4**-b``
    (quantization noise power falls by 4 per extra bit)."""
    frequency = np.asarray(frequency, dtype=np.float64)
    cost = frequency[..., None] * (4.0 ** -np.asarray(bits, dtype=np.float64))
    return per_layer_ilp(cost, bits, budget, floors)


def greedy_allocation(
    cost: np.ndarray, bits: Sequence[int], budget: float, floors: Mapping[int, int] | None = None
) -> np.ndarray:
    """Solver-free global allocation: meet the floors where they help most, then spend the remaining bits on the
    upgrade with the largest cost decrease per bit, until no upgrade fits."""
    cost = np.asarray(cost, dtype=np.float64)
    n_layers, n_experts, _ = cost.shape
    floors = dict(floors or {})
    check_budget(budget, bits, n_experts, floors)
    bits_arr = np.asarray(bits)
    lowest = int(np.argmin(bits_arr))
    choice = np.full((n_layers, n_experts), lowest)
    for layer in range(n_layers):
        free = list(range(n_experts))
        for width, count in sorted(floors.items(), reverse=True):
            k = list(bits).index(width)
            gain = cost[layer, free, lowest] - cost[layer, free, k]
            for position in np.argsort(-gain, kind="stable")[:count]:
                choice[layer, free[position]] = k
            free = [e for e in free if choice[layer, e] == lowest]
    remaining = budget * n_layers * n_experts - bits_arr[choice].sum()
    while True:
        current_bits = bits_arr[choice][..., None]
        extra = bits_arr[None, None, :] - current_bits
        gain = np.take_along_axis(cost, choice[..., None], -1) - cost
        ratio = np.where((extra > 0) & (extra <= remaining + BUDGET_TOL) & (gain > 0), gain / np.maximum(extra, 1), -1)
        best = np.unravel_index(np.argmax(ratio), ratio.shape)
        if ratio[best] <= 0:
            break
        remaining -= extra[best]
        choice[best[0], best[1]] = best[2]
    return bits_arr[choice].astype(int)


def brute_force_allocation(
    cost: np.ndarray, bits: Sequence[int], budget: float, floors: Mapping[int, int] | None = None
) -> tuple[np.ndarray, float]:
    """Exhaustive search over all ``B**(L*E)`` allocations (tiny instances only): ``(widths, total cost)``."""
    cost = np.asarray(cost, dtype=np.float64)
    n_layers, n_experts, n_bits = cost.shape
    if n_bits ** (n_layers * n_experts) > 2_000_000:
        raise ValueError("brute force is for tiny instances (at most ~2e6 allocations)")
    floors = dict(floors or {})
    best, best_cost = None, np.inf
    for combo in itertools.product(range(n_bits), repeat=n_layers * n_experts):
        choice = np.array(combo).reshape(n_layers, n_experts)
        widths = np.asarray(bits)[choice]
        if widths.mean() > budget + BUDGET_TOL:
            continue
        if any((widths[layer] == w).sum() < n for layer in range(n_layers) for w, n in floors.items()):
            continue
        total = np.take_along_axis(cost, choice[..., None], -1).sum()
        if total < best_cost:
            best, best_cost = widths, total
    if best is None:
        raise InfeasibleBudgetError(f"no allocation meets budget {budget:g} with floors {floors}")
    return best.astype(int), float(best_cost)


def allocation_cost(cost: np.ndarray, bits: Sequence[int], widths: np.ndarray) -> float:
    """Total cost of an allocation ``widths[l, e]``."""
    index = (
        np.searchsorted(np.asarray(bits), widths)
        if list(bits) == sorted(bits)
        else np.vectorize(list(bits).index)(widths)
    )
    return float(np.take_along_axis(np.asarray(cost, dtype=np.float64), np.asarray(index)[..., None], -1).sum())


def as_config_allocation(layer_names: Sequence[str], widths: np.ndarray) -> dict[str, list[int]]:
    """``widths[l, e]`` as the ``allocation`` field of :class:`~zoo.quant.moe.config.MoEQuantConfig`."""
    return {name: [int(w) for w in row] for name, row in zip(layer_names, np.asarray(widths), strict=True)}
