"""``zoo eval fedgr`` in pieces that each fit the shared CPU lock, resumable through ``ZOO_FEDGR_CACHE``.

Each call measures the given arms on the given seeds and stores every (arm, seed) result as a JSON file in
the cache folder (see zoo/fedgr/evaluate.py); a later ``zoo eval fedgr --card`` with the same folder reads
them instead of training again. Run each piece under the lock, e.g.:

    export ZOO_FEDGR_CACHE=/tmp/fedgr_cache
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/fedgr_eval_pieces.py --arms fedgr fedavg --seeds 0
    ...
    flock /tmp/zoo-cpu.lock .venv/bin/zoo eval fedgr --json fedgr.json --card   # all cached: seconds
"""

from __future__ import annotations

import argparse
import logging
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", nargs="+", required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--set", nargs="*", default=[], help="KEY=VALUE settings, as zoo eval --set")
    args = parser.parse_args()
    if not os.environ.get("ZOO_FEDGR_CACHE"):
        raise SystemExit("set ZOO_FEDGR_CACHE to the folder that keeps the pieces")
    from zoo._eval import run_eval

    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    for seed in args.seeds:
        for arm in args.arms:
            started = time.perf_counter()
            result = run_eval("fedgr", seeds=[seed], arms=[arm], overrides=args.set)
            scores = result["per_seed"][arm][str(seed)]
            print(f"{arm} seed {seed}: {scores} ({time.perf_counter() - started:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
