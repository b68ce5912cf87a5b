"""Validation tuning of DeepHA's trained arms (``python -m zoo.deepha.tune``) -> ``zoo/deepha/tuning.json``.

Every trained arm (``coa_compressed``, ``decoupled``, ``coa_skill_only``, ``coa_grounding_only``, ``flat``) gets
the same trials (:data:`TRIALS`): its recipe's values and one departure per knob (learning rate, epochs, drop
probability). An arm with no skill or grounding tokens to drop (``flat``, ``decoupled``) counts the drop trial as
its recipe trial (the same fit: it is not trained twice). Each trial trains the arm's recipe with seed
:data:`TUNE_SEED` (no evaluation seed uses it) and plays ``EPISODES`` greedy episodes of each training level on
*validation* seeds (``coa_compressed`` with its compressed context, W = 4); the trial with the best mean success
over the five levels is chosen (ties: the earlier trial). The test split is never read here.

Two one-thread worker processes share the trials (a trial's result does not depend on the worker); each trial's
result is kept in ``runs/deepha-tune/`` (keyed by the recipe texts and the trial), so an interrupted run resumes.
``--dry-run`` runs every trial at toy size into ``runs/deepha-tune-dry.json`` (a check of the script, not a tuning).

Issue #71's plateau tuning (every arm trained to a validation plateau over a wider learning-rate grid, and the plan
for wiring it into the evaluation) is :mod:`zoo.deepha.tune_plateau`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from zoo.deepha import evaluate
from zoo.deepha.evaluate import ARM_SWITCH, KNOBS, RECIPES, TRAINED, TUNING_FILE, recipe_of, recipe_values

TUNE_SEED = 100
EPISODES = 50  # validation episodes per training level (the protocol)
ARMS = TRAINED
#: The two values of each knob; a departure takes the one its arm's recipe does not hold.
ALTERNATIVES = {"lr": (0.001, 0.003), "max_epochs": (6, 8), "p_drop": (0.3, 0.6)}
#: The recipe's values (``{}``) and one departure per knob: the same four trials for every arm.
TRIALS = [{}, {"lr": None}, {"max_epochs": None}, {"p_drop": None}]
NO_DROPS = ("flat", "decoupled")  # arms whose streams have no skill/grounding tokens to drop
FOLDER = Path("runs/deepha-tune")
DRY_RUN_FILE = Path("runs/deepha-tune-dry.json")
DRY_ARGS = [
    "--trainer.max_steps=3",
    "--data.init_args.episodes_per_level=4",
    "--data.init_args.val_episodes_per_level=0",
]
NOTE = (
    "trials: the recipe's values and one departure per knob; each trial one fit (seed 100) scored by greedy success on "
    "{episodes} validation-seed episodes of each of the five training levels (coa_compressed with W = 4); flat and "
    "decoupled have no tokens to drop, so their drop trial is their recipe trial"
)


def fit_args(arm: str, trial: dict) -> list[str]:
    """LightningCLI arguments of one trial (the arm's switch, then its knobs)."""
    return [*ARM_SWITCH.get(arm, ()), *(f"--{KNOBS[k]}={v}" for k, v in sorted(trial.items()))]


def effective(arm: str, trial: dict) -> dict:
    """The trial's knob values for ``arm``: a departure (``None``) takes the alternative to the recipe's value; a
    drop probability does nothing for ``flat`` / ``decoupled`` and is left out."""
    out = {}
    for knob, value in trial.items():
        if knob == "p_drop" and arm in NO_DROPS:
            continue
        if value is None:
            have = recipe_values(recipe_of(arm))[knob]
            value = next(v for v in ALTERNATIVES[knob] if v != have)
        out[knob] = value
    return out


def trial_file(arm: str, trial: dict, dry: bool) -> Path:
    """``runs/deepha-tune/<arm>-<knobs>-<digest>.json``: one trial's result, keyed by both recipes' texts."""
    from zoo.eval.store import digest

    recipes = [Path(p).read_text() for p in RECIPES.values()]
    key = [arm, effective(arm, trial), recipes, TUNE_SEED, EPISODES, dry]
    stem = "-".join(f"{k}{v}" for k, v in sorted(effective(arm, trial).items())) or "recipe"
    return FOLDER / f"{arm}-{stem}-{digest(key)[:16]}.json"


def validation_success(model, arm: str, count: int = EPISODES) -> dict:
    """Greedy success of ``model`` on ``count`` validation-seed episodes of each training level.

    Args:
        model: A trained :class:`~zoo.deepha.module.DeepHAModule`.
        arm: ``"coa_compressed"`` plays with its compressed context (the protocol's W); any other arm with full context.
        count: Episodes per level.

    Returns:
        ``success_all`` (mean over the five levels), ``success_multistep`` and the per-level ``success``.
    """
    import numpy as np
    import torch

    from zoo.deepha.demos import MULTISTEP_LEVELS, TRAIN_LEVELS
    from zoo.deepha.evaluate import PROTOCOL, episodes

    window = PROTOCOL.settings["window"].default if arm == "coa_compressed" else None
    torch.set_num_threads(1)
    success = {}
    for level in TRAIN_LEVELS:
        runs = episodes(lambda batch=True, use_cache=True: model.batch_policy(window), level, "validation", count, 128)
        success[level] = float(np.mean([r["success"] for r in runs]))
    return {
        "success_all": float(np.mean(list(success.values()))),
        "success_multistep": float(np.mean([success[lv] for lv in MULTISTEP_LEVELS])),
        "success": success,
    }


def run_trial(arm: str, trial: dict, dry: bool = False) -> dict:
    """Fit one trial and score it on validation episodes (stored in :func:`trial_file`)."""
    from zoo.deepha.evaluate import PROTOCOL
    from zoo.eval.run import fit_recipe

    path = trial_file(arm, trial, dry)
    if path.is_file():
        return json.loads(path.read_text())
    started = time.perf_counter()
    args = [*fit_args(arm, effective(arm, trial)), "--model.init_args.num_threads=1", *(DRY_ARGS if dry else [])]
    model = fit_recipe(recipe_of(arm), TUNE_SEED, args, PROTOCOL.seed_args)
    fit_s = time.perf_counter() - started
    result = {
        "arm": arm,
        "trial": trial,
        **validation_success(model, arm, 2 if dry else EPISODES),
        "fit_s": round(fit_s, 1),
        "total_s": round(time.perf_counter() - started, 1),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))
    return result


