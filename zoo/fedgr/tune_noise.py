"""Noise-handling study: one learning-rate grid for FedGR, its baselines and ``fedgr_no_noise_handling``.

Why: FedGR ran at lr 0.05 while FedAvg and FedProx were tuned over {0.02, 0.01} only, so the published lead cannot
tell the noise handling from the learning rate. Here every arm of :data:`ARMS` gets the same trials, the learning
rates of :data:`~zoo.fedgr.evaluate_noise.LR_GRID` (which holds every rate the recipes had: FedGR 0.05, FedAvg and
FedProx 0.01, Co-teaching 0.02, plus 0.1), each trained from the arm's recipe with seed 0 for 80 rounds and scored
like ``python -m zoo.fedgr.tune``: the final global model's accuracy on the clients' own held-out noisy labels (10%
of each client, ``client_val_fraction``). The test set is never read unless ``--test-curve`` asks for the per-round
test accuracy, which is recorded for monitoring and never chooses anything. Per arm the trial with the best final
validation accuracy is chosen (ties: the smaller rate). Where that trial sits at an edge of the rates tried, the
next rate beyond it (x / 2 or x 2, within :data:`~zoo.fedgr.evaluate_noise.LR_LIMITS`) is added and run
(:func:`~zoo.fedgr.evaluate_noise.planned_rates`; a second run of the command runs it), so no chosen rate sits at
an edge.

Arms: ``fedgr``, ``fedavg``, ``fedprox``, ``coteaching`` (forget rate = the true noise rate, oracle),
``coteaching_estimated`` (forget rate estimated by the client's own GMM sieve, ``baselines.coteach_forget_rate=
estimated``) and ``fedgr_no_noise_handling`` (FedGR's recipe, views, schedule and L_reg with the sieve, refining and
distillation off: plain cross-entropy on every observed label; :data:`zoo.fedgr.config.NO_NOISE_HANDLING`).

The memorisation probe, ``--arms fedavg_memorisation --test-curve``, trains FedAvg's recipe over the same lr grid in
each candidate setting of :data:`MEMORISATION_SETTINGS` (the protocol's ``--set`` keys: the paper's 10 local
epochs; the spec's pair-flip setting B). A setting is a memorisation regime when FedAvg at its validation-chosen
rate there peaks and falls: the validation curve's best minus final >= 0.02 (noisy labels, no test data), which the
test curve then confirms.

Records: every finished trial is merged at once into ``zoo/fedgr/tuning_noise.json`` (under a lock; two workers
share it), so an interrupted run resumes where it stopped; the chosen rates are written at the end. The protocol does
not read this file yet. Two one-thread worker processes share the trials (largest first, each to the less loaded
worker); the command prints its estimated core-hours (from the 80-round fit times in ``tuning.json``) first::

    python -m zoo.fedgr.tune_noise                                      # the six arms: 24 trials, ~3.7 core-hours
    python -m zoo.fedgr.tune_noise --arms fedavg_memorisation --test-curve   # the probe: 8 trials, ~1.4 core-hours
    python -m zoo.fedgr.tune_noise --estimate                           # print the estimate, run nothing
    python -m zoo.fedgr.tune_noise --dry-run                            # toy-size check of the script (seconds)

Plan for wiring the study into ``zoo.fedgr.evaluate.PROTOCOL`` once the tuning and the probe are done (not done
yet: the published card must stay what its pieces make). :mod:`zoo.fedgr.evaluate_noise` reads this record
(:func:`~zoo.fedgr.evaluate_noise.chosen_rate`, :func:`~zoo.fedgr.evaluate_noise.study_tuning`,
:func:`~zoo.fedgr.evaluate_noise.memorisation_regime`). The wiring then: puts every published arm's chosen rate
in its recipe (refit, re-pin); adds ``coteaching_estimated`` and ``fedgr_no_noise_handling`` to ``baselines`` at
their chosen rates (:func:`~zoo.fedgr.evaluate_noise.at_rate`; the latter is the recipe without its mechanism,
tuned like a baseline, so the card's strongest comparison may be it), ``fedgr_no_noise_handling_clean`` and the
regime's arms (:func:`~zoo.fedgr.evaluate_noise.regime_arms`; ``fedgr_regime`` in ``method_variants``) to
``ablations``, ``coteaching`` (oracle rates) to ``ceilings``; takes every tuned arm's ``TUNING`` from this record;
appends :func:`~zoo.fedgr.evaluate_noise.noise_study_claims` to the claims and
:func:`~zoo.fedgr.evaluate_noise.noise_cost_panel` as a fourth panel; scores the sieve only where it runs, on the
data the arm saw (a regime arm's). The published pieces of the arms whose recipe and training code are unchanged
stay valid (``zoo eval fedgr --arms <the new and changed arms> --verify --card`` keeps them).

Caveats: FedGR's loss weights stay at their recipe's values (distill_weight 0.3, reg_weight 0.1) across the lr grid;
600 noisy validation labels give a ~2-point standard error, so a chosen rate is the rule's outcome, not evidence that
it is better (say so in ``TUNING``, as today's notes do).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from zoo.common.records import file_lock, read_record, write_record
from zoo.fedgr.evaluate_noise import (
    MEMORISATION_SETTINGS,
    NOISE_STUDY_ARMS,
    PROBE,
    STUDY_FILE,
    accuracy_by_rate,
    best_rate,
    planned_rates,
    study_trials,
)

TRIALS_FILE = STUDY_FILE
DRY_RUN_FILE = Path("runs/fedgr-tune-noise-dry.json")
BASE_TUNING_FILE = Path(__file__).with_name("tuning.json")
_STUDY = {arm.name: arm for arm in NOISE_STUDY_ARMS}
#: Arm -> (registry entry whose recipe it trains, LightningCLI overrides on top): the published arms as they are,
#: the new ones as the evaluation will define them.
ARMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "fedgr": ("fedgr", ()),
    "fedavg": ("fedgr.fedavg", ()),
    "fedprox": ("fedgr.fedprox", ()),
    "coteaching": ("fedgr.coteaching", ()),
    **{name: (f"fedgr.{_STUDY[name].base}", tuple(_STUDY[name].overrides)) for name in ("coteaching_estimated",)},
    "fedgr_no_noise_handling": ("fedgr", tuple(_STUDY["fedgr_no_noise_handling"].overrides)),
}
#: Seconds of one 80-round, 5-local-epoch trial on one thread when ``tuning.json`` has no such row for the method.
FALLBACK_SECONDS = {"fedgr": 660.0, "fedavg": 350.0, "fedprox": 395.0, "coteaching": 630.0}
TEST_CURVE_SECONDS_PER_ROUND = 1.5  # scoring 10,000 test images on one thread after every round
DRY_ARGS = (
    "--trainer.max_epochs=2",
    "--data.init_args.samples_per_client=30",
    "--model.init_args.samples_per_client=30",
    "--data.init_args.val_size=50",
    "--model.init_args.local.epochs=1",
)


# ------------------------------------------------------------------------------------------------ the trials


def trial_key(trial: Mapping, rounds: int, fraction: float, seed: int) -> str:
    """The records key of one trial: its grid values and settings, rounds, validation fraction and seed."""
    return json.dumps({**trial, "rounds": rounds, "fraction": fraction, "seed": seed}, sort_keys=True)


def trials(arm: str, done: Mapping[str, Mapping[float, float]] | None = None) -> list:
    """The trials of an arm: one per rate of :func:`planned_rates`; the probe's, per candidate setting.

    Args:
        arm: An arm of :data:`ARMS` or :data:`PROBE`.
        done: Per setting (``json.dumps(setting, sort_keys=True)``, ``"{}"`` for the arms) the finished trials'
            validation accuracy by learning rate, which decides whether a rate beyond an edge is added.
    """
    if arm != PROBE and arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; choose from {[*ARMS, PROBE]}")
    out = []
    for setting in MEMORISATION_SETTINGS if arm == PROBE else ({},):
        rows = (done or {}).get(json.dumps(setting, sort_keys=True), {})
        out += [{**setting, "local.lr": lr} for lr in planned_rates(rows)]
    return out


def finished(record: Mapping, arm: str, options: Mapping) -> dict[str, dict[float, float]]:
    """An arm's finished trials at ``options``' rounds, fraction and seed: per setting, accuracy by rate."""
    trial = {name: options[name] for name in ("rounds", "fraction", "seed")}
    return {setting: accuracy_by_rate(rows) for setting, rows in study_trials(record, arm, trial).items()}


def entry_of(arm: str) -> str:
    """The registry entry whose recipe an arm trains."""
    return ARMS["fedavg"][0] if arm == PROBE else ARMS[arm][0]


def published_rates() -> dict[str, float]:
    """The learning rate of every published entry's recipe (what the shared grid must hold)."""
    import yaml

    import zoo
    from zoo._recipes import resolve_recipe

    rates = {}
    for arm in ("fedgr", "fedavg", "fedprox", "coteaching"):
        recipe = yaml.safe_load(Path(resolve_recipe(zoo.get_entry(entry_of(arm)).pretrained_cfg.recipe)).read_text())
        rates[arm] = float(recipe["model"]["init_args"]["local"]["lr"])
    return rates


