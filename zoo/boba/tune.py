"""Tune BOBA and ``full_greedy`` on the **validation** oracle with the same number of trials each.

BOBA: c, m, the reward rule and the acquisition beta; ``TRIALS`` configurations: the spec's defaults (c = 0.5,
m = 0.1, top-k reward, beta = 1) and a seeded sample of the rest of :data:`BOBA_GRID`.
Criterion: mean validation recall among the configurations that use at most 25% of full-library inference (the
claim's budget). ``full_greedy``: the full :data:`FULL_GREEDY_GRID` (beta x epochs), criterion
mean validation recall. Every trial is a campaign of the boba recipe with ``--data.init_args.oracle=validation``
and a validation seed (100, ...); the test oracle is never read. Results are merged into ``zoo/boba/tuning.json``
trial by trial, so the work can be split into locked pieces (``--arm``, ``--trials``); without ``--arm`` both arms
are tuned (``zoo reproduce boba`` runs that before the fits: the recipe holds BOBA's winners).

Run: ``flock /tmp/zoo-cpu.lock python -m zoo.boba.tune [--arm boba_ucb --trials 0 1 2]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import numpy as np

TUNING_FILE = Path(__file__).with_name("tuning.json")
SEED_ARGS = ("seed_everything", "model.init_args.seed", "data.init_args.seed")
BOBA_GRID = {
    "exploration": [0.05, 0.2, 0.5, 1.0],
    "arm_fraction": [0.05, 0.1, 0.2],
    "reward": ["topk", "best"],
    "acquisition_beta": [0.0, 0.5, 1.0],
}
FULL_GREEDY_GRID = {"acquisition_beta": [0.0, 0.5, 1.0], "epochs_per_round": [15, 30]}
TRIALS = 6
RECIPE = "recipes/boba/amide_cap14.yaml"
SPEC_DEFAULT = {"exploration": 0.5, "arm_fraction": 0.1, "reward": "topk", "acquisition_beta": 1.0}
INFERENCE_BUDGET = 0.25


def boba_trials() -> list[dict]:
    """The spec's defaults, then a seeded sample (without replacement) of the rest of the grid."""
    grid = [dict(zip(BOBA_GRID, values, strict=True)) for values in itertools.product(*BOBA_GRID.values())]
    rest = [config for config in grid if config != SPEC_DEFAULT]
    picks = np.random.default_rng(0).choice(len(rest), size=TRIALS - 1, replace=False)
    return [SPEC_DEFAULT, *(rest[i] for i in sorted(picks))]


def full_greedy_trials() -> list[dict]:
    return [dict(zip(FULL_GREEDY_GRID, v, strict=True)) for v in itertools.product(*FULL_GREEDY_GRID.values())]


def overrides(arm: str, config: dict) -> list[str]:
    args = ["--data.init_args.oracle=validation"]
    if arm == "full_greedy":
        args.append("--model.init_args.strategy=full_greedy")
    return args + [f"--model.init_args.{key}={value}" for key, value in config.items()]


def run_trial(arm: str, config: dict, seed: int) -> dict:
    from zoo.eval.run import fit_recipe

    started = time.perf_counter()
    record = fit_recipe(RECIPE, seed, overrides(arm, config), SEED_ARGS).campaign_record
    n0 = max(1, round(record["config"]["initial_fraction"] * record["size"]))
    full = sum(record["size"] - n0 - r * record["batch"] for r in range(len(record["rounds"]) - 1))
    return {
        "recall": record["recall_top1pct"],  # against the validation oracle's exact top 1%
        "inference_fraction": record["surrogate_inferences"] / full,
        "oracle_calls": record["oracle_calls"],
        "seconds": round(time.perf_counter() - started, 1),
    }


def choose(arm: str, trials: list[dict], results: dict) -> dict | None:
    """The winning configuration from the trials run so far (None before any)."""
    scored = []
    for i, config in enumerate(trials):
        runs = list(results.get(str(i), {}).values())
        if not runs:
            continue
        recall = float(np.mean([r["recall"] for r in runs]))
        fraction = float(np.mean([r["inference_fraction"] for r in runs]))
        if arm == "boba_ucb" and fraction > INFERENCE_BUDGET:
            continue
        scored.append((recall, -i, config))
    return max(scored, key=lambda item: item[:2])[2] if scored else None


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", choices=("boba_ucb", "full_greedy"), help="one arm (default: both)")
    parser.add_argument("--trials", type=int, nargs="+", default=list(range(TRIALS)))
    parser.add_argument("--seeds", type=int, nargs="+", default=[100])
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(2)
    record = json.loads(TUNING_FILE.read_text()) if TUNING_FILE.is_file() else {}
    for arm in [args.arm] if args.arm else ["boba_ucb", "full_greedy"]:
        record.setdefault("results", {}).setdefault(arm, {})
        trials = boba_trials() if arm == "boba_ucb" else full_greedy_trials()
        for i in args.trials:
            for seed in args.seeds:
                result = run_trial(arm, trials[i], seed)
                record["results"][arm].setdefault(str(i), {})[str(seed)] = result
                print(arm, i, trials[i], seed, result, flush=True)
                _write(record, boba_trials(), full_greedy_trials())
    return record


def _write(record: dict, boba: list[dict], full: list[dict]) -> None:
    results = record["results"]
    record["configs"] = {"boba_ucb": boba, "full_greedy": full}
    record["trials"] = {arm: len(configs) for arm, configs in record["configs"].items()}
    record["validation_seeds"] = sorted({int(s) for arm in results.values() for t in arm.values() for s in t})
    record["boba_ucb"] = choose("boba_ucb", boba, results.get("boba_ucb", {})) or SPEC_DEFAULT
    record["full_greedy"] = choose("full_greedy", full, results.get("full_greedy", {})) or {
        "acquisition_beta": 1.0, "epochs_per_round": 30,
    }  # fmt: skip
    record["criterion"] = (
        "mean top-1% recall on the validation oracle over the validation seeds; boba_ucb only among configurations "
        f"with inference_fraction <= {INFERENCE_BUDGET}"
    )
    TUNING_FILE.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
