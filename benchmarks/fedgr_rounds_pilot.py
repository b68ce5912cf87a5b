"""Does an arm memorise the noisy labels with more rounds? (issue 31: the setting must make FedAvg memorise.)

Fits one arm's recipe on seed 0 for ``--rounds`` rounds with 10% of every client's samples held out with their
noisy labels (as benchmarks/fedgr_tuning.py), and records the per-round accuracy on that validation split (the
curve that decides the setting) and on the test set (monitoring only). Results are merged into ``--json``.
Run under the shared CPU lock, one thread per fit, e.g.:

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/fedgr_rounds_pilot.py --arm fedavg --rounds 80
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", default="fedavg", choices=["fedgr", "fedavg", "fedprox", "coteaching"])
    parser.add_argument("--rounds", type=int, default=80)
    parser.add_argument("--json", default="benchmarks/fedgr_rounds_pilot.json")
    args = parser.parse_args()

    import torch

    import zoo
    from zoo._eval import fit_recipe
    from zoo.fedgr.evaluate import PROTOCOL

    torch.set_num_threads(1)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    recipe = zoo.get_entry("fedgr" if args.arm == "fedgr" else f"fedgr.{args.arm}").pretrained_cfg.recipe
    overrides = [
        "--data.init_args.client_val_fraction=0.1",
        f"--trainer.max_epochs={args.rounds}",
        "--model.init_args.curve_test_limit=10000",
    ]
    started = time.perf_counter()
    module = fit_recipe(recipe, 0, overrides, PROTOCOL.seed_args)
    val, test = list(module.client_val_curve), [float(v) for v in module.test_curve]
    best = max(range(len(val)), key=val.__getitem__)
    row = {
        "client_val_curve": val,
        "test_curve": test,
        "val_best_round": best + 1,
        "val_drop_best_to_final": round(val[best] - val[-1], 4),
        "seconds": round(time.perf_counter() - started, 1),
    }
    path = Path(args.json)
    results = json.loads(path.read_text()) if path.is_file() else {}
    results[f"{args.arm}@{args.rounds}"] = row
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(
        f"{args.arm} {args.rounds} rounds: validation best round {best + 1}, "
        f"drop to final {row['val_drop_best_to_final']}"
    )


if __name__ == "__main__":
    main()
