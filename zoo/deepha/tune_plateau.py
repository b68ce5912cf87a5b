"""Plateau tuning of DeepHA's trained arms (issue #71): ``python -m zoo.deepha.tune_plateau`` -> tuning_plateau.json.

Why: the first tuning (:mod:`.tune`, ``tuning.json``) left every arm at the edge of its grid (lr 3e-3 or 1e-3 of
{1e-3, 3e-3}, 8 of {6, 8} epochs), so the arms may be undertrained. Here each trial trains one arm at one learning
rate for up to :data:`MAX_EPOCHS` epochs and scores *validation* success (greedy episodes on validation seeds, every
training level of the level set; ``coa_compressed`` with its compressed context W) after every epoch from
:data:`FIRST_CHECK` on; it stops once :data:`PATIENCE` checks in a row bring no improvement of ``success_all``
(:func:`plateau_reached`) and records every check, the best epoch and its success. The learning-rate schedule of
every trial spans :data:`MAX_EPOCHS` epochs (``schedule_epochs``), so the chosen fit, ``trainer.max_epochs=<best
epoch>`` with ``model.init_args.schedule_epochs=MAX_EPOCHS``, replays the trial's weights at its best epoch exactly.

Every trained arm gets the same trials: the learning rates of :data:`LR_GRID` (the old maxima extended both ways);
when an arm's best learning rate is the smallest or largest it tried, the next one beyond (x / 2 or x 2, within
:data:`LR_LIMITS`) is added and run (:func:`planned_rates`), so no chosen value sits at a grid edge. An arm's
choice is its best (lr, best epoch) by validation ``success_all`` (ties: the smaller learning rate). The other knobs
stay at their ``tuning.json`` choices (p_drop: every arm's recipe value). A trial that ends at :data:`MAX_EPOCHS`
without reaching the plateau is marked ``epoch_edge``. Seed :data:`~zoo.deepha.tune.TUNE_SEED` (no evaluation seed
uses it); the test split is never read.

Two one-thread worker processes share the trials. Every finished trial is written into the record at once (under
a lock), so a run that stops keeps its trials and the next run resumes with the missing ones; ``--status`` prints
how far the record got and the estimated core-hours (done and left) without running anything. A trial is keyed by
what it trains besides the knobs it sets (:func:`trial_key`), the level set, the arm, the learning rate and the
rule's constants: a trial of another recipe stays in the file but is not used, while writing the chosen values into
the recipes keeps every trial. ``--level-set two_step`` tunes on :data:`~zoo.deepha.demos.LEVEL_SETS`'s
two-step set into ``tuning_plateau_two_step.json``. ``--dry-run`` runs toy-size trials into
``runs/deepha-tune-plateau-dry.json`` (a check of the script, not a tuning).

Cost (estimate printed by every run): one check = 50 episodes x 5 levels. From ``tuning.json``'s 8-epoch fits on
one thread, an epoch costs 31 s (flat) to 78 s (coa_compressed) and a check 12 s to 68 s; a trial of 13 epochs and
10 checks then costs 0.15 h (flat) to 0.47 h (coa_compressed), the 20 trials of the grid 6.4 core-hours. The one
plateau trial measured (flat, lr 1.5e-3, a loaded machine: best epoch 10, success_all 0.557, 1,013 s) ran 1.9x
slower than this predicts: 12.2 core-hours at that rate. About 3 to 6 hours on the two cores, over several sessions.
The two-step set has no Synth (52-step episodes, the longest), so its trials should cost less than this estimate.

Plan for wiring the results into ``zoo eval deepha`` (once the record covers every arm; not done yet, because the
published card must stay what its pieces make):

1. Level set, decided by flat alone first (its four trials cost ~1 core-hour, the five arms' 6-12):
   ``--arms flat`` on each set. If flat's validation success is >= 0.5 on each of PutNextLocal, UnlockLocal
   and Synth, keep ``default``; else tune the ``two_step`` set (``--level-set two_step``) and, if flat reaches 0.5 on
   each of its multi-step levels (PutNextLocalS5N3, UnlockLocal, OpenTwoDoors), use it. Setting
   :data:`~zoo.deepha.evaluate.LEVEL_SET` to the chosen set adds the protocol Setting ``level_set`` (that default,
   ``data.init_args.level_set`` in its recipe keys) and this script as the protocol's ``tune_plateau`` step;
   :func:`~zoo.deepha.evaluate.score_policy`, :func:`~zoo.deepha.evaluate.score_oracle` and
   :func:`~zoo.deepha.evaluate.gates` already read ``settings["level_set"]``. The card then says which set and why.
2. Arms (wired in :mod:`~zoo.deepha.evaluate`; it takes effect per arm once the arm's grid is complete, so an
   unfinished tuning changes nothing the protocol trains): :func:`~zoo.deepha.evaluate.plateau_record` reads the
   record of the protocol's ``LEVEL_SET`` (None, so no record, until the card is measured with it); every trained
   arm's overrides then set its chosen ``lr``, ``max_epochs`` (the best epoch) and ``schedule_epochs``
   (:data:`MAX_EPOCHS`) over ``tuning.json``'s other knobs, and its card record lists this record's rates, trials
   and note. Then ``tune --apply`` writes coa_compressed's and flat's choices into the two recipes (the published
   checkpoints are then refit and re-pinned; the recipe's 15-minute budget may stay if the card says the
   evaluation's fits are longer). ``coa`` (the method's weights with the full context) and ``reference_oracle_coa``
   (the same weights with the bot's skill and grounding tokens forced at every step,
   :func:`~zoo.deepha.oracle.oracle_episodes`) have no parameter of their own and follow ``coa_compressed``;
   ``reference_random`` needs no learning.
3. Gates (kind ``headroom``, every seed; :func:`~zoo.deepha.evaluate.gates` as it stands): flat >= 0.5 on each
   multi-step level of the level set, one value per level and seed; ``reference_oracle_coa`` - flat >= 0.10 on
   ``success_multistep``. Each failure is stated on the card with the per-level numbers.
4. Claims (kind ``paper``, unchanged): ``coa_compressed`` (and ``coa``) >= flat + 0.10 on ``success_multistep``,
   coa >= decoupled, compressed within 2 points of coa at <= 30% of its context, the KV cache >= 1.5x faster with
   identical actions; the card's results lead with CoA against flat, in plain words.
5. Steps: ``tune`` (tuning.json's other knobs), ``tune_plateau`` (with :data:`~zoo.deepha.evaluate.LEVEL_SET`),
   ``apply``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import lightning.pytorch as pl

from zoo.common.records import file_lock, read_record, write_record
from zoo.deepha.evaluate import (
    ARM_SWITCH,
    LEVEL_SET_KEY,
    TRAINED,
    TUNED_KEYS,
    key_parent,
    plateau_file,
    recipe_config,
    recipe_of,
    tuned_overrides,
    tuned_values,
)
from zoo.eval.grid import extend_past_edge

TUNE_SEED = 100  # the seed of zoo.deepha.tune (no evaluation seed uses it)
EPISODES = 50  # validation episodes per training level per check (as tune.py)
MAX_EPOCHS = 30  # every trial's schedule and epoch cap
FIRST_CHECK = 4  # the first epoch scored (6 epochs lost to 8 for every arm in tuning.json)
PATIENCE = 3  # checks in a row without improvement that end a trial
LR_GRID = (7.5e-4, 1.5e-3, 3e-3, 6e-3)
LR_LIMITS = (1e-4, 5e-2)  # the grid is extended past its edges within these
ARMS = TRAINED
SET_BY_TRIAL = ("lr", "max_epochs", "schedule_epochs")  # the knobs every trial sets itself
#: Seconds per training epoch and per check (50 episodes x 5 levels) on one thread, from tuning.json's 8-epoch fits.
COST = {
    "coa_compressed": (78.0, 68.0),
    "decoupled": (61.0, 45.0),
    "coa_skill_only": (69.0, 50.0),
    "coa_grounding_only": (44.0, 36.0),
    "flat": (31.0, 12.0),
}
EXPECTED_EPOCHS = 13  # flat at lr 1.5e-3: best epoch 10, stopped at 13
LOADED_MACHINE = 1.9  # that trial's 1,013 s over the COST prediction (the machine was loaded)
DRY = {"max_epochs": 3, "first_check": 1, "patience": 1, "episodes": 2}
DRY_ARGS = ["--data.init_args.episodes_per_level=4", "--data.init_args.val_episodes_per_level=0"]
DRY_RUN_FILE = Path("runs/deepha-tune-plateau-dry.json")
LOCK = Path("runs/deepha-tune-plateau.lock")
NOTE = (
    "plateau trials: one fit (seed 100) per arm and learning rate, up to {max_epochs} epochs (the schedule's span), "
    "validation success_all ({episodes} validation-seed episodes per training level, coa_compressed with W = 4) after "
    "every epoch from {first_check}, stopped after {patience} checks without improvement; learning rates extended past "
    "a best edge; choice: the best (lr, epoch)"
)


def record_file(level_set: str = "default", dry: bool = False) -> Path:
    """``zoo/deepha/tuning_plateau.json`` (``tuning_plateau_<set>.json`` for another level set)."""
    if dry:
        suffix = "" if level_set == "default" else f"_{level_set}"
        return DRY_RUN_FILE.with_name(f"{DRY_RUN_FILE.stem}{suffix}.json")
    return plateau_file(level_set)


def rule(dry: bool = False) -> dict:
    """The stopping rule's constants (toy-size for a dry run)."""
    full = {"max_epochs": MAX_EPOCHS, "first_check": FIRST_CHECK, "patience": PATIENCE, "episodes": EPISODES}
    return DRY if dry else full


