"""Choose FedGR's loss weights and the baselines' learning rate on the clients' OWN validation data.

Every client holds out ``--fraction`` of its samples with their noisy labels (``client_val_fraction`` of the
datamodule); each trial trains on the rest from the arm's recipe (seed 0) for ``--rounds`` rounds and is scored by
the final global model's accuracy on the pooled held-out noisy labels. Under symmetric noise that accuracy is an
increasing function of the clean accuracy, ``(1 - ε)·acc + ε·(1 - acc)/9``, so it ranks trials as the test set
would without touching it. The per-round validation curve also shows whether an arm memorises the noisy labels
(it peaks, then falls): that curve chose the 80-round setting. ``--test-curve`` records the test
accuracy per round too, for monitoring only; it never enters the choice. Every arm gets the same number of trials.
A trial's key holds its grid values and its rounds. Run under the shared CPU lock, one thread per fit (two
workers on different arms may share one file: each merges its own result into it), e.g.:

    python -m zoo.fedgr.tune --arms fedgr --rounds 80

The results (every trial, with its curves) are in ``zoo/fedgr/tuning.json``; the evaluation's tuning records
(``zoo.fedgr.evaluate.TUNING``) state the grids and what won. ``zoo reproduce fedgr`` runs this as its first step.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import time
from pathlib import Path

TUNING_FILE = Path(__file__).with_name("tuning.json")

# Two trials per arm. The baselines' grids hold the learning rate chosen at 40 rounds and half of it: more rounds
# can only favour a smaller step (at 40 rounds lr 0.05 lost to 0.02 for FedAvg and FedProx).
GRIDS = {
    "fedgr": {"fedgr.distill_weight": [1.0, 0.3], "fedgr.reg_weight": [0.1]},
    "fedavg": {"local.lr": [0.02, 0.01]},
    "fedprox": {"local.lr": [0.02, 0.01]},
    "coteaching": {"local.lr": [0.05, 0.02]},
}


def trial_key(trial: dict, rounds: int) -> str:
    """The results-file key of one trial: its grid values and its number of rounds."""
    return json.dumps({**trial, "rounds": rounds}, sort_keys=True)


def merge(path: Path, arm: str, key: str, row: dict) -> dict:
    """Re-read ``path``, add one trial and write it back (another worker may have written meanwhile)."""
    results = json.loads(path.read_text()) if path.is_file() else {}
    results.setdefault(arm, {})[key] = row
    path.write_text(json.dumps(results, indent=1) + "\n")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", nargs="+", default=list(GRIDS), choices=list(GRIDS))
    parser.add_argument("--rounds", type=int, default=80)
    parser.add_argument("--fraction", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--test-curve", action="store_true", help="also record the test accuracy per round")
    parser.add_argument("--json", default=str(TUNING_FILE), help="results are merged into this file")
    args = parser.parse_args()

    import torch

    import zoo
    from zoo.eval.run import fit_recipe
    from zoo.fedgr.evaluate import PROTOCOL

    torch.set_num_threads(1)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    path = Path(args.json)
    for arm in args.arms:
        recipe = zoo.get_entry("fedgr" if arm == "fedgr" else f"fedgr.{arm}").pretrained_cfg.recipe
        grid = GRIDS[arm]
        keys = []
        for values in itertools.product(*grid.values()):
            trial = dict(zip(grid, values))
            key = trial_key(trial, args.rounds)
            keys.append(key)
            done = json.loads(path.read_text()) if path.is_file() else {}
            if key in done.get(arm, {}):
                continue
            started = time.perf_counter()
            overrides = [
                f"--data.init_args.client_val_fraction={args.fraction}",
                f"--trainer.max_epochs={args.rounds}",
                f"--model.init_args.curve_test_limit={10000 if args.test_curve else 0}",
            ]
            overrides += [f"--model.init_args.{name}={value}" for name, value in trial.items()]
            module = fit_recipe(recipe, args.seed, overrides, PROTOCOL.seed_args)
            val = list(module.client_val_curve)
            best = max(range(len(val)), key=val.__getitem__)
            row = {
                "client_val_accuracy": val[-1],
                "client_val_curve": val,
                "val_best_round": best + 1,
                "val_drop_best_to_final": round(val[best] - val[-1], 4),
                "seconds": round(time.perf_counter() - started, 1),
            }
            if args.test_curve:
                row["test_curve"] = [float(v) for v in module.test_curve]
            merge(path, arm, key, row)
            print(f"{arm} {trial} @ {args.rounds}: client-validation accuracy {val[-1]:.4f}", flush=True)
        results = json.loads(path.read_text())[arm]
        best_key = max(keys, key=lambda k: results[k]["client_val_accuracy"])
        print(f"{arm} @ {args.rounds}: chosen {best_key}", flush=True)


if __name__ == "__main__":
    main()
