"""The evaluation's policies by name, and the batched simulator that runs them with Bernoulli rewards.

:data:`ALGORITHMS` names the arms; :func:`make_policy` builds a fresh batched policy for one (from
:mod:`.batched`, :mod:`.oful`, :mod:`.elimination` and the :mod:`.fair` wrapper), :func:`simulate` runs a policy
on a batch of episodes and :func:`run_episode` runs independent replicates of one algorithm on one instance.
See :mod:`zoo.fair_lin_bandit.module` for every reconstruction choice.
"""

from __future__ import annotations

import numpy as np

from zoo.fair_lin_bandit.batched import UniformPolicy
from zoo.fair_lin_bandit.elimination import PhasedElimination
from zoo.fair_lin_bandit.fair import FairLinBandit, active_arms, linnash
from zoo.fair_lin_bandit.oful import OFUL
from zoo.fair_lin_bandit.regret import check_p


def simulate(policy, arms: np.ndarray, mu: np.ndarray, horizon: int, rng: np.random.Generator) -> dict:
    """Run ``policy`` for ``horizon`` rounds on a batch of episodes with Bernoulli(mu) rewards.

    Args:
        policy: A batched policy.
        arms: ``(B, K, d)``.
        mu: ``(B, K)`` arm means in [0, 1].
        horizon: T.
        rng: Randomness of the rewards.

    Returns:
        ``{"expected": (B, T), "realised": (B, T), "chosen": (B, T), "active": (B,)}``: the conditional expected
        mean reward ``sum_x P(x_t = x | history) mu_x``, the mean of the arm pulled, its index, and the number of
        arms still active after round T (K for a policy that eliminates none).
    """
    batch = arms.shape[0]
    rows = np.arange(batch)
    expected = np.empty((batch, horizon))
    realised = np.empty((batch, horizon))
    chosen = np.empty((batch, horizon), dtype=np.int32)
    uniforms = rng.random((batch, horizon))
    for t in range(horizon):
        index = policy.select(arms, None)
        means = mu[rows, index]
        probs = getattr(policy, "last_probs", None)
        expected[:, t] = means if probs is None else (probs * mu).sum(axis=1)
        realised[:, t] = means
        chosen[:, t] = index
        policy.update(arms[rows, index], (uniforms[:, t] < means).astype(np.float64))
    mask = active_arms(policy)
    active = np.full(batch, arms.shape[1]) if mask is None else np.asarray(mask).sum(axis=1)
    return {"expected": expected, "realised": realised, "chosen": chosen, "active": active}


ALGORITHMS = ("fair_pe", "fair_ucb", "linnash", "fair_pe_linnash_width", "pe", "oful", "uniform", "linnash_published")


def make_policy(
    algorithm: str,
    horizon: int,
    dim: int,
    num_arms: int,
    rng: np.random.Generator,
    p: float = 0.0,
    c1: float = 1.0,
    linnash_multiplier: float = 3.0,
    linnash_width_scale: float = 1.0,
):
    """A fresh batched policy by name (the evaluation's arms).

    Args:
        algorithm: One of :data:`ALGORITHMS`.
        horizon: T.
        dim: d.
        num_arms: K.
        rng: The policy's randomness.
        p: Target p of FairLinBandit (sets its Phase 1 length).
        c1: FairLinBandit's Phase 1 constant.
        linnash_multiplier: LinNash's Part I multiplier (3 as published).
        linnash_width_scale: Multiplies LinNash's elimination constants 16 and 6 (1 as published).
        ``linnash_published`` ignores both and uses the published constants.
    """
    check_p(p)
    if algorithm == "fair_pe":
        return FairLinBandit(PhasedElimination(horizon), horizon, p=p, c1=c1, rng=rng)
    if algorithm == "fair_ucb":
        return FairLinBandit(OFUL(horizon), horizon, p=p, c1=c1, rng=rng)
    if algorithm == "fair_pe_linnash_width":
        return FairLinBandit(PhasedElimination(horizon), horizon, p=p, c1=c1, rng=rng, width="linnash")
    if algorithm == "linnash":
        return linnash(horizon, dim, num_arms, rng, linnash_multiplier, linnash_width_scale)
    if algorithm == "linnash_published":
        return linnash(horizon, dim, num_arms, rng)
    if algorithm == "pe":
        return PhasedElimination(horizon)
    if algorithm == "oful":
        return OFUL(horizon)
    if algorithm == "uniform":
        return UniformPolicy(rng)
    raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {', '.join(ALGORITHMS)}")


def run_episode(
    algorithm: str,
    arms: np.ndarray,
    mu: np.ndarray,
    horizon: int,
    seed: int,
    replicates: int = 8,
    **policy_args,
) -> dict:
    """Run ``replicates`` independent copies of ``algorithm`` on one instance, batched.

    Args:
        algorithm: One of :data:`ALGORITHMS`.
        arms: ``(K, d)``.
        mu: ``(K,)``.
        horizon: T.
        seed: Seed of the policy's and the rewards' randomness.
        replicates: Independent runs (the batch dimension); their average estimates ``E[mu_{x_t}]``.
        **policy_args: ``p``, ``c1``, ``linnash_multiplier``, ``linnash_width_scale``.

    Returns:
        :func:`simulate`'s arrays, each ``(replicates, T)``.
    """
    arms, mu = np.asarray(arms, np.float64), np.asarray(mu, np.float64)
    if arms.ndim != 2 or mu.shape != arms.shape[:1]:
        raise ValueError(f"arms must be (K, d) and mu (K,), got {arms.shape} and {mu.shape}")
    if arms.shape[0] < 2:
        raise ValueError(f"a bandit needs K >= 2 arms, got K={arms.shape[0]}")
    if replicates < 1 or horizon < 1:
        raise ValueError(f"replicates and horizon must be >= 1, got {replicates} and {horizon}")
    rng = np.random.default_rng([seed, horizon, ALGORITHMS.index(algorithm) if algorithm in ALGORITHMS else 0])
    policy = make_policy(algorithm, horizon, arms.shape[1], arms.shape[0], rng, **policy_args)
    batch_arms = np.broadcast_to(arms, (replicates, *arms.shape))
    return simulate(policy, batch_arms, np.broadcast_to(mu, (replicates, len(mu))), horizon, rng)
