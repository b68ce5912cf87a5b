"""Validation tuning of ProtoVAR's evaluation (``python -m zoo.protovar.tune``) -> ``zoo/protovar/tuning.json``.

1. The student protocol, once for every arm: steps and Adam learning rate from ``STUDENT_GRID``. At each step
   count the rate is chosen by the mean validation accuracy of two students that need no generator, one on the
   ``random_real`` IPC-10 set and one on ``full_data`` (the 55,000-image pool); a ``herding`` IPC-10 student is
   scored too. The protocol is the fewest steps whose validation headroom (full_data minus the better of the two
   real IPC-10 sets) reaches ``HEADROOM`` (the evaluation's gate), else the step count with the largest headroom:
   a protocol under which full data and 100 real images score alike cannot rank distilled sets.
2. Each generative arm (``var_unguided``, ``var_unguided_select``, ``protovar_noselect``, ``protovar``) gets the
   same number of trials (``TRIALS``, 4 each): the spec's settings and three departures of one or two knobs
   each, over the knobs that arm has (sampler: top-k, temperature, CFG; selector: pool ratio r, confidence floor;
   injection: beta scale, gamma). Each trial is an IPC-10 set scored by the validation accuracy of one student;
   the best trial's settings are used at both IPCs.

Two single-thread worker processes share the trials (``main(workers=2)``); a trial's result does not depend on
which worker runs it.

Tuning uses seed ``TUNE_SEED`` (sampling, real subsets and students), which no evaluation seed uses, and the
validation split only (``VAL_IMAGES`` images); the test split is never read here.

``--stage arms`` re-tunes only the generative arms (after a new generator), reading the student protocol from
``tuning.json``. ``python -m zoo.protovar.tune --dry-run`` runs every step at toy size (2-step students, 100
validation images, IPC 1) into ``runs/protovar-tune-dry.json``, leaving ``tuning.json`` alone: a check that the
tuning runs on new weights, not a tuning.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from zoo._errors import ZooError
from zoo.eval import reaches
from zoo.protovar.evaluate import (
    DEFAULTS,
    HEADROOM,
    TUNING_FILE,
    distilled_set,
    student_accuracy,
    student_protocol,
)

TUNE_SEED = 100
VAL_IMAGES = 5000
IPC = 10
DRY_RUN_FILE = Path("runs/protovar-tune-dry.json")
# The spec's 300 steps and two longer protocols: with the 1-epoch teacher no step count opened the headroom
# (+1.9 / +2.7 points at 1,000 / 2,500 steps); with the published 5-epoch teacher 2,500 steps give +5.8 on
# validation (student_pilot.json, tuning.json).
STUDENT_GRID = {"steps": [300, 1000, 2500], "lr": [0.01, 0.03, 0.1]}
SHARP = {"top_k": 8, "temperature": 0.8}  # a sharper sampler than the spec's (top-k 32, temperature 1)
TRIALS = {  # the first point of each arm is the spec's settings (DEFAULTS)
    "var_unguided": [{}, SHARP, {"cfg": 3.0}, {"temperature": 1.2}],
    "var_unguided_select": [{}, SHARP, {"r": 10}, {"floor": 0.5}],
    "protovar_noselect": [{}, SHARP, {"gamma": 1.0}, {"beta_scale": 2.0}],
    "protovar": [{}, SHARP, {"gamma": 1.0}, {"r": 10}],
}
FIXED_NOTE = (
    "one IPC-10 student (seed 100) per trial, scored on 5,000 validation images; the spec's settings (top-k 32, "
    "temperature 1, CFG 1.5, beta (5, 3, 1.5) x beta_scale 1, gamma 0 = logit-bias injection only, pool ratio "
    "r = 5, confidence floor 0.8) and three one-knob departures (the sharper sampler is top-k 8 with temperature "
    "0.8); gamma scales the spec's embedding-mixing weights (0.8, 0.5, 0.2)"
)


def grid_of(points: list[dict]) -> dict[str, list]:
    """The values tried, by knob (the spec's value included) of a list of trial points."""
    keys = sorted({k for point in points for k in point})
    return {k: sorted({point.get(k, DEFAULTS[k]) for point in points}) for k in keys}


def _best(points: list, scores: list[float]):
    return points[max(range(len(scores)), key=scores.__getitem__)]


_MODELS: dict = {}


def _score(task: tuple) -> float:
    """Validation accuracy of one student: ``(arm, student settings, arm settings, ipc, validation images)``; runs
    in a worker process."""
    arm, student, arm_point, ipc, val_images = task
    generator, teacher = _MODELS["generator"], _MODELS["teacher"]
    trial = {"student": {"best": student}, "arms": {arm: {"best": arm_point or {}}}}
    if arm == "full_data":
        from zoo.protovar.data import fmnist_splits

        images, labels = fmnist_splits()["train"]
    else:
        images, labels = distilled_set(arm, generator, teacher, ipc, TUNE_SEED, trial)
    value = student_accuracy(images, labels, teacher, TUNE_SEED, "val", val_images, student_protocol(trial))
    print(arm, student, arm_point if arm_point is not None else "", round(value, 4), flush=True)
    return value


def tune_student(pool, ipc: int, val_images: int, grid: dict) -> dict:
    """The student protocol's record: at each step count the learning rate with the best mean of a random_real
    IPC-10 and a full_data student; then the fewest steps with validation headroom >= ``HEADROOM``."""
    points = [{"steps": steps, "lr": lr} for steps in grid["steps"] for lr in grid["lr"]]
    sets = ("full_data", "random_real", "herding")
    values = pool.map(_score, [(arm, point, None, ipc, val_images) for point in points for arm in sets], chunksize=1)
    per_set = {arm: values[i :: len(sets)] for i, arm in enumerate(sets)}
    means = [(a + b) / 2 for a, b in zip(per_set["random_real"], per_set["full_data"], strict=True)]
    headroom = [
        f - max(r, h) for f, r, h in zip(per_set["full_data"], per_set["random_real"], per_set["herding"], strict=True)
    ]
    per_steps = {  # steps -> index of its best learning rate (the first on ties)
        steps: max((i for i, point in enumerate(points) if point["steps"] == steps), key=means.__getitem__)
        for steps in grid["steps"]
    }
    passing = [i for steps, i in sorted(per_steps.items()) if reaches(headroom[i], HEADROOM)]
    chosen = passing[0] if passing else max(per_steps.values(), key=headroom.__getitem__)
    best = points[chosen]
    at = {steps: f"{points[i]['lr']} ({100 * headroom[i]:+.1f})" for steps, i in sorted(per_steps.items())}
    rule = (
        f"the fewest steps of {grid['steps']} whose validation headroom reaches {100 * HEADROOM:.0f} points"
        if passing
        else f"no step count of {grid['steps']} reached {100 * HEADROOM:.0f} points of validation headroom; the largest"
    )
    return {
        "best": best,
        "grid": grid,
        "trials": len(points),
        "points": points,
        "scores": {
            "random_real_ipc10": per_set["random_real"],
            "full_data": per_set["full_data"],
            "mean": means,
            "herding_ipc10": per_set["herding"],
        },
        "validation_headroom": headroom[chosen],
        "note": f"{best['steps']} steps, Adam lr {best['lr']}: {rule} (full_data minus the better of random_real "
        "and herding IPC 10, seed 100, 5,000 images); at each step count the rate with the best mean of a "
        f"random_real IPC-10 and a full_data student (rate and headroom by steps: {at}); there full_data "
        f"{per_set['full_data'][chosen]:.4f}, random_real {per_set['random_real'][chosen]:.4f}, herding "
        f"{per_set['herding'][chosen]:.4f}",
    }


def tune_arms(pool, student: dict, ipc: int, val_images: int) -> dict:
    """Each generative arm's record: its :data:`TRIALS` points scored by one validation student each."""
    tasks = [(arm, student, dict(point), ipc, val_images) for arm, trials in TRIALS.items() for point in trials]
    values = pool.map(_score, tasks, chunksize=1)
    out = {}
    for arm, trials in TRIALS.items():
        arm_points = [dict(point) for point in trials]
        scores = [v for task, v in zip(tasks, values, strict=True) if task[0] == arm]
        winner = _best(arm_points, scores)
        out[arm] = {
            "best": winner,
            "grid": grid_of(arm_points),
            "points": arm_points,
            "trials": len(scores),
            "scores": scores,
            "note": f"chosen {winner or 'the spec settings'} ({max(scores):.4f}) of the points {arm_points} "
            f"(validation {[round(s, 4) for s in scores]}); " + FIXED_NOTE,
        }
    return out


def main(
    workers: int = 2,
    dry_run: bool = False,
    stages: tuple[str, ...] = ("student", "arms"),
    out: Path | None = None,
    student_grid: dict | None = None,
    teacher: str | None = None,
) -> None:
    """Tune with ``workers`` single-thread processes (forked; on 2 shared cores two 1-thread students run faster
    than one 2-thread student); every trial's result is the same as in one process.

    Args:
        workers: Worker processes.
        dry_run: Toy sizes (2-step students, 100 validation images, IPC 1), written to ``DRY_RUN_FILE``.
        stages: ``"student"`` (the protocol) and/or ``"arms"`` (the generative arms; without ``"student"`` the
            protocol is read from the output file).
        out: Output file (default ``tuning.json``, or ``DRY_RUN_FILE`` for a dry run).
        student_grid: ``{"steps": [...], "lr": [...]}`` of the student stage (default ``STUDENT_GRID``).
        teacher: An exported teacher folder instead of the published ``protovar.teacher`` (a pilot of another
            teacher; the evaluation always uses the published one).
    """
    import multiprocessing

    import torch

    import zoo
    from zoo.protovar.evaluate import fast_teacher, pool_features

    ipc, val_images, default = (1, 100, DRY_RUN_FILE) if dry_run else (IPC, VAL_IMAGES, TUNING_FILE)
    out = Path(out or default)
    torch.set_num_threads(1)  # before any parallel region: the forked workers inherit it
    _MODELS["generator"] = zoo.load("protovar.fmnist", pretrained=True).eval() if "arms" in stages else None
    net = (zoo.load_folder(teacher) if teacher else zoo.load("protovar.teacher", pretrained=True)).net
    _MODELS["teacher"] = fast_teacher(net)
    started = time.perf_counter()
    pool_features(_MODELS["teacher"])  # herding's features, once, before the fork
    pool = multiprocessing.get_context("fork").Pool(workers)
    record = json.loads(out.read_text()) if out.exists() else {}
    if "student" in stages:
        grid = {"steps": [2], "lr": [0.03]} if dry_run else student_grid or STUDENT_GRID
        record["student"] = tune_student(pool, ipc, val_images, grid)
        record["student"]["seconds"] = round(time.perf_counter() - started, 1)
    if "student" not in record:
        raise ZooError(f"{out} has no student protocol: run with --stage student (or both stages) first")
    if "arms" in stages:
        record["arms"] = tune_arms(pool, record["student"]["best"], ipc, val_images)
    pool.close()
    record["seconds"] = round(time.perf_counter() - started, 1)  # this run's stages
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    print("wrote", out, record["seconds"], "s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="single-thread worker processes")
    parser.add_argument("--dry-run", action="store_true", help=f"toy sizes, written to {DRY_RUN_FILE}")
    parser.add_argument(
        "--stage",
        nargs="+",
        choices=("student", "arms"),
        default=["student", "arms"],
        help="what to tune (arms alone reads the student protocol from the output file)",
    )
    parser.add_argument("--out", type=Path, default=None, help="output file (default: zoo/protovar/tuning.json)")
    parser.add_argument("--student-steps", type=int, nargs="+", default=None, help="student step counts to try")
    parser.add_argument("--student-lr", type=float, nargs="+", default=None, help="student learning rates to try")
    parser.add_argument("--teacher", default=None, help="an exported teacher folder (a pilot; default: published)")
    arguments = parser.parse_args()
    grid = None
    if arguments.student_steps or arguments.student_lr:
        grid = {
            "steps": arguments.student_steps or STUDENT_GRID["steps"],
            "lr": arguments.student_lr or STUDENT_GRID["lr"],
        }
    main(arguments.workers, arguments.dry_run, tuple(arguments.stage), arguments.out, grid, arguments.teacher)