def setting_overrides(trial: Mapping) -> list[str]:
    """LightningCLI arguments of a trial: each protocol setting through its recipe keys, then its lr."""
    from zoo.fedgr.evaluate import setting_args

    setting = {name: value for name, value in trial.items() if name != "local.lr"}
    return [*setting_args(setting), f"--model.init_args.local.lr={trial['local.lr']}"]


def run_trial(arm: str, trial: Mapping, options: Mapping) -> dict:
    """Train one trial and return its record row (validation curve, its drop, optional test curve, seconds)."""
    import torch

    import zoo
    from zoo.eval.run import fit_recipe
    from zoo.fedgr.evaluate import PROTOCOL

    torch.set_num_threads(1)
    started = time.perf_counter()
    test_curve = options["test_curve"] or arm == PROBE
    overrides = [
        f"--data.init_args.client_val_fraction={options['fraction']}",
        f"--trainer.max_epochs={options['rounds']}",
        f"--model.init_args.curve_test_limit={(100 if options['dry_run'] else 10000) if test_curve else 0}",
        *(ARMS[arm][1] if arm in ARMS else ()),
        *setting_overrides(trial),
        *(DRY_ARGS if options["dry_run"] else ()),
    ]
    recipe = zoo.get_entry(entry_of(arm)).pretrained_cfg.recipe
    module = fit_recipe(recipe, options["seed"], overrides, PROTOCOL.seed_args)
    val = [float(v) for v in module.client_val_curve]
    row = {"client_val_accuracy": val[-1], **curve_drop(val, "val"), "client_val_curve": [round(v, 4) for v in val]}
    if test_curve:
        test = [float(v) for v in module.test_curve]
        row.update(curve_drop(test, "test"), test_curve=[round(v, 4) for v in test])
    row.update(noise_rate_error(arm, module))
    row["seconds"] = round(time.perf_counter() - started, 1)
    return row