# ---------------------------------------------------------------------------------------------------- the rule


def best_check(history: list[dict]) -> dict | None:
    """The check with the highest ``success_all`` (the earlier one on ties; rounded, as means of success counts)."""
    if not history:
        return None
    return max(history, key=lambda check: (round(check["success_all"], 9), -check["epoch"]))


def plateau_reached(history: list[dict], patience: int) -> bool:
    """True once the last ``patience`` checks all came after the best one (none improved on it)."""
    best = best_check(history)
    return best is not None and sum(check["epoch"] > best["epoch"] for check in history) >= patience


def planned_rates(trials: list[dict], grid=LR_GRID, limits=LR_LIMITS) -> list[float]:
    """An arm's learning rates: the grid, plus one more beyond an edge where the arm's best finished trial sits.

    Args:
        trials: The arm's finished trials (``lr`` and ``best``: the best check, or None).
        grid: The base grid.
        limits: No rate below ``limits[0]`` or above ``limits[1]`` is added.
    """
    best = choose(trials)
    return extend_past_edge(grid, [t["lr"] for t in trials], None if best is None else best["lr"], limits)


def choose(trials: list[dict]) -> dict | None:
    """The trial with the best best-check ``success_all`` (ties: the smaller learning rate)."""
    scored = [t for t in trials if t.get("best")]
    if not scored:
        return None
    return max(scored, key=lambda t: (round(t["best"]["success_all"], 9), -t["lr"]))


