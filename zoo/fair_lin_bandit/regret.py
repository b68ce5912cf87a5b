"""p-means of rewards and p-means regret (plain numpy).

``M_p(a) = ((1/T) sum_t a_t**p)**(1/p)`` for ``p <= 1``, ``p != 0``; ``M_0 = exp(mean log a)`` (Nash, the
geometric mean) and ``M_-inf = min``. The p-means regret is ``R_p = mu* - M_p(E[mu_{x_1}], ..., E[mu_{x_T}])``:
the expectation is per round, inside the mean.
"""

from __future__ import annotations

import numpy as np

P_TAGS = {1.0: "1", 0.5: "0p5", 0.0: "0", -1.0: "m1", -5.0: "m5"}


def check_p(p: float) -> None:
    """p-means regret is defined for p <= 1 (p = -inf is the minimum)."""
    if not isinstance(p, int | float) or np.isnan(p):
        raise ValueError(f"p must be a number <= 1, got {p!r}")
    if p > 1:
        raise ValueError(f"p-means regret needs p <= 1 (p = 1 is average regret, p -> 0 Nash); got p = {p}")


def power_mean(values: np.ndarray, p: float, axis: int = -1) -> np.ndarray:
    """The p-mean of positive ``values`` along ``axis`` (log-domain, so p = -5 does not overflow).

    Args:
        values: Positive numbers (any p < 0 or p = 0 needs every value > 0).
        p: The exponent, ``p <= 1``; 0 gives the geometric mean, ``-inf`` the minimum.
        axis: The axis averaged over.
    """
    check_p(p)
    values = np.asarray(values, dtype=np.float64)
    if p <= 0 and (values <= 0).any():
        raise ValueError(f"the p-mean with p = {p} <= 0 needs every value > 0 (min {values.min():.3g})")
    if p == -np.inf:
        return values.min(axis=axis)
    if p == 0:
        return np.exp(np.log(values).mean(axis=axis))
    if p < 0:
        logs = p * np.log(values)  # log(a**p); a log-sum-exp keeps a**-5 of tiny rewards finite
        top = logs.max(axis=axis, keepdims=True)
        log_mean = np.log(np.exp(logs - top).mean(axis=axis)) + np.squeeze(top, axis=axis)
        return np.exp(log_mean / p)
    return np.power(np.power(values, p).mean(axis=axis), 1.0 / p)


def p_means_regret(expected_rewards: np.ndarray, best: float | np.ndarray, p: float) -> np.ndarray:
    """``R_p = mu* - M_p(expected_rewards)`` over the last axis (rounds).

    Args:
        expected_rewards: ``E[mu_{x_t}]`` per round, shape ``(..., T)``.
        best: ``mu*``, a number or an array broadcastable to the leading shape.
        p: The p of the p-mean (``p <= 1``).
    """
    return np.asarray(best) - power_mean(expected_rewards, p, axis=-1)


def regret_table(expected: np.ndarray, realised: np.ndarray, best: float, ps=tuple(P_TAGS)) -> dict[str, float]:
    """R_p for every p of ``ps``: with the expectation estimated over the replicates (``rp_<tag>``) and per run.

    Args:
        expected: Per-round conditional expected reward of every replicate, ``(R, T)``: its mean over
            replicates estimates ``E[mu_{x_t}]``.
        realised: Per-round mean of the arm actually pulled, ``(R, T)``; ``rp_<tag>_realised`` averages the
            per-run regret ``mu* - M_p(mu_{x_1..T})`` over the replicates.
        best: ``mu*``.
        ps: The p values (keys of :data:`P_TAGS` get their tag).
    """
    estimate = np.asarray(expected).mean(axis=0)
    table = {}
    for p in ps:
        tag = P_TAGS.get(p, str(p).replace("-", "m").replace(".", "p"))
        table[f"rp_{tag}"] = float(p_means_regret(estimate, best, p))
        table[f"rp_{tag}_realised"] = float(p_means_regret(realised, best, p).mean())
    return table
