"""Validation tuning of ProtoVAR's evaluation (``python -m zoo.protovar.tune``) -> ``zoo/protovar/tuning.json``.

1. The student protocol, once for every arm: Adam learning rate on the ``random_real`` IPC-10 set.
2. Each generative arm (``var_unguided``, ``var_unguided_select``, ``protovar_noselect``, ``protovar``) gets the
   same number of trials (2): its grid below, at IPC 10, scored by the student's accuracy on the first
   ``VAL_IMAGES`` validation images. The chosen values are used at both IPCs.

Tuning uses seed ``TUNE_SEED`` (sampling and student), which no evaluation seed uses, and never the test split.
"""

from __future__ import annotations

import itertools
import json
import time

from zoo.protovar.evaluate import TUNING_FILE, distilled_set, student_accuracy, student_protocol

TUNE_SEED = 100
VAL_IMAGES = 2000
IPC = 10
STUDENT_GRID = {"lr": [0.01, 0.03]}  # at 100 steps 0.01 beat 0.003 (0.614 vs 0.463); steps now 200
GRIDS = {  # two trials per generative arm: all that the shared 2-core budget allowed this session
    "var_unguided": {"cfg": [1.5, 3.0]},
    "var_unguided_select": {"floor": [0.5, 0.8]},
    "protovar_noselect": {"beta_scale": [1.0, 2.0]},
    "protovar": {"beta_scale": [1.0, 2.0]},
}
FIXED_NOTE = (
    "IPC-10 validation accuracy of one student (seed 100) on 2,000 validation images; untuned and fixed at the "
    "spec's values: top-k 32, temperature 1, CFG 1.5, beta (5, 3, 1.5) x beta_scale, pool ratio r = 5, confidence "
    "floor 0.8, logit-bias injection (gamma = 0), except the key in this arm's grid"
)


def _points(grid: dict) -> list[dict]:
    keys = list(grid)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(grid[k] for k in keys))]


def main() -> None:
    import torch

    import zoo

    torch.set_num_threads(2)
    generator = zoo.load("protovar.fmnist", pretrained=True).eval()
    teacher = zoo.load("protovar.teacher", pretrained=True).net.eval()
    record = {"student": {}, "arms": {}}
    started = time.perf_counter()
    images, labels = distilled_set("random_real", generator, teacher, IPC, TUNE_SEED)
    scores = []
    for point in _points(STUDENT_GRID):
        protocol = student_protocol({"student": {"best": point}})
        scores.append(student_accuracy(images, labels, teacher, TUNE_SEED, "val", VAL_IMAGES, protocol))
        print("student", point, round(scores[-1], 4), flush=True)
    best = _points(STUDENT_GRID)[max(range(len(scores)), key=scores.__getitem__)]
    record["student"] = {
        "best": best,
        "grid": STUDENT_GRID,
        "trials": len(scores),
        "scores": scores,
        "note": "Adam lr chosen on the random_real IPC-10 set (validation accuracy, seed 100) at 200 steps; a first "
        "tuning at 100 steps (lr 0.01 > 0.003) left the full_data student below random_real IPC 10 on test seed 0 "
        "(0.671 vs 0.680): too few steps for an upper bound, so the steps were doubled and every arm re-tuned",
    }
    for arm, grid in GRIDS.items():
        scores = []
        for point in _points(grid):
            trial = {"student": record["student"], "arms": {arm: {"best": point}}}
            images, labels = distilled_set(arm, generator, teacher, IPC, TUNE_SEED, trial)
            scores.append(
                student_accuracy(images, labels, teacher, TUNE_SEED, "val", VAL_IMAGES, student_protocol(trial))
            )
            print(arm, point, round(scores[-1], 4), flush=True)
        winner = _points(grid)[max(range(len(scores)), key=scores.__getitem__)]
        record["arms"][arm] = {
            "best": winner,
            "grid": grid,
            "trials": len(scores),
            "scores": scores,
            "note": f"chosen {winner} ({max(scores):.4f}); " + FIXED_NOTE,
        }
    record["seconds"] = round(time.perf_counter() - started, 1)
    TUNING_FILE.write_text(json.dumps(record, indent=2) + "\n")
    print("wrote", TUNING_FILE, record["seconds"], "s")


if __name__ == "__main__":
    main()
