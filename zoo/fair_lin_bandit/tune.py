"""Tune c1 (fair_pe, fair_ucb) and LinNash's constants on the validation instances (seeds 100-109).

Every configuration runs on the evaluation's instances (the decoy variants, :data:`VALIDATION_DATASETS`) of each
validation seed at T = 20k, instances of equal arm dimension, seeds and replicates batched into one simulation
(the batch dimension); the score is the mean Nash regret (expectation over the replicates of each instance). The grids:

* c1 in :data:`C1_GRID` for fair_pe and fair_ucb; c1 = 0 is Phase 1 off (the base policy alone).
* LinNash (the ``linnash`` arm): its Part I multiplier (3 published) x a scale of both elimination constants
  (16 and 6, scale 1 published), :data:`LINNASH_MULTIPLIERS` x :data:`LINNASH_SCALES`, more trials than c1 gets.

Whenever the best value of a grid sits on an edge that can move (c1's top; both ends of LinNash's axes), the grid
is extended past it (c1 x2; multiplier /2 or x2; scale /3 or x3) and the new points are scored, up to
:data:`MAX_EXTENSIONS` times per axis. The test seeds 0-9 are never touched. Writes ``zoo/fair_lin_bandit/tuning.json``
(the chosen values, every score and the grids searched), which ``evaluate.py`` reads as defaults.

Run: ``/work/cpu python -m zoo.fair_lin_bandit.tune`` (``--arms linnash`` re-tunes one arm and keeps the others'
record).
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import numpy as np

from zoo.fair_lin_bandit.instances import DECOY_DATASETS, build_instance
from zoo.fair_lin_bandit.policies import ALGORITHMS, make_policy, simulate
from zoo.fair_lin_bandit.regret import p_means_regret

TUNING_FILE = Path(__file__).with_name("tuning.json")
C1_GRID = (0.0, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0)
LINNASH_MULTIPLIERS = (0.5, 1.0, 3.0)
LINNASH_SCALES = (0.03, 0.1, 0.3, 1.0)
VALIDATION_SEEDS = tuple(range(100, 110))
VALIDATION_DATASETS = DECOY_DATASETS
TUNED_ARMS = ("fair_pe", "fair_ucb", "linnash")
MAX_EXTENSIONS = 3
#: Per arm: the policy argument of each grid axis, the starting grid, and how an edge extends (lower, upper);
#: None: that edge does not move (c1 = 0 is already Phase 1 off).
AXES = {
    "fair_pe": {"c1": (C1_GRID, None, lambda v: 2 * v)},
    "fair_ucb": {"c1": (C1_GRID, None, lambda v: 2 * v)},
    "linnash": {
        "linnash_multiplier": (LINNASH_MULTIPLIERS, lambda v: v / 2, lambda v: 2 * v),
        "linnash_width_scale": (LINNASH_SCALES, lambda v: v / 3, lambda v: 3 * v),
    },
}


def validation_score(
    algorithm: str, horizon: int, replicates: int, seeds=VALIDATION_SEEDS, datasets=VALIDATION_DATASETS, **policy_args
) -> float:
    """Mean Nash regret over the instances of ``seeds`` and ``datasets``: one batched simulation per group of
    instances with the same arm dimension (the policies' constants depend on d, so no padding)."""
    groups: dict[tuple[int, int], list] = {}
    for name in datasets:
        for seed in seeds:
            instance = build_instance(name, seed)
            groups.setdefault(instance.arms.shape, []).append(instance)
    regrets = []
    for (num_arms, dim), instances in sorted(groups.items()):
        arms = np.repeat(np.stack([i.arms for i in instances]), replicates, axis=0)
        mu = np.repeat(np.stack([i.mu for i in instances]), replicates, axis=0)
        rng = np.random.default_rng([7, horizon, ALGORITHMS.index(algorithm), dim])
        policy = make_policy(algorithm, horizon, dim, num_arms, rng, **policy_args)
        expected = simulate(policy, arms, mu, horizon, rng)["expected"]
        expected = expected.reshape(len(instances), replicates, horizon).mean(axis=1)
        best = np.array([i.best for i in instances])
        regrets.extend(np.atleast_1d(p_means_regret(expected, best, 0.0)).tolist())
    return float(np.mean(regrets))


def _key(point: dict[str, float]) -> str:
    return ",".join(f"{name}={value:g}" for name, value in point.items())


def extend(grids: dict[str, list[float]], best: dict[str, float], axes: dict, counts: dict[str, int]) -> bool:
    """Extend every axis whose best value sits on a movable edge (in place); True if any grew."""
    grown = False
    for name, (_, lower, upper) in axes.items():
        values = grids[name]
        if counts[name] >= MAX_EXTENSIONS:
            continue
        if best[name] == min(values) and lower is not None:
            values.insert(0, round(lower(best[name]), 6))
        elif best[name] == max(values) and upper is not None:
            values.append(round(upper(best[name]), 6))
        else:
            continue
        counts[name] += 1
        grown = True
    return grown


def tune_arm(arm: str, horizon: int, replicates: int, score=validation_score) -> tuple[dict, dict, dict]:
    """Score the grid of ``arm`` (extending it past a winning edge); ``(best point, scores, grids searched)``."""
    axes = AXES[arm]
    grids = {name: list(grid) for name, (grid, _, _) in axes.items()}
    counts = dict.fromkeys(axes, 0)
    scores: dict[str, float] = {}
    while True:
        for values in itertools.product(*grids.values()):
            point = dict(zip(grids, values, strict=True))
            if _key(point) not in scores:
                scores[_key(point)] = score(arm, horizon, replicates, **point)
                print(f"{arm} {_key(point)}: {scores[_key(point)]:.4f}", flush=True)
        best_key = min(scores, key=scores.get)
        best = {name: float(value) for name, value in (item.split("=") for item in best_key.split(","))}
        if not extend(grids, best, axes, counts):
            return best, scores, grids


def write_record(record: dict, path, horizon: int = 20_000, replicates: int = 2, last_run: dict | None = None) -> dict:
    """Write ``tuning.json`` from ``record`` (``chosen``, ``scores``, ``grids``, ``seconds_per_arm`` per arm); the
    chosen values of an arm not tuned yet are left out. Also merges records of arms tuned in separate runs."""
    chosen = record["chosen"]
    names = {"c1_pe": ("fair_pe", "c1"), "c1_ucb": ("fair_ucb", "c1")}
    names |= {key: ("linnash", key) for key in ("linnash_multiplier", "linnash_width_scale")}
    out = {key: chosen[arm][axis] for key, (arm, axis) in names.items() if arm in chosen}
    out["criterion"] = (
        f"mean Nash regret at T={horizon}, {len(VALIDATION_DATASETS)} instances ({', '.join(VALIDATION_DATASETS)}) "
        f"x validation seeds 100-109, {replicates} replicates each"
    )
    out["trials"] = {arm: len(table) for arm, table in record["scores"].items()}
    out |= {key: record[key] for key in ("chosen", "scores", "grids", "seconds_per_arm")}
    if last_run is not None:
        out["last_run"] = last_run
    with open(path, "w") as handle:
        json.dump(out, handle, indent=2)
        handle.write("\n")
    return out


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
    record = {key: previous.get(key, {}) for key in ("chosen", "scores", "grids", "seconds_per_arm")}
    for arm in args.arms:
        arm_started = time.perf_counter()
        chosen, scores, grids = tune_arm(arm, args.horizon, args.replicates)
        record["chosen"][arm], record["scores"][arm], record["grids"][arm] = chosen, scores, grids
        record["seconds_per_arm"][arm] = round(time.perf_counter() - arm_started, 1)
    last_run = {"arms": args.arms, "seconds": round(time.perf_counter() - started, 1)}
    out = write_record(record, args.out, args.horizon, args.replicates, last_run)
    print(json.dumps({k: v for k, v in out.items() if k != "scores"}))
    return out


if __name__ == "__main__":
    main()