# ---------------------------------------------------------------------------------------------------- scoring


def validation_success(model, arm: str, levels, episodes: int) -> dict:
    """Greedy success of ``model`` on ``episodes`` validation-seed episodes of each of ``levels.train``.

    Args:
        model: A :class:`~zoo.deepha.module.DeepHAModule`.
        arm: ``"coa_compressed"`` plays with the protocol's compressed context W; the others with the full context.
        levels: A :class:`~zoo.deepha.demos.LevelSet`.
        episodes: Episodes per level.

    Returns:
        ``success_all``, ``success_multistep`` and ``success`` per level.
    """
    import numpy as np

    from zoo.deepha.evaluate import PROTOCOL, level_means
    from zoo.deepha.evaluate import episodes as play

    window = PROTOCOL.settings["window"].default if arm == "coa_compressed" else None
    success = {}
    for level in levels.train:
        runs = play(lambda batch=True, use_cache=True: model.batch_policy(window), level, "validation", episodes, 128)
        success[level] = float(np.mean([r["success"] for r in runs]))
    means = level_means({f"success_{lv.lower()}": v for lv, v in success.items()}, levels)
    return {**means, "success": success}


class PlateauCheck(pl.Callback):
    """Scores validation success after every training epoch from ``first_check`` and stops the fit at the plateau.

    Args:
        arm: The evaluation arm (``coa_compressed`` plays compressed).
        levels: The level set (:class:`~zoo.deepha.demos.LevelSet`).
        episodes: Validation episodes per level per check.
        first_check: The first epoch (1-based) scored.
        patience: Checks without improvement that stop the fit (:func:`plateau_reached`).
    """

    def __init__(self, arm: str, levels, episodes: int, first_check: int, patience: int):
        self.arm, self.levels, self.episodes = arm, levels, episodes
        self.first_check, self.patience = first_check, patience
        self.history: list[dict] = []
        self.started = time.perf_counter()

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        epoch = trainer.current_epoch + 1
        if epoch < self.first_check:
            return
        fitted = time.perf_counter()
        scores = validation_success(pl_module, self.arm, self.levels, self.episodes)
        pl_module.train()  # the policies put the module in eval mode
        now = time.perf_counter()
        self.history.append(
            {"epoch": epoch, **scores, "check_s": round(now - fitted, 1), "at_s": round(now - self.started, 1)}
        )
        if plateau_reached(self.history, self.patience):
            trainer.should_stop = True


