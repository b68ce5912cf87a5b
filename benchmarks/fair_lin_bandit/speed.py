"""FairLinBandit simulation speed: seed-batched vs a loop over seeds, and our OFUL vs MABWiser's LinUCB.

Prints rounds per second (rounds x runs / wall time) and the ratios, measured in the same process:

* ``fair_ucb`` and ``fair_pe`` on the phishing instance, ``--seeds`` runs as one batch vs one run at a time;
* OFUL with a fixed beta on K orthogonal arms vs MABWiser's ``LinUCB`` (per-arm ridge, constant context),
  which picks the same arms there (tests/fair_lin_bandit/test_policies.py), one round at a time.

Run: ``flock /tmp/zoo-cpu.lock python benchmarks/fair_lin_bandit/speed.py [--horizon 5000 --seeds 8]``
(``--smoke``: T = 300 and 2 seeds, which checks that it runs in seconds).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from zoo.fair_lin_bandit.instances import build_instance
from zoo.fair_lin_bandit.oful import OFUL
from zoo.fair_lin_bandit.policies import make_policy, simulate


def batched_vs_loop(algorithm: str, horizon: int, seeds: int) -> tuple[float, float]:
    instance = build_instance("phishing", 0)
    arms = np.repeat(instance.arms[None], seeds, 0)
    mu = np.repeat(instance.mu[None], seeds, 0)
    started = time.perf_counter()
    rng = np.random.default_rng(0)
    simulate(make_policy(algorithm, horizon, arms.shape[2], arms.shape[1], rng), arms, mu, horizon, rng)
    batched = seeds * horizon / (time.perf_counter() - started)
    started = time.perf_counter()
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        policy = make_policy(algorithm, horizon, arms.shape[2], arms.shape[1], rng)
        simulate(policy, arms[seed : seed + 1], mu[seed : seed + 1], horizon, rng)
    looped = seeds * horizon / (time.perf_counter() - started)
    return batched, looped


def oful_vs_mabwiser(horizon: int, num_arms: int = 10, alpha: float = 0.5) -> tuple[float, float | None]:
    means = np.linspace(0.1, 0.9, num_arms)
    rewards = np.random.default_rng(1).random(horizon)
    arms = np.eye(num_arms)[None]
    policy = OFUL(horizon, beta=alpha)
    started = time.perf_counter()
    for t in range(horizon):
        index = policy.select(arms)
        policy.update(arms[:, index[0]], (rewards[t : t + 1] < means[index]).astype(float))
    ours = horizon / (time.perf_counter() - started)
    try:
        from mabwiser.mab import MAB, LearningPolicy
    except ImportError:
        return ours, None
    bandit = MAB(list(range(num_arms)), LearningPolicy.LinUCB(alpha=alpha, l2_lambda=1.0), seed=0)
    bandit.fit(list(range(num_arms)), [0.5] * num_arms, contexts=[[1.0]] * num_arms)
    started = time.perf_counter()
    for t in range(horizon):
        arm = bandit.predict([[1.0]])
        bandit.partial_fit([arm], [float(rewards[t] < means[arm])], contexts=[[1.0]])
    theirs = horizon / (time.perf_counter() - started)
    return ours, theirs


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizon", type=int, default=5000)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--smoke", action="store_true", help="T = 300, 2 seeds: checks that it runs")
    args = parser.parse_args(argv)
    horizon, seeds = (300, 2) if args.smoke else (args.horizon, args.seeds)
    for algorithm in ("fair_ucb", "fair_pe"):
        batched, looped = batched_vs_loop(algorithm, horizon, seeds)
        print(
            f"{algorithm}: batched {batched:,.0f} rounds/s, seed loop {looped:,.0f} rounds/s, "
            f"ratio {batched / looped:.1f}x ({seeds} seeds, T={horizon})"
        )
    ours, theirs = oful_vs_mabwiser(min(horizon, 2000))
    if theirs is None:
        print(f"OFUL {ours:,.0f} rounds/s; MABWiser not installed (pip install mabwiser)")
    else:
        print(f"OFUL {ours:,.0f} rounds/s, MABWiser LinUCB {theirs:,.0f} rounds/s, ratio {ours / theirs:.1f}x")


if __name__ == "__main__":
    main()
