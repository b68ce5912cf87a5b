"""``zoo eval boba`` in pieces that each fit the shared CPU lock, resumable through ``ZOO_BOBA_EVAL_CACHE``.

Each call measures the given arms on the given seeds; zoo/boba/evaluate.py stores every (arm, seed) result in
the cache folder, keyed by the settings and the recipe, and a later ``zoo eval boba`` with the same folder reads
them instead of running the campaign again:

    export ZOO_BOBA_EVAL_CACHE=/tmp/boba_eval
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/boba_eval_pieces.py --arms boba_ucb full_greedy --seeds 0
    ...
    .venv/bin/zoo eval boba --json boba.json --card        # every piece cached: seconds

The pieces' own times (``campaign_s`` per arm and seed, and this script's printout) add up to the evaluation's
cost on 2 cores.
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
    if not os.environ.get("ZOO_BOBA_EVAL_CACHE"):
        raise SystemExit("set ZOO_BOBA_EVAL_CACHE to the folder that keeps the pieces")
    import torch

    from zoo._eval import run_eval

    torch.set_num_threads(2)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    total = time.perf_counter()
    for seed in args.seeds:
        for arm in args.arms:
            started = time.perf_counter()
            result = run_eval("boba", seeds=[seed], arms=[arm], overrides=args.set)
            scores = result["per_seed"][arm][str(seed)]
            print(f"{arm} seed {seed}: {scores} ({time.perf_counter() - started:.1f} s)", flush=True)
    print(f"pieces: {time.perf_counter() - total:.1f} s")


if __name__ == "__main__":
    main()
