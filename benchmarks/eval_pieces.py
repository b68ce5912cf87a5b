"""``zoo eval NAME`` in pieces that each fit a short CPU slot, resumable through the paper's result cache.

Papers whose ``zoo/<paper>/evaluate.py`` defines ``CACHE_ENV`` (dwp, boba, specexit) store every (arm, seed)
result in the folder that environment variable names, keyed by everything that decides it; a later ``zoo eval``
with the same folder reads them instead of training again. Each call here measures the given arms on the given
seeds; ``--time-limit`` starts no piece once that many seconds have passed, so a locked call stays short:

    export ZOO_DWP_EVAL_CACHE=/tmp/dwp_eval
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/eval_pieces.py dwp --seeds 0 --time-limit 480
    ...
    .venv/bin/zoo eval dwp --json dwp.json --card        # every piece cached: seconds

The times printed per piece add up to the evaluation's cost on 2 cores.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paper", help="the paper's package name, e.g. dwp, boba, specexit")
    parser.add_argument("--arms", nargs="+", default=None, help="default: every arm of the protocol")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--set", nargs="*", default=[], help="KEY=VALUE settings, as zoo eval --set")
    parser.add_argument("--time-limit", type=float, default=1e9, help="start no piece after this many seconds")
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads (1 for one piece per core)")
    args = parser.parse_args()
    evaluate = importlib.import_module(f"zoo.{args.paper}.evaluate")
    cache_env = getattr(evaluate, "CACHE_ENV", None)
    if cache_env is None:
        raise SystemExit(f"zoo/{args.paper}/evaluate.py keeps no result cache (no CACHE_ENV); run zoo eval instead")
    if not os.environ.get(cache_env):
        raise SystemExit(f"set {cache_env} to the folder that keeps the pieces")
    import torch

    from zoo._eval import run_eval

    torch.set_num_threads(args.threads)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    total = time.perf_counter()
    for seed in args.seeds:
        for arm in args.arms or evaluate.PROTOCOL.arms:
            if time.perf_counter() - total > args.time_limit:
                print(f"time limit: stopped before {arm} seed {seed}; run again to resume", flush=True)
                return
            started = time.perf_counter()
            result = run_eval(args.paper, seeds=[seed], arms=[arm], overrides=args.set)
            scores = {k: round(v, 4) for k, v in result["per_seed"][arm][str(seed)].items()}
            print(f"{arm} seed {seed} ({time.perf_counter() - started:.1f} s): {scores}", flush=True)
    print(f"pieces: {time.perf_counter() - total:.1f} s")


if __name__ == "__main__":
    main()
