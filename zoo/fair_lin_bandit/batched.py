"""The batched policy interface: shape checks, one sampled arm per episode, and the uniform floor.

Every policy works on a batch of ``B`` independent episodes at once: ``select(arms, mask)`` takes the arm
features ``(B, K, d)`` and the active arms ``(B, K)`` and returns one arm index per episode; ``update(x, r)``
takes the pulled features ``(B, d)`` and rewards ``(B,)``. A single run is ``B = 1``. After ``select`` a
randomised policy leaves its choice distribution in ``last_probs`` ``(B, K)`` (None when the choice was
deterministic given the history), so the simulator (:func:`~zoo.fair_lin_bandit.policies.simulate`) can record
``E[mu_{x_t} | history]``. The policies: :class:`UniformPolicy` here, :mod:`.oful`, :mod:`.elimination` and the
:mod:`.fair` wrapper; :mod:`.policies` builds them by name and runs them.
"""

from __future__ import annotations

import numpy as np

NOISE_PROXY = 0.5  # sub-Gaussian proxy of a Bernoulli reward


def batch_mask(arms: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """The active arms ``(B, K)`` (all of them when ``mask`` is None), after checking ``arms`` is ``(B, K >= 2, d)``."""
    if arms.ndim != 3:
        raise ValueError(f"arms must be (B, K, d), got shape {arms.shape}")
    if arms.shape[1] < 2:
        raise ValueError(f"a bandit needs K >= 2 arms, got K={arms.shape[1]}")
    return np.ones(arms.shape[:2], bool) if mask is None else np.asarray(mask, bool)


def sample_from(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One index per row of ``probs`` ``(B, K)`` (inverse CDF)."""
    cdf = np.cumsum(probs, axis=1)
    draws = rng.random(len(probs)) * cdf[:, -1]
    return np.minimum((cdf < draws[:, None]).sum(axis=1), probs.shape[1] - 1)


class UniformPolicy:
    """Pull an active arm uniformly at random (the sanity floor)."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.last_probs = None

    def select(self, arms: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        mask = batch_mask(arms, mask)
        self.last_probs = mask / mask.sum(axis=1, keepdims=True)
        return sample_from(self.last_probs, self.rng)

    def update(self, x: np.ndarray, r: np.ndarray) -> None:
        pass
