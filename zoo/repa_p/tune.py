"""Choose the loss balance of both learned arms on validation conditions: ``python -m zoo.repa_p.tune``.

The one knob is the weight of the physics terms, ``c_res`` (with ``c_proj = c_res`` for REPA-P, as the paper
keeps the two equal). Each arm trains its own recipe (seed 0) for ``--steps`` steps at every grid value, with
the recipe's validation curve (10-step samples of the 32 ``val`` conditions, never a test split) as the score:
the geometric mean of the final validation residual and MSE, each divided by the zero field's on the same
conditions (both validity gates of issue 16 in one number; lower is better). Both arms get the same grid and
the same number of trials. The record goes to ``zoo/repa_p/tuning.json``, which ``zoo eval repa_p`` reports.

Run it under the shared CPU lock, one process per arm on one thread each (on the shared 2-core machine two
single-threaded processes were faster than one two-threaded one; about 3.5 min for 3 values x 500 steps)::

    flock /tmp/zoo-cpu.lock bash -c \
        'python -m zoo.repa_p.tune --arms repa_p & python -m zoo.repa_p.tune --arms pidm; wait'

Each process adds its trials to the record (under a file lock) and the selection is recomputed from all of them.

Two stages. Stage 1 (above): every grid value for 500 steps. At 500 steps no trial had yet beaten the zero
field and the scores were within a few percent of each other, and the 1,600-step recipe run of REPA-P's
stage-1 choice (c_res = 1) ended with validation MSE 0.81x the zero field's (the physics terms held the data
term back), so stage 2 trains the two ends of the grid, {0.01, 1}, for the recipes' full 1,600 steps (seed 0)
for *both* arms and scores them the same way; the selection uses the longest trials of each arm. A stage-2
trial is a recipe run exported by ``zoo fit``, recorded with ``--score-export ARM FOLDER``::

    zoo fit -c recipes/repa_p/pidm_poisson_32.yaml --model.init_args.c_res=1.0
    python -m zoo.repa_p.tune --score-export pidm runs/repa_p.pidm_poisson_32/version_1/pretrained

Each arm gets the same 3 + 2 trials. They ran when the recipes trained 1,600 steps; both arms chose 0.01 (the
paper's value). When the recipes grew to 5,000 steps, stage 3 re-ran the ends {0.01, 1} at that length for both
arms (2026-12-03): c_res = 1 by ``--steps 5000 --values 1.0`` (one process per arm, 868 s and 618 s side by side),
0.01 by ``--score-export`` of the published recipe runs; both arms keep 0.01 (3 + 2 + 2 trials each).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

TUNING_FILE = Path(__file__).with_name("tuning.json")
GRID = (0.01, 0.1, 1.0)
RECIPES = {"repa_p": "recipes/repa_p/poisson_32.yaml", "pidm": "recipes/repa_p/pidm_poisson_32.yaml"}


def validation_pairs(size: int = 32, num_val: int = 32, seed: int = 0):
    """The Poisson task and the validation (field, condition) pairs that the recipes' curves use."""
    from zoo.repa_p.tasks import get_task

    task = get_task("poisson", size)
    return (task, *task.generate("val", num_val, seed))


def zero_field_validation(size: int = 32, num_val: int = 32, seed: int = 0) -> dict[str, float]:
    """Residual and MSE of ``U = 0`` on the validation conditions the recipes' curves use."""
    task, x0, condition = validation_pairs(size, num_val, seed)
    interior, _ = task.residual(x0 * 0, condition)
    return {"residual": interior.abs().mean().item(), "mse": x0.square().mean().item()}


def score(final: dict[str, float], zero: dict[str, float]) -> float:
    """Geometric mean of the validation residual and MSE relative to the zero field's (lower is better)."""
    return math.sqrt(final["residual"] / zero["residual"] * final["mse"] / zero["mse"])


def trial_record(arm: str, c_res: float, c_proj: float, steps: int, final: dict, seconds: float, zero: dict) -> dict:
    """One tuning trial as ``tuning.json`` stores it: its loss weights, final validation point, score and time."""
    return {
        "arm": arm,
        "c_res": c_res,
        "c_proj": c_proj,
        "steps": steps,
        "val_residual": final["residual"],
        "val_mse": final["mse"],
        "score": round(score(final, zero), 6),
        "seconds": seconds,
    }


