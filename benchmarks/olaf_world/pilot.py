"""Validation pilot of one LAM configuration on one context design (worlds 40-49 / 90-99; the test worlds are not
read): ``python benchmarks/olaf_world/pilot.py CONTEXT_B ALIGN_WEIGHT [STEPS] [TEACHER] [SEED] [BETA]``;
``--smoke``: 4 steps of the zoomed design with the motion teacher (a check that it runs)."""

from __future__ import annotations

import json
import sys

import torch

from zoo.olaf_world.data import LatentActionVideoDataModule
from zoo.olaf_world.tune import fit_and_probe

if __name__ == "__main__":
    torch.set_num_threads(1)
    if sys.argv[1:] == ["--smoke"]:
        sys.argv[1:] = ["zoom", "0.005", "4"]
    context_b, weight = sys.argv[1], float(sys.argv[2])
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 800
    teacher = sys.argv[4] if len(sys.argv) > 4 else "phase_correlation"
    seed = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    dm = LatentActionVideoDataModule(split="terrain", context_b=context_b, teacher=teacher)
    train, val = dm.clips("train"), dm.clips("val")
    tau = dm.tau(train) if weight else None
    beta = float(sys.argv[6]) if len(sys.argv) > 6 else (1e-5 if weight else 1e-6)
    config = {"align_weight": weight, "beta": beta, "lr": 1e-3, "seed": seed}
    evals = sorted({steps // 2, steps})
    out = fit_and_probe(config, train, val, tau, steps, evals)
    print("RESULT", json.dumps({"context_b": context_b, "teacher": teacher, **config, "evals": out}))
