"""Calibration of the space-bounded robust sketch: ``k``, the initial rate and the warm-up for a target accuracy.

:func:`calibrate` bounds the published estimate's relative error (binary-tree noise plus sampling) and returns a
:class:`Calibration`; :func:`table_capacity` sizes the key table for ``k`` stored keys. The sketch they configure is
:class:`~zoo.resettable_sketch.robust.RobustSketch`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from zoo.resettable_sketch.tree import levels_for


@dataclass(frozen=True)
class Calibration:
    """The space-bounded sketch's parameters for a target accuracy (see :func:`calibrate`).

    Attributes:
        alpha: Target relative error.
        z: Normal quantile the error must stay within (2: about 95% of the published outputs).
        eps: Privacy parameter of each binary tree.
        horizon: Updates the tree is sized for.
        levels: Tree levels ``L``.
        sensitivity: l1 effect of one coin assumed (4: the worst case of cardinality, ``4 - 2 rate``).
        noise_std: Worst-case standard deviation of the published count's noise, ``L**1.5 s sqrt(2) / eps``.
        count: The count ``N`` (in rate units) from which the error is within ``alpha`` at ``z`` sigmas.
        k: Stored keys at which the rate halves, ``2 * count`` (a halving leaves about ``k / 2`` stored keys).
        rate: Initial sampling rate.
        f_min: The true count from which the guarantee is calibrated to hold (the warm-up), ``count / rate``.
    """

    alpha: float
    z: float
    eps: float
    horizon: int
    levels: int
    sensitivity: float
    noise_std: float
    count: int
    k: int
    rate: float
    f_min: int


def calibrate(
    alpha: float = 0.15,
    eps: float = 1.0,
    horizon: int = (1 << 20) - 1,
    z: float = 2.0,
    sensitivity: float = 4.0,
    f_min: int | None = None,
) -> Calibration:
    """Choose ``k``, the initial rate and the warm-up ``F_min`` of the space-bounded sketch for accuracy ``alpha``.

    The published estimate is ``(N + noise) / p`` where ``N`` is the sampled count in rate units (``N ~ p F``)
    and ``noise`` is the binary-tree mechanism's prefix noise: a sum of at most ``L`` Laplace(``b``) node draws
    with ``b = L s / eps``, so its variance is at most ``L * 2 b**2`` (all ``L`` nodes used), i.e.
    ``sigma = L**1.5 * s * sqrt(2) / eps``. Sampling adds a relative variance of at most ``1 / N`` (Bernoulli
    coins: ``(1 - p) / (p F)``). The relative error is within ``alpha`` at ``z`` standard deviations when
    ``z * sqrt(sigma**2 / N**2 + 1 / N) <= alpha``, that is for ``N >= N* = (z**2 + sqrt(z**4 + 4 alpha**2 z**2
    sigma**2)) / (2 alpha**2)``. The count must stay above ``N*`` at all times after the warm-up:

    * a halving (triggered when ``k`` keys are stored) leaves about ``k / 2`` of them, so ``k = 2 N*``;
    * before any halving ``N = p0 F``, so the guarantee starts at ``F_min = N* / p0``. The default ``p0 = 1``
      stores every key until the budget is reached (exact counting, then sampling); pass ``f_min`` to start
      at ``p0 = N* / f_min`` instead.

    With the defaults (``alpha = 0.15``, ``eps = 1``, ``2**20 - 1`` updates, ``z = 2``, ``s = 4``): ``L = 20``,
    ``sigma = 506``, ``N* = 6,836``, ``k = 13,672``, ``p0 = 1``, ``F_min = 6,836``. The bound is on the error
    relative to the current ``F``; the spec's error is relative to the prefix maximum, which is larger, so it
    holds a fortiori. It is worst-case in the popcount (on average half the nodes are used) and in ``s``
    (``4 - 2p``), and it assumes cardinality's weights (``w = 1`` for a stored key seen once): a stream whose
    stored keys are mostly seen many times (words) keeps ``N`` below ``k / 2`` and errs more.

    Args:
        alpha: Target relative error (> 0).
        eps: Privacy parameter of each tree (> 0).
        horizon: Stream length the tree is sized for (sets ``L``).
        z: Standard deviations of headroom.
        sensitivity: One coin's l1 effect on the count sequence.
        f_min: Warm-up count; None: ``N*`` at ``p0 = 1``.

    Returns:
        The :class:`Calibration`.
    """
    if not (alpha > 0 and eps > 0 and z > 0 and sensitivity > 0 and horizon >= 1):
        raise ValueError("alpha, eps, z and sensitivity must be > 0 and horizon >= 1")
    levels = levels_for(horizon)
    sigma = levels**1.5 * sensitivity * math.sqrt(2.0) / eps
    count = math.ceil((z**2 + math.sqrt(z**4 + 4 * alpha**2 * z**2 * sigma**2)) / (2 * alpha**2))
    rate = 1.0 if f_min is None else min(1.0, count / f_min)
    return Calibration(
        alpha, z, eps, horizon, levels, sensitivity, sigma, count, 2 * count, rate, math.ceil(count / rate)
    )


def table_capacity(k: int) -> int:
    """The smallest power-of-two key table that holds ``k`` keys at load <= 3/4."""
    return 1 << max(1, math.ceil(math.log2(math.ceil(k * 4 / 3))))