def main() -> None:
    import torch

    from zoo._eval import fit_recipe
    from zoo.repa_p.evaluate import PROTOCOL

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500, help="training steps of each trial")
    parser.add_argument("--values", type=float, nargs="+", default=list(GRID), help="c_res (= c_proj) values")
    parser.add_argument("--arms", nargs="+", default=list(RECIPES), choices=list(RECIPES), help="arms to tune")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads of this process")
    parser.add_argument("--score-export", nargs=2, metavar=("ARM", "FOLDER"), help="record a zoo fit export")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    zero = zero_field_validation()
    if args.score_export:
        arm, folder = args.score_export
        trial = export_trial(arm, Path(folder), zero)
        print(json.dumps(trial))
        print(json.dumps(record_trials([trial], [trial["c_res"]], zero)["selection"]))
        return
    trials = []
    for arm in args.arms:
        recipe = RECIPES[arm]
        for value in args.values:
            overrides = [
                f"--trainer.max_steps={args.steps}",
                f"--model.init_args.ema_start={args.steps // 2}",
                f"--model.init_args.c_res={value}",
            ]
            if arm == "repa_p":
                overrides.append(f"--model.init_args.c_proj={value}")
            started = time.perf_counter()
            module = fit_recipe(recipe, 0, overrides, PROTOCOL.seed_args)
            c_proj = value if arm == "repa_p" else 0.0
            seconds = round(time.perf_counter() - started, 1)
            trial = trial_record(arm, value, c_proj, args.steps, module.val_history[-1], seconds, zero)
            trials.append(trial)
            print(json.dumps(trial), flush=True)
    print(json.dumps(record_trials(trials, args.values, zero)["selection"]))


def export_trial(arm: str, folder: Path, zero: dict[str, float]) -> dict:
    """A trial read from a ``zoo fit`` export: its loss weights, final validation point and fit time."""
    config = json.loads((folder / "config.json").read_text())
    init, training = config["init_args"], config["metadata"]["training"]
    final, seconds = config["metadata"]["val_history"][-1], training["fit_time_s"]
    trial = trial_record(arm, init["c_res"], init["c_proj"], training["global_step"], final, seconds, zero)
    return trial | {"export": str(folder)}


def record_trials(trials: list[dict], values: list[float], zero: dict[str, float]) -> dict:
    """Add trials to ``tuning.json`` (replacing earlier trials of the same arm and value) and reselect."""
    import fcntl
    import tempfile

    with open(Path(tempfile.gettempdir()) / "zoo-repa-p-tuning.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        old = json.loads(TUNING_FILE.read_text())["trials"] if TUNING_FILE.is_file() else []
        fresh = {(t["arm"], t["c_res"], t["steps"]) for t in trials}
        merged = [t for t in old if (t["arm"], t["c_res"], t["steps"]) not in fresh] + trials
        merged.sort(key=lambda t: (list(RECIPES).index(t["arm"]), t["steps"], t["c_res"]))
        selection = {}
        for arm in RECIPES:
            mine = [t for t in merged if t["arm"] == arm]
            if mine:
                longest = max(t["steps"] for t in mine)  # a later, longer stage supersedes a shorter one
                best = min((t for t in mine if t["steps"] == longest), key=lambda t: t["score"])
                selection[arm] = {k: best[k] for k in ("c_res", "c_proj", "score", "steps") if k in best}
                if "export" in best:
                    selection[arm]["export"] = best["export"]
        record = {
            "split": "validation (the recipes' 32 val conditions, 10-step samples, seed 0); longest stage selects",
            "score": "sqrt(val_residual / zero_residual * val_mse / zero_mse), lower is better",
            "zero_field": zero,
            "grid": {"c_res": sorted({t["c_res"] for t in merged} | set(values))},
            "trials": merged,
            "selection": selection,
        }
        TUNING_FILE.write_text(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__":
    main()