def curve_drop(curve: Sequence[float], name: str) -> dict:
    """Where a per-round accuracy curve peaks and how far it has fallen from the peak by the last round."""
    best = max(range(len(curve)), key=curve.__getitem__)
    return {f"{name}_best_round": best + 1, f"{name}_drop_best_to_final": round(curve[best] - curve[-1], 4)}


def noise_rate_error(arm: str, module) -> dict:
    """Mean |estimated - true| client noise rate of the arms that estimate it (monitoring, never choosing)."""
    import numpy as np

    true = np.array([module.trainers[k].data.noise_rate for k in sorted(module.trainers)])
    if arm == "fedgr":
        estimates = module.noise_estimate.detach().cpu().numpy()
    elif arm == "coteaching_estimated":
        states = module.client_states
        estimates = np.array([float(states.get(k, {}).get("noise_estimate", 0.0)) for k in sorted(module.trainers)])
    else:
        return {}
    return {"noise_rate_mae": round(float(np.abs(estimates - true).mean()), 4)}


# ----------------------------------------------------------------------------------------------- the record


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock for ``path`` (a lock file in the temp folder: the package folder stays clean)."""
    name = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    with file_lock(Path(tempfile.gettempdir()) / f"zoo-fedgr-tune-noise-{name}.lock"):
        yield


def update_record(path: Path, change) -> dict:
    """Under the lock: re-read the record (another worker may have written), apply ``change``, write atomically."""
    with locked(path):
        record = read_record(path)
        change(record)
        write_record(path, record)
    return record


def merge_trial(path: Path, arm: str, key: str, row: dict) -> dict:
    """Add one finished trial to the record."""
    return update_record(path, lambda record: record.setdefault("trials", {}).setdefault(arm, {}).__setitem__(key, row))


def choose(rows: Mapping[str, dict]) -> tuple[str, dict]:
    """The trial with the best final validation accuracy (ties: the smaller learning rate)."""
    by_rate = {json.loads(key)["local.lr"]: key for key in rows}
    key = by_rate[best_rate({rate: rows[key]["client_val_accuracy"] for rate, key in by_rate.items()})]
    return key, rows[key]


def summarise(record: Mapping, keys: Mapping[str, Sequence[str]]) -> dict:
    """Per arm (and per candidate setting for the probe) the chosen trial among ``keys``, if all are done."""
    summary = {}
    for arm, arm_keys in keys.items():
        rows = record.get("trials", {}).get(arm, {})
        if not all(key in rows for key in arm_keys):
            continue
        groups: dict[str, dict] = {}
        for key in arm_keys:
            setting = {k: v for k, v in json.loads(key).items() if k != "local.lr"}
            groups.setdefault(json.dumps(setting, sort_keys=True), {})[key] = rows[key]
        for setting, group in groups.items():
            key, row = choose(group)
            name = arm if len(groups) == 1 else f"{arm} {setting}"
            summary[name] = {
                "local.lr": json.loads(key)["local.lr"],
                "client_val_accuracy": row["client_val_accuracy"],
                "val_drop_best_to_final": row["val_drop_best_to_final"],
                "trials": len(group),
                **({"test_drop_best_to_final": row["test_drop_best_to_final"]} if "test_curve" in row else {}),
            }
    return summary


# ----------------------------------------------------------------------------------------------- the budget


@functools.cache
def base_tuning() -> dict:
    """``tuning.json``'s record (read once: the estimate of every trial reads its timings)."""
    return read_record(BASE_TUNING_FILE)


