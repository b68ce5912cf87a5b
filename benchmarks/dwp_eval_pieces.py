"""``zoo eval dwp`` in pieces that each fit the shared CPU lock, resumable through ``ZOO_DWP_EVAL_CACHE``.

Each call measures the given arms on the given seeds; zoo/dwp/evaluate.py stores every (arm, seed) result in the
cache folder, keyed by the settings, recipes, overrides and pins, and a later ``zoo eval dwp`` with the same
folder reads them instead of training again. ``--time-limit`` stops before starting a piece once that many
seconds have passed, so a locked call stays short:

    export ZOO_DWP_EVAL_CACHE=/tmp/dwp_eval
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/dwp_eval_pieces.py --seeds 0 --time-limit 480
    ...
    .venv/bin/zoo eval dwp --json dwp.json --card        # every piece cached: seconds

The times printed per piece add up to the evaluation's cost on 2 cores.
"""

from __future__ import annotations

import argparse
import logging
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", nargs="+", default=None, help="default: every arm of the protocol")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--set", nargs="*", default=[], help="KEY=VALUE settings, as zoo eval --set")
    parser.add_argument("--time-limit", type=float, default=1e9, help="start no piece after this many seconds")
    args = parser.parse_args()
    if not os.environ.get("ZOO_DWP_EVAL_CACHE"):
        raise SystemExit("set ZOO_DWP_EVAL_CACHE to the folder that keeps the pieces")
    import torch

    from zoo._eval import run_eval
    from zoo.dwp.evaluate import PROTOCOL

    torch.set_num_threads(2)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    total = time.perf_counter()
    for seed in args.seeds:
        for arm in args.arms or PROTOCOL.arms:
            if time.perf_counter() - total > args.time_limit:
                print(f"time limit: stopped before {arm} seed {seed}; run again to resume", flush=True)
                return
            started = time.perf_counter()
            result = run_eval("dwp", seeds=[seed], arms=[arm], overrides=args.set)
            scores = result["per_seed"][arm][str(seed)]
            short = {k: round(v, 3) for k, v in scores.items() if k.startswith("acc_") or k == "drift_range"}
            print(f"{arm} seed {seed} ({time.perf_counter() - started:.1f} s): {short}", flush=True)
    print(f"pieces: {time.perf_counter() - total:.1f} s")


if __name__ == "__main__":
    main()