# ---------------------------------------------------------------------------------------------------- trials


def trial_key(arm: str, lr: float, level_set: str, dry: bool) -> str:
    """The digest that identifies a trial: what it trains besides the knobs it sets (the arm's recipe without the
    tuning knobs' keys, and the values it trains with of the other knobs), the arm, learning rate, level set, rule
    and seed. Writing the chosen values into a recipe (``tune --apply``) or editing its comments keeps the trials."""
    from zoo.eval.store import digest

    config = recipe_config(recipe_of(arm))
    for key in (*TUNED_KEYS.values(), LEVEL_SET_KEY):  # the level set is in the key as the trial's, whatever sets it
        parent, leaf = key_parent(config, key)
        parent.pop(leaf, None)
    fixed = {k: v for k, v in tuned_values(arm).items() if k not in SET_BY_TRIAL}
    return digest([arm, lr, level_set, rule(dry), TUNE_SEED, config, fixed, ARM_SWITCH.get(arm, ()), dry])[:16]


def fit_args(arm: str, lr: float, level_set: str, dry: bool) -> list[str]:
    """LightningCLI arguments of a trial: arm switch, tuned knobs other than lr and epochs, lr, epochs, schedule."""
    kept = [a for a in tuned_overrides(arm) if not a.startswith(("--model.init_args.lr=", "--trainer.max_epochs="))]
    max_epochs = rule(dry)["max_epochs"]
    args = [*ARM_SWITCH.get(arm, ()), *kept, f"--model.init_args.lr={lr}", f"--trainer.max_epochs={max_epochs}"]
    args += [f"--model.init_args.schedule_epochs={max_epochs}", "--model.init_args.num_threads=1"]
    if level_set != "default":
        args.append(f"--{LEVEL_SET_KEY}={level_set}")
    return args + (DRY_ARGS if dry else [])