def trial_seconds(
    arm: str, trial: Mapping, rounds: int, test_curve: bool, base: Mapping | None = None, record: Mapping | None = None
) -> float:
    """Estimated single-thread seconds of one trial: the arm's own finished 80-round trials in ``record`` (this
    study's), else the 80-round rows of ``tuning.json`` of its method.

    Local training dominates, so the time scales with rounds x local epochs (5 in the recipes); the derived arms
    take their method's time (``fedgr_no_noise_handling`` skips the teacher and the uploads: an upper bound).
    """
    method = {"coteaching_estimated": "coteaching", "fedgr_no_noise_handling": "fedgr", PROBE: "fedavg"}.get(arm, arm)
    own = [] if arm == PROBE else list((record or {}).get("trials", {}).get(arm, {}).items())
    base = base_tuning() if base is None and not own else (base or {})
    rows = [row for key, row in own or base.get(method, {}).items() if json.loads(key).get("rounds") == 80]
    per_80 = sum(row["seconds"] for row in rows) / len(rows) if rows else FALLBACK_SECONDS[method]
    seconds = per_80 * rounds / 80 * trial.get("local_epochs", 5) / 5
    return seconds + (TEST_CURVE_SECONDS_PER_ROUND * rounds if test_curve or arm == PROBE else 0.0)


def share(jobs: Sequence[dict], workers: int) -> list[list[dict]]:
    """Longest jobs first, each to the least loaded worker (by ``job["estimate"]``)."""
    shares: list[list[dict]] = [[] for _ in range(workers)]
    loads = [0.0] * workers
    for job in sorted(jobs, key=lambda job: -job["estimate"]):
        worker = loads.index(min(loads))
        shares[worker].append(job)
        loads[worker] += job["estimate"]
    return [s for s in shares if s]


# --------------------------------------------------------------------------------------------------- driving


