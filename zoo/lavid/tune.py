"""Validation-only tuning of every arm with the same number of trials: ``python -m zoo.lavid.tune``.

Each trial trains a 10-shot student on two draws (seeds 100 and 101, never the evaluation's 0-7) and scores the
mean accuracy on the 1,000 held-out validation images; the test split is not read. The chosen settings and
every trial's score go to ``zoo/lavid/tuning.json``, which ``zoo eval lavid`` and the recipes use.

* ce: lr x epochs x weight decay (2 x 2 x 2 = 8 trials);
* kd: T x alpha (4 x 2 = 8), with ce's optimizer settings;
* makd, text_emb: the loss weight (8 values each), with ce's optimizer settings;
* lavid: 8 configurations of (beta, lr, epochs, weight decay) drawn without replacement (seed 0) from the
  3 x 2 x 2 x 2 grid, the paper's beta = 40 among the betas. The signature temperature is not tuned (entropy rule).
"""

from __future__ import annotations

import itertools
import json
import time

import numpy as np

TUNING_SEEDS = (100, 101)
CE_GRID = {"lr": [0.01, 0.03], "epochs": [40, 80], "weight_decay": [5e-4, 5e-3]}
KD_GRID = {"kd_temperature": [1.0, 2.0, 4.0, 8.0], "kd_alpha": [0.5, 0.9]}
MAKD_GRID = {"beta": [0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0]}
TEXT_GRID = {"beta": [1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0]}
LAVID_GRID = {"beta": [10.0, 40.0, 150.0], "lr": [0.01, 0.03], "epochs": [40, 80], "weight_decay": [5e-4, 5e-3]}
TRIALS = 8


def _product(grid: dict) -> list[dict]:
    return [dict(zip(grid, values)) for values in itertools.product(*grid.values())]


def lavid_trials() -> list[dict]:
    combos = _product(LAVID_GRID)
    picks = np.random.default_rng(0).choice(len(combos), TRIALS, replace=False)
    return [combos[i] for i in sorted(picks)]


def score(arm: str, config: dict, settings: dict) -> float:
    """Mean validation accuracy over the tuning draws."""
    from zoo.lavid.data import fmnist_eval, fmnist_few_shot
    from zoo.lavid.runs import train_arm
    from zoo.lavid.student import accuracy

    xv, yv = fmnist_eval("val")
    scores = []
    for seed in TUNING_SEEDS:
        x, y = fmnist_few_shot(10, seed)
        scores.append(accuracy(train_arm(arm, x, y, "fmnist", seed, settings, settings["_cache"], **config), xv, yv))
    return float(np.mean(scores))


def main(only: tuple[str, ...] = ()) -> None:
    """Tune every arm (or only the arms in ``only``, keeping the others' records)."""
    from pathlib import Path

    import torch

    from zoo.lavid.evaluate import PROTOCOL
    from zoo.lavid.runs import TUNING_FILE

    torch.set_num_threads(2)
    settings = PROTOCOL.resolve()
    settings["_cache"] = Path(settings["cache_dir"]) / "tuning"
    record = {"chosen": {}, "arms": {}, "seeds": list(TUNING_SEEDS), "split": "1,000 held-out training images"}
    if only and TUNING_FILE.is_file():
        record = json.loads(TUNING_FILE.read_text())
    started = time.perf_counter()
    plan = [
        ("ce", CE_GRID, _product(CE_GRID), {}),
        ("kd", KD_GRID, _product(KD_GRID), "ce"),
        ("makd", MAKD_GRID, _product(MAKD_GRID), "ce"),
        ("text_emb", TEXT_GRID, _product(TEXT_GRID), "ce"),
        ("lavid", LAVID_GRID, lavid_trials(), {}),
    ]
    for arm, grid, trials, base in plan:
        if only and arm not in only:
            continue
        base_config = record["chosen"][base] if base else {}
        results = []
        for config in trials:
            full = {**base_config, **config}
            results.append((score(arm, full, settings), full))
            print(arm, full, f"val {results[-1][0]:.4f}", flush=True)
        best, chosen = max(results, key=lambda r: r[0])
        record["chosen"][arm] = chosen
        note = f"best validation accuracy {best:.4f} (mean of draws {TUNING_SEEDS})"
        if base:
            note += f"; lr, epochs and weight decay are {base}'s choice"
        record["arms"][arm] = {
            "grid": grid,
            "trials": len(trials),
            "note": note,
            "results": [{"config": c, "val_acc": round(s, 4)} for s, c in results],
        }
        TUNING_FILE.write_text(json.dumps(record, indent=1) + "\n")
    record[f"seconds_{'_'.join(only) or 'all'}"] = round(time.perf_counter() - started, 1)
    TUNING_FILE.write_text(json.dumps(record, indent=1) + "\n")
    print("tuning took", record["seconds"], "s")


if __name__ == "__main__":
    import sys

    main(tuple(sys.argv[1:]))
