"""OFUL / LinUCB: optimism in the face of uncertainty with a shared linear parameter, batched over episodes.

The policy follows the batched interface of :mod:`zoo.fair_lin_bandit.batched`; it is Phase 2 of ``fair_ucb``
and, alone, the ``oful`` arm of the evaluation.
"""

from __future__ import annotations

import math

import numpy as np

from zoo.fair_lin_bandit.batched import NOISE_PROXY, batch_mask


def oful_beta(t: int, dim: int, delta: float, ridge: float = 1.0, norm_bound: float = 1.0) -> float:
    """OFUL's radius ``sqrt(lambda) S + sigma sqrt(2 log(1/delta) + d log(1 + t/(lambda d)))`` (sigma = 1/2)."""
    return math.sqrt(ridge) * norm_bound + NOISE_PROXY * math.sqrt(
        2 * math.log(1 / delta) + dim * math.log(1 + t / (ridge * dim))
    )


class OFUL:
    """OFUL / LinUCB with a shared parameter: pull ``argmax <x, theta_hat> + beta_t ||x||_{V^-1}``.

    ``V^-1`` is kept by Sherman-Morrison and every arm's ``||x||^2_{V^-1}`` by the matching rank-one
    correction, so a round costs ``O(B K d)``.

    Args:
        horizon: T (``delta = 1/T`` unless given).
        ridge: lambda.
        delta: Confidence level of beta_t.
        beta: A fixed radius instead of beta_t (used to compare with MABWiser's LinUCB).
    """

    def __init__(self, horizon: int, ridge: float = 1.0, delta: float | None = None, beta: float | None = None):
        self.horizon, self.ridge, self.beta = horizon, ridge, beta
        self.delta = 1.0 / horizon if delta is None else delta
        self.last_probs = None
        self._state = None
        self._arms = None

    def _init(self, batch: int, dim: int) -> None:
        self.inverse = np.tile(np.eye(dim) / self.ridge, (batch, 1, 1))
        self.target = np.zeros((batch, dim))
        self.theta = np.zeros((batch, dim))
        self.t = 0
        self._state = (batch, dim)

    def radius(self) -> float:
        return self.beta if self.beta is not None else oful_beta(self.t, self._state[1], self.delta, self.ridge)

    def select(self, arms: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        mask = batch_mask(arms, mask)
        if self._state is None:
            self._init(arms.shape[0], arms.shape[2])
        if self._arms is not arms:  # new arm set: recompute the norms from V^-1 once
            self._arms = arms
            self._norms = np.einsum("bki,bij,bkj->bk", arms, self.inverse, arms)
        estimate = np.einsum("bkd,bd->bk", arms, self.theta)
        scores = estimate + self.radius() * np.sqrt(np.maximum(self._norms, 0.0))
        return np.where(mask, scores, -np.inf).argmax(axis=1)

    def update(self, x: np.ndarray, r: np.ndarray) -> None:
        if self._state is None:
            self._init(x.shape[0], x.shape[1])
        u = np.einsum("bij,bj->bi", self.inverse, x)
        denom = 1.0 + np.einsum("bi,bi->b", x, u)
        self.inverse -= np.einsum("bi,bj->bij", u, u) / denom[:, None, None]
        if self._arms is not None:
            projection = np.einsum("bkd,bd->bk", self._arms, u)
            self._norms -= projection**2 / denom[:, None]
        self.target += r[:, None] * x
        self.theta = np.einsum("bij,bj->bi", self.inverse, self.target)
        self.t += 1