def run_trial(arm: str, lr: float, level_set: str = "default", dry: bool = False) -> dict:
    """Train one trial to its plateau (or :data:`MAX_EPOCHS`) and add it to the record."""
    import torch

    from zoo.deepha.demos import level_set as named_level_set
    from zoo.deepha.evaluate import PROTOCOL
    from zoo.eval.run import fit_recipe

    constants = rule(dry)
    torch.set_num_threads(1)
    check = PlateauCheck(arm, named_level_set(level_set), constants["episodes"], constants["first_check"],
                         constants["patience"])  # fmt: skip
    overrides = ["--trainer.enable_checkpointing=false", *fit_args(arm, lr, level_set, dry)]
    fit_recipe(recipe_of(arm), TUNE_SEED, overrides, PROTOCOL.seed_args, callbacks=[check])
    best = best_check(check.history)
    trial = {
        "key": trial_key(arm, lr, level_set, dry),
        "arm": arm,
        "lr": lr,
        "level_set": level_set,
        "dry": dry,
        "best": None
        if best is None
        else {k: best[k] for k in ("epoch", "success_all", "success_multistep", "success")},
        "epochs_run": check.history[-1]["epoch"] if check.history else 0,
        "stopped": "plateau" if plateau_reached(check.history, constants["patience"]) else "max_epochs",
        "checks": check.history,
        "total_s": round(time.perf_counter() - check.started, 1),
    }
    add_trial(trial, record_file(level_set, dry))
    return trial


def add_trial(trial: dict, path: Path) -> dict:
    """Add (or replace, by key) one trial in the record at ``path`` and rewrite its summary, under a lock."""
    with file_lock(LOCK):
        trials = [t for t in read_record(path).get("trials", []) if t["key"] != trial["key"]]
        record = summarise([*trials, trial], trial["level_set"], trial["dry"])
        write_record(path, record)
    return record


def current_trials(record: dict, arm: str, level_set: str, dry: bool) -> list[dict]:
    """The record's trials of ``arm`` that the recipes and rule at hand would run (stale keys left out)."""
    return [
        t for t in record.get("trials", []) if t["arm"] == arm and t["key"] == trial_key(arm, t["lr"], level_set, dry)
    ]


def summarise(trials: list[dict], level_set: str, dry: bool, arms=ARMS) -> dict:
    """The record: the trials, and per arm its plan, progress, choice and edge flags; plus the cost estimate."""
    record = {"level_set": level_set, "seed": TUNE_SEED, "rule": rule(dry), "grid": list(LR_GRID),
              "note": NOTE.format(**rule(dry)), "arms": {}, "trials": trials}  # fmt: skip
    for arm in arms:
        mine = current_trials(record, arm, level_set, dry)
        rates = planned_rates(mine)
        best = choose(mine)
        done = sorted(t["lr"] for t in mine)
        entry = {"planned_lr": rates, "done_lr": done}
        if best is not None:
            span = rule(dry)["max_epochs"]
            entry.update(
                chosen={"lr": best["lr"], "max_epochs": best["best"]["epoch"], "schedule_epochs": span},
                score=best["best"]["success_all"],
                success_multistep=best["best"]["success_multistep"],
                lr_at_edge=best["lr"] in (min(done), max(done)),
                epoch_edge=best["stopped"] == "max_epochs",
                complete=len(mine) == len(rates) and best["lr"] not in (min(done), max(done)),
            )  # fmt: skip
        record["arms"][arm] = entry
    record["progress"] = progress(record, level_set, dry, arms)
    return record


def progress(record: dict, level_set: str, dry: bool, arms=ARMS) -> dict:
    """Trials done and planned, core-hours spent, and the estimate (low: tuning.json's costs; high: x 1.9)."""
    done, pending, spent, left = 0, 0, 0.0, 0.0
    for arm in arms:
        mine = current_trials(record, arm, level_set, dry)
        done += len(mine)
        spent += sum(t["total_s"] for t in mine)
        missing = len(planned_rates(mine)) - len(mine)
        pending += missing
        if mine:  # this machine's measured cost of the arm's trials
            per_trial = sum(t["total_s"] for t in mine) / len(mine)
        else:
            epoch_s, check_s = COST[arm]
            per_trial = EXPECTED_EPOCHS * epoch_s + (EXPECTED_EPOCHS - FIRST_CHECK + 1) * check_s
        left += missing * per_trial
    hours = 3600.0
    return {
        "trials_done": done,
        "trials_planned": done + pending,
        "core_hours_spent": round(spent / hours, 2),
        "core_hours_left_estimate": [round(left / hours, 2), round(LOADED_MACHINE * left / hours, 2)],
        "note": "left: [at tuning.json's per-epoch costs or the arm's measured trials, x 1.9 as on a loaded machine]"
        "; grid extensions past an edge are not in 'planned' until the edge is known (+1 trial per arm each)",
    }


