"""Tune c1 (fair_pe, fair_ucb) and LinNash's Part I multiplier on the validation instances (seeds 100-109).

Every configuration runs on the 5 instances of each validation seed at T = 20k, its seeds and replicates
batched into one simulation per instance (seeds as the batch dimension); the score is the mean Nash regret
(expectation over the replicates of each instance). Each arm gets the same number of trials. The test seeds
0-9 are never touched. Writes ``zoo/fair_lin_bandit/tuning.json``, which ``evaluate.py`` reads as defaults.

Run: ``flock /tmp/zoo-cpu.lock python -m zoo.fair_lin_bandit.tune`` (``--arms linnash`` re-tunes one arm and keeps
the others' record).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from zoo.fair_lin_bandit.instances import DATASETS, build_instance
from zoo.fair_lin_bandit.policies import ALGORITHMS, make_policy, simulate
from zoo.fair_lin_bandit.regret import p_means_regret

TUNING_FILE = Path(__file__).with_name("tuning.json")
C1_GRID = (0.25, 0.5, 1.0, 2.0)
LINNASH_GRID = (0.5, 1.0, 2.0, 3.0)
VALIDATION_SEEDS = tuple(range(100, 110))
TUNED_ARMS = ("fair_pe", "fair_ucb", "linnash")


def validation_score(algorithm: str, horizon: int, replicates: int, seeds=VALIDATION_SEEDS, **policy_args) -> float:
    """Mean Nash regret over the instances of ``seeds`` (one batched simulation per dataset)."""
    regrets = []
    for name in DATASETS:
        instances = [build_instance(name, seed) for seed in seeds]
        arms = np.repeat(np.stack([i.arms for i in instances]), replicates, axis=0)
        mu = np.repeat(np.stack([i.mu for i in instances]), replicates, axis=0)
        rng = np.random.default_rng([7, horizon, ALGORITHMS.index(algorithm)])
        policy = make_policy(algorithm, horizon, arms.shape[2], arms.shape[1], rng, **policy_args)
        expected = simulate(policy, arms, mu, horizon, rng)["expected"]
        expected = expected.reshape(len(seeds), replicates, horizon).mean(axis=1)
        regrets.append(p_means_regret(expected, mu.reshape(len(seeds), replicates, -1)[:, 0].max(axis=1), 0.0))
    return float(np.mean(regrets))


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizon", type=int, default=20_000)
    parser.add_argument("--replicates", type=int, default=2)
    parser.add_argument("--out", default=str(TUNING_FILE))
    parser.add_argument(
        "--arms",
        nargs="+",
        default=list(TUNED_ARMS),
        choices=TUNED_ARMS,
        help="re-tune only these arms (after a change to them); the others keep their record in --out",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    previous = json.loads(Path(args.out).read_text()) if Path(args.out).is_file() else {}
    scores: dict[str, dict[str, float]] = {arm: previous.get("scores", {}).get(arm, {}) for arm in TUNED_ARMS}
    seconds = dict(previous.get("seconds_per_arm", {}))
    for arm in args.arms:
        arm_started = time.perf_counter()
        scores[arm] = {}
        for value in LINNASH_GRID if arm == "linnash" else C1_GRID:
            key = "linnash_multiplier" if arm == "linnash" else "c1"
            scores[arm][str(value)] = validation_score(arm, args.horizon, args.replicates, **{key: value})
            print(f"{arm} {key}={value}: {scores[arm][str(value)]:.4f}", flush=True)
        seconds[arm] = round(time.perf_counter() - arm_started, 1)
    best = {arm: min(table, key=table.get) for arm, table in scores.items()}
    record = {
        "c1_pe": float(best["fair_pe"]),
        "c1_ucb": float(best["fair_ucb"]),
        "linnash_multiplier": float(best["linnash"]),
        "criterion": f"mean Nash regret at T={args.horizon}, 5 instances x validation seeds 100-109, "
        f"{args.replicates} replicates each",
        "trials": {arm: len(table) for arm, table in scores.items()},
        "scores": scores,
        "seconds_per_arm": seconds,
        "last_run": {"arms": args.arms, "seconds": round(time.perf_counter() - started, 1)},
    }
    with open(args.out, "w") as handle:
        json.dump(record, handle, indent=2)
        handle.write("\n")
    print(json.dumps({k: v for k, v in record.items() if k != "scores"}))
    return record


if __name__ == "__main__":
    main()