def main(workers: int = 2, dry: bool = False, arms=ARMS) -> dict:
    """Run every arm's trials in ``workers`` one-thread processes and write the record."""
    from zoo._recipes import resolve_recipe  # noqa: F401  (fail early outside a checkout)

    jobs, seen = [], set()
    for arm in arms:
        for trial in TRIALS:
            key = (arm, json.dumps(effective(arm, trial), sort_keys=True))
            if key not in seen:
                seen.add(key)
                jobs.append({"arm": arm, "trial": effective(arm, trial)})
    shares = [jobs[i::workers] for i in range(workers)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    procs = []
    for share in shares:
        if share:
            command = [sys.executable, "-m", "zoo.deepha.tune", "--worker", json.dumps(share)]
            procs.append(subprocess.Popen([*command, *(["--dry-run"] if dry else [])], env=env))
    if any([proc.wait() != 0 for proc in procs]):  # a list: wait for every worker
        raise SystemExit("a tuning worker failed (its trials done so far are kept in runs/deepha-tune/)")
    record = {"grid": {}, "seed": TUNE_SEED, "episodes": EPISODES, "note": NOTE.format(episodes=EPISODES), "arms": {}}
    for arm in arms:
        base = recipe_values(recipe_of(arm))
        trials = [run_trial(arm, effective(arm, trial), dry) for trial in TRIALS]
        # Rounded: a mean of success counts, so equal counts are a tie however the floats were summed.
        best = max(range(len(trials)), key=lambda i: (round(trials[i]["success_all"], 9), -i))
        chosen = {k: base[k] for k in {k for t in TRIALS for k in t}} | effective(arm, TRIALS[best])
        record["arms"][arm] = {"trials": trials, "chosen": chosen, "score": trials[best]["success_all"]}
    record["grid"] = {k: list(v) for k, v in ALTERNATIVES.items()}
    out = DRY_RUN_FILE if dry else TUNING_FILE
    out.write_text(json.dumps(record, indent=1) + "\n")
    print("wrote", out)
    return record


def apply_to_recipes(record: dict | None = None, plateau: dict | None = None) -> list[str]:
    """Write the chosen values of ``coa_compressed`` into babyai.yaml and of ``flat`` into flat.yaml (the published
    recipes), line by line so their comments stay (review them: they explain the old values); returns the changed
    lines.

    Args:
        record: ``tuning.json``'s record (default: the file).
        plateau: The plateau record (default: the protocol's level set's, :func:`~zoo.deepha.evaluate.plateau_record`);
            an arm's complete plateau choice replaces ``tuning.json``'s lr and epochs and adds ``schedule_epochs``
            (a new line above ``lr`` where the recipe has none).
    """
    import re

    record = record or evaluate.tuning_record()
    plateau = evaluate.plateau_record(evaluate.LEVEL_SET) if plateau is None else plateau
    changed = []
    for arm, recipe in (("coa_compressed", RECIPES["coa"]), ("flat", RECIPES["flat"])):
        if arm not in record.get("arms", {}):
            raise SystemExit(f"{TUNING_FILE.name} has no choice for {arm}: run python -m zoo.deepha.tune first")
        path = Path(recipe)
        text = path.read_text()
        chosen = evaluate.chosen_values(arm, record, evaluate.plateau_entry(arm, plateau).get("chosen"))
        for knob, value in chosen.items():
            name = evaluate.TUNED_KEYS[knob].rsplit(".", 1)[-1]
            pattern = re.compile(rf"^(\s+{name}: )([^\s#]+)", re.MULTILINE)
            found = len(pattern.findall(text))
            if found == 0 and knob in evaluate.SCHEDULE_KNOB:
                lr_line = re.compile(r"^(\s+)lr: ", re.MULTILINE)
                if len(lr_line.findall(text)) != 1:
                    raise SystemExit(f"{recipe}: expected one line 'lr: ...' to put '{name}' above")
                line = f"{name}: {value}  # the learning-rate schedule's span in epochs (tune_plateau.py)"
                new = lr_line.sub(lambda m, line=line: f"{m.group(1)}{line}\n{m.group(0)}", text)
            elif found != 1:
                raise SystemExit(f"{recipe}: expected one line '{name}: ...'")
            else:
                new = pattern.sub(lambda m, v=value: f"{m.group(1)}{v}", text)
            if new != text:
                changed.append(f"{recipe}: {name} = {value}")
            text = new
        path.write_text(text)
    return changed


if __name__ == "__main__":
    import logging

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dry-run", action="store_true", help="toy-size trials into runs/deepha-tune-dry.json")
    parser.add_argument("--arms", nargs="+", default=list(ARMS))
    parser.add_argument(
        "--apply", action="store_true", help="write the chosen values (the plateau's where complete) into the recipes"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    if args.apply:
        print("\n".join(apply_to_recipes()) or "the recipes already hold the chosen values")
    elif args.worker:
        for job in json.loads(args.worker):
            result = run_trial(job["arm"], job["trial"], args.dry_run)
            print(f"{job['arm']} {job['trial']}: success_all {result['success_all']:.3f} in {result['total_s']} s")
    else:
        main(args.workers, args.dry_run, tuple(args.arms))