def report(record: dict) -> str:
    """A few lines on how far the record got."""
    p = record["progress"]
    low, high = p["core_hours_left_estimate"]
    lines = [f"{p['trials_done']} of {p['trials_planned']} planned trials done, {p['core_hours_spent']} core-hours "
             f"spent; left: {low}-{high}; estimated total {p['core_hours_spent'] + low:.2f}-"
             f"{p['core_hours_spent'] + high:.2f} core-hours"]  # fmt: skip
    for arm, entry in record["arms"].items():
        chosen = entry.get("chosen")
        text = "no trial yet" if chosen is None else (
            f"best lr {chosen['lr']:g} epoch {chosen['max_epochs']}: success_all {entry['score']:.3f}, multistep "
            f"{entry['success_multistep']:.3f}{', lr at an edge' if entry['lr_at_edge'] else ''}"
            f"{', stopped by max_epochs' if entry['epoch_edge'] else ''}")  # fmt: skip
        lines.append(f"  {arm}: lr {entry['done_lr']} of {entry['planned_lr']}; {text}")
    return "\n".join(lines)


def main(workers: int = 2, level_set: str = "default", dry: bool = False, arms=ARMS) -> dict:
    """Run every arm's pending trials in ``workers`` one-thread processes, round after round (a round adds the
    rates past an edge), until no trial is missing; the record is written after every trial."""
    from zoo.deepha.demos import level_set as named_level_set

    named_level_set(level_set)
    path = record_file(level_set, dry)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    while True:
        record = summarise(read_record(path).get("trials", []), level_set, dry, arms)
        print(report(record), flush=True)
        jobs = [{"arm": arm, "lr": lr} for arm in arms for lr in record["arms"][arm]["planned_lr"]
                if lr not in record["arms"][arm]["done_lr"]]  # fmt: skip
        if not jobs:
            return record
        procs = []
        for share in (jobs[i::workers] for i in range(workers)):
            if share:
                command = [sys.executable, "-m", "zoo.deepha.tune_plateau", "--worker", json.dumps(share)]
                command += ["--level-set", level_set, *(["--dry-run"] if dry else [])]
                procs.append(subprocess.Popen(command, env=env))
        if any([proc.wait() != 0 for proc in procs]):  # a list: wait for every worker
            raise SystemExit(f"a plateau worker failed (its finished trials are kept in {path})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--level-set", default="default", help="a key of zoo.deepha.demos.LEVEL_SETS")
    parser.add_argument("--dry-run", action="store_true", help="toy-size trials into runs/deepha-tune-plateau-dry.json")
    parser.add_argument("--arms", nargs="+", default=list(ARMS))
    parser.add_argument("--status", action="store_true", help="print how far the record got and the estimate")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.status:
        path = record_file(args.level_set, args.dry_run)
        print(report(summarise(read_record(path).get("trials", []), args.level_set, args.dry_run, tuple(args.arms))))
    elif args.worker:
        for job in json.loads(args.worker):
            result = run_trial(job["arm"], job["lr"], args.level_set, args.dry_run)
            best = result["best"] or {"epoch": 0, "success_all": float("nan")}
            print(f"{job['arm']} lr {job['lr']:g}: best epoch {best['epoch']} success_all {best['success_all']:.3f} "
                  f"({result['stopped']}, {result['total_s']} s)", flush=True)  # fmt: skip
    else:
        main(args.workers, args.level_set, args.dry_run, tuple(args.arms))
