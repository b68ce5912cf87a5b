"""Choose FedGR's loss weights and the baselines' learning rate on the clients' OWN validation data.

Every client holds out ``--fraction`` of its samples with their noisy labels (``client_val_fraction`` of the
datamodule); each trial trains on the rest from the arm's recipe (seed 0) and is scored by the final global
model's accuracy on the pooled held-out noisy labels. Under symmetric noise that accuracy is an increasing
function of the clean accuracy, ``(1 - ε)·acc + ε·(1 - acc)/9``, so it ranks trials as the test set would
without touching it. Every arm gets the same number of trials. Run under the shared CPU lock (minutes per
trial), e.g.:

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/fedgr_tuning.py --arms fedgr --json benchmarks/fedgr_tuning.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import time
from pathlib import Path

GRIDS = {
    "fedgr": {"fedgr.distill_weight": [1.0, 0.3], "fedgr.reg_weight": [0.1]},
    "fedavg": {"local.lr": [0.05, 0.02]},
    "fedprox": {"local.lr": [0.05, 0.02]},
    "coteaching": {"local.lr": [0.05, 0.02]},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", nargs="+", default=list(GRIDS))
    parser.add_argument("--fraction", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default="benchmarks/fedgr_tuning.json", help="results are merged into this file")
    args = parser.parse_args()

    import zoo
    from zoo._eval import fit_recipe
    from zoo.fedgr.evaluate import PROTOCOL

    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    path = Path(args.json)
    results = json.loads(path.read_text()) if path.is_file() else {}
    for arm in args.arms:
        recipe = zoo.get_entry("fedgr" if arm == "fedgr" else f"fedgr.{arm}").pretrained_cfg.recipe
        grid = GRIDS[arm]
        for values in itertools.product(*grid.values()):
            trial = dict(zip(grid, values))
            key = json.dumps(trial, sort_keys=True)
            if key in results.get(arm, {}):
                continue
            started = time.perf_counter()
            overrides = [f"--data.init_args.client_val_fraction={args.fraction}"]
            overrides += [f"--model.init_args.{name}={value}" for name, value in trial.items()]
            module = fit_recipe(recipe, args.seed, overrides, PROTOCOL.seed_args)
            score = {
                "client_val_accuracy": module.client_val_curve[-1],
                "client_val_curve": module.client_val_curve,
                "seconds": round(time.perf_counter() - started, 1),
            }
            results.setdefault(arm, {})[key] = score
            path.write_text(json.dumps(results, indent=1) + "\n")
            print(f"{arm} {trial}: client-validation accuracy {score['client_val_accuracy']:.4f}", flush=True)
        best = max(results[arm], key=lambda k: results[arm][k]["client_val_accuracy"])
        print(f"{arm}: chosen {best}", flush=True)


if __name__ == "__main__":
    main()