def plan(arms: Sequence[str], options: Mapping, record: Mapping) -> tuple[dict[str, list[str]], list[dict]]:
    """Every arm's trial keys, and the jobs still to run (trials not in the record), each with its estimate."""
    keys, jobs = {}, []
    for arm in arms:
        keys[arm] = []
        for trial in trials(arm, finished(record, arm, options)):
            key = trial_key(trial, options["rounds"], options["fraction"], options["seed"])
            keys[arm].append(key)
            if key not in record.get("trials", {}).get(arm, {}):
                estimate = trial_seconds(arm, trial, options["rounds"], options["test_curve"], record=record)
                jobs.append({"arm": arm, "trial": trial, "key": key, "estimate": estimate})
    return keys, jobs


def work(jobs: Sequence[dict], options: Mapping, path: Path) -> None:
    """A worker: run its jobs in order, merging each finished trial into the record at once."""
    import logging

    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    for job in jobs:
        if job["key"] in read_record(path).get("trials", {}).get(job["arm"], {}):
            continue  # done meanwhile (a second run of the command)
        row = run_trial(job["arm"], job["trial"], options)
        merge_trial(path, job["arm"], job["key"], row)
        print(f"{job['arm']} {job['trial']}: client-validation accuracy {row['client_val_accuracy']:.4f}", flush=True)


def main(argv: Sequence[str] | None = None) -> dict:
    """Plan, print the estimate, run the open trials in one-thread worker processes, write the choices."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=[*ARMS, PROBE])
    parser.add_argument("--rounds", type=int, default=80)
    parser.add_argument("--fraction", type=float, default=0.1, help="each client's held-out validation share")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--test-curve", action="store_true", help="also record the test accuracy per round")
    parser.add_argument("--workers", type=int, default=2, help="one-thread worker processes")
    parser.add_argument("--json", default=None, help=f"the record (default {TRIALS_FILE})")
    parser.add_argument("--estimate", action="store_true", help="print the estimated core-hours and stop")
    parser.add_argument("--dry-run", action="store_true", help=f"toy-size trials into {DRY_RUN_FILE}")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    path = Path(args.json or (DRY_RUN_FILE if args.dry_run else TRIALS_FILE))
    options = {
        "rounds": 2 if args.dry_run else args.rounds,
        "fraction": args.fraction,
        "seed": args.seed,
        "test_curve": args.test_curve,
        "dry_run": args.dry_run,
    }
    if args.worker:
        work(json.loads(args.worker), options, path)
        return {}
    record = read_record(path)
    keys, jobs = plan(args.arms, options, record)
    total = sum(
        trial_seconds(a, json.loads(k), options["rounds"], args.test_curve, record=record)
        for a in keys
        for k in keys[a]
    )
    left = sum(job["estimate"] for job in jobs)
    shares = share(jobs, args.workers)
    wall = max((sum(job["estimate"] for job in s) for s in shares), default=0.0)
    print(
        f"{sum(map(len, keys.values()))} trials ({len(jobs)} to run) of {', '.join(args.arms)}: estimated "
        f"{total / 3600:.1f} core-hours in all, {left / 3600:.1f} left (~{wall / 3600:.1f} h wall on "
        f"{len(shares)} one-thread workers){' [dry run: toy size, seconds]' if args.dry_run else ''}",
        flush=True,
    )
    if args.estimate:
        return {}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    procs = []
    for jobs_of_worker in shares:
        command = [sys.executable, "-m", "zoo.fedgr.tune_noise", *(argv if argv is not None else sys.argv[1:])]
        procs.append(subprocess.Popen([*command, "--json", str(path), "--worker", json.dumps(jobs_of_worker)], env=env))
    if any([proc.wait() != 0 for proc in procs]):  # a list: wait for every worker
        raise SystemExit(f"a tuning worker failed; the trials it finished are kept in {path}")
    record = read_record(path)
    summary = summarise(record, keys)
    update_record(path, lambda r: r.setdefault("chosen", {}).update(summary))
    for name, chosen in summary.items():
        print(f"{name}: chosen {chosen}", flush=True)
    return summary


if __name__ == "__main__":
    main()
