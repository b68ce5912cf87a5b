"""Tune BOBA, ``full_greedy`` and the Tanimoto reference on the **validation** oracle, the same trials each.

BOBA: c, m, the reward rule and the acquisition beta; ``TRIALS`` configurations: the spec's defaults (c = 0.5,
m = 0.1, top-k reward, beta = 1) and a seeded sample of the rest of :data:`BOBA_GRID`.
Criterion: mean validation recall among the configurations that use at most 25% of full-library inference (the
claim's budget). ``full_greedy``: the full :data:`FULL_GREEDY_GRID` (beta x epochs), criterion
mean validation recall. Every trial is a campaign of the boba recipe with ``--data.init_args.oracle=validation``
and a validation seed (100, ...); the test oracle is never read. Results are merged into ``zoo/boba/tuning.json``
trial by trial, so the work can be split into locked pieces (``--arm``, ``--trials``); without ``--arm`` every
arm below is tuned (``zoo reproduce boba`` runs that before the fits: the recipe holds BOBA's winners).

``reference_tanimoto_expand`` (the no-learning reference, :mod:`zoo.boba.evaluate_reference`) gets the method's
budget: the ``TRIALS`` configurations of :data:`TANIMOTO_GRID`, criterion mean validation recall.
``many_rounds`` chooses the number of rounds R of the many-rounds comparison (UCB1 against greedy arm choice,
the same 954 oracle calls after the design in R equal batches, ``EPOCHS_TOTAL / R`` epochs per round so the
surrogate trains as long as in 6 rounds of 30): both arm rules for each R of :data:`MANY_ROUNDS_GRID` at c = 0.5,
and UCB1 with c in :data:`MANY_ROUNDS_C` at the largest R; criterion: the largest mean validation gap UCB1 - greedy.

Run: ``flock /tmp/zoo-cpu.lock python -m zoo.boba.tune [--arm boba_ucb --trials 0 1 2]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
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
TANIMOTO_GRID = {"hits": [10, 30, 100], "aggregate": ["max", "mean"]}
MANY_ROUNDS_GRID = {"rounds": [9, 18], "arm_rule": ["ucb", "greedy"]}
#: Oracle calls after the design in the recipe (6 rounds of 159 on 45,540 molecules) and surrogate epochs after them.
ROUND_CALLS, EPOCHS_TOTAL, LIBRARY_SIZE = 954, 180, 45540
MANY_ROUNDS_SEEDS = [100, 101]
MANY_ROUNDS_C = [0.2, 0.05]  # BOBA_GRID's smaller exploration values
ARMS = ("boba_ucb", "full_greedy", "reference_tanimoto_expand", "many_rounds")
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


def tanimoto_trials() -> list[dict]:
    return [dict(zip(TANIMOTO_GRID, v, strict=True)) for v in itertools.product(*TANIMOTO_GRID.values())]


def many_rounds_trials() -> list[dict]:
    """Both arm rules at each R with BOBA's c = 0.5, then UCB1 with the smaller c of :data:`MANY_ROUNDS_C` at the
    largest R (more rounds give UCB1's bonus more pulls to spend)."""
    grid = [dict(zip(MANY_ROUNDS_GRID, v, strict=True)) for v in itertools.product(*MANY_ROUNDS_GRID.values())]
    rounds = max(MANY_ROUNDS_GRID["rounds"])
    return grid + [{"rounds": rounds, "arm_rule": "ucb", "exploration": c} for c in MANY_ROUNDS_C]


def many_rounds_overrides(rounds: int) -> list[str]:
    """R rounds of equal batches spending the recipe's 954 oracle calls, and ``EPOCHS_TOTAL / R`` epochs each."""
    if ROUND_CALLS % rounds:
        raise ValueError(f"{rounds} rounds do not divide the {ROUND_CALLS} oracle calls into equal batches")
    return [
        f"--model.init_args.rounds={rounds}",
        f"--model.init_args.batch_fraction={ROUND_CALLS // rounds / LIBRARY_SIZE:.8f}",
        f"--model.init_args.epochs_per_round={EPOCHS_TOTAL // rounds}",
    ]


TRIAL_SETS = {"reference_tanimoto_expand": tanimoto_trials, "many_rounds": many_rounds_trials}


def overrides(arm: str, config: dict) -> list[str]:
    args = ["--data.init_args.oracle=validation"]
    if arm == "full_greedy":
        args.append("--model.init_args.strategy=full_greedy")
    if arm == "many_rounds":
        c = [f"--model.init_args.exploration={config['exploration']}"] if "exploration" in config else []
        return [*args, f"--model.init_args.arm_rule={config['arm_rule']}", *c, *many_rounds_overrides(config["rounds"])]
    return args + [f"--model.init_args.{key}={value}" for key, value in config.items()]


def run_tanimoto_trial(config: dict, seed: int) -> dict:
    """One ``reference_tanimoto_expand`` campaign on the validation oracle with the recipe's budget."""
    from zoo.boba.evaluate_reference import tanimoto_expand
    from zoo.boba.library import LibrarySpec, load_library, recall

    started = time.perf_counter()
    library = load_library(LibrarySpec(cap=14))
    record = tanimoto_expand(
        library.fps, library.scores["validation"], library.acid, recipe_budget(), seed, **config
    )  # fmt: skip
    return {
        "recall": round(recall(record["labelled"], library.scores["validation"]), 6),
        "inference_fraction": 0.0,
        "oracle_calls": record["oracle_calls"],
        "seconds": round(time.perf_counter() - started, 1),
    }


def recipe_budget():
    """The recipe's oracle budget (rounds, batch, initial design) as a :class:`CampaignConfig`."""
    import yaml

    from zoo.boba.bandit import CampaignConfig

    model = yaml.safe_load(Path(RECIPE).read_text())["model"]["init_args"]
    keys = ("rounds", "batch_fraction", "initial_fraction")
    return CampaignConfig(strategy="random", **{key: model[key] for key in keys})


def run_trial(arm: str, config: dict, seed: int) -> dict:
    from zoo.eval.run import fit_recipe

    if arm == "reference_tanimoto_expand":
        return run_tanimoto_trial(config, seed)
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


def choose_rounds(trials: list[dict], results: dict) -> dict | None:
    """The (R, c) of UCB1 with the largest mean validation gap over greedy arm choice at the same R, over the seeds
    both ran (None before a pair)."""
    recalls = {}
    for i, config in enumerate(trials):
        key = (config["rounds"], config["arm_rule"], config.get("exploration", 0.5))
        recalls[key] = {s: r["recall"] for s, r in results.get(str(i), {}).items()}
    gaps = []
    for (rounds, rule, c), ucb in recalls.items():
        greedy = recalls.get((rounds, "greedy", 0.5), {})
        seeds = sorted(set(ucb) & set(greedy))
        if rule == "ucb" and seeds:
            gap = float(np.mean([ucb[s] - greedy[s] for s in seeds]))
            config = {"rounds": rounds, "exploration": c, "validation_gap": round(gap, 6), "seeds": len(seeds)}
            gaps.append((gap, -rounds, c, config))
    return max(gaps, key=lambda item: item[:3])[3] if gaps else None


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", choices=ARMS, help="one arm (default: all)")
    parser.add_argument("--trials", type=int, nargs="+", default=None, help="trial numbers (default: all)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="default: 100 (many_rounds: 100 101)")
    args = parser.parse_args(argv)
    import torch

    # 2 threads on the 2 cores, unless a slot wrapper set one (2 threads on one core ran a campaign 4x slower)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", 2)))
    record = json.loads(TUNING_FILE.read_text()) if TUNING_FILE.is_file() else {}
    for arm in [args.arm] if args.arm else ARMS:
        record.setdefault("results", {}).setdefault(arm, {})
        trials = {"boba_ucb": boba_trials, "full_greedy": full_greedy_trials, **TRIAL_SETS}[arm]()
        seeds = args.seeds or MANY_ROUNDS_SEEDS if arm == "many_rounds" else args.seeds or [100]
        for i in range(len(trials)) if args.trials is None else args.trials:
            for seed in seeds:
                result = run_trial(arm, trials[i], seed)
                record["results"][arm].setdefault(str(i), {})[str(seed)] = result
                print(arm, i, trials[i], seed, result, flush=True)
                _write(record, boba_trials(), full_greedy_trials())
    return record


def _write(record: dict, boba: list[dict], full: list[dict]) -> None:
    results = record["results"]
    record["configs"] = {"boba_ucb": boba, "full_greedy": full, **{arm: make() for arm, make in TRIAL_SETS.items()}}
    record["trials"] = {arm: len(configs) for arm, configs in record["configs"].items()}
    tuned = [results.get(arm, {}) for arm in ("boba_ucb", "full_greedy")]  # the seeds of the method's own tuning
    record["validation_seeds"] = sorted({int(s) for arm in tuned for t in arm.values() for s in t})
    record["boba_ucb"] = choose("boba_ucb", boba, results.get("boba_ucb", {})) or SPEC_DEFAULT
    record["full_greedy"] = choose("full_greedy", full, results.get("full_greedy", {})) or {
        "acquisition_beta": 1.0, "epochs_per_round": 30,
    }  # fmt: skip
    tanimoto = choose("reference_tanimoto_expand", tanimoto_trials(), results.get("reference_tanimoto_expand", {}))
    record["reference_tanimoto_expand"] = tanimoto or {"hits": 10, "aggregate": "max"}
    record["many_rounds"] = choose_rounds(many_rounds_trials(), results.get("many_rounds", {})) or {"rounds": 18}
    record["criterion"] = (
        "mean top-1% recall on the validation oracle over the validation seeds; boba_ucb only among configurations "
        f"with inference_fraction <= {INFERENCE_BUDGET}; many_rounds: the (R, c) with the largest mean validation "
        "gap UCB1 - greedy arm choice at the same R"
    )
    TUNING_FILE.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
