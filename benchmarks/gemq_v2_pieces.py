"""GEMQ issue-32 evaluation in pieces that each fit a short locked CPU slot (the v2 protocol, one architecture).

Each piece measures the arms of one (architecture, seed, budget) in one process, so they share the seed's fp
model, importance statistics and the ``gemq@B`` model that ``gemq_router_ft@B`` starts from; every (arm, seed)
result goes to ``$ZOO_GEMQ_V2_CACHE`` (see :mod:`zoo.gemq.evaluate_v2`), and ``zoo eval <base> --card`` later
reads them all::

    export ZOO_GEMQ_V2_CACHE=/tmp/gemq_v2_cache
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/gemq_v2_pieces.py --arch mixtral --seeds 0 --budgets 2.5
    ...
    flock /tmp/zoo-cpu.lock .venv/bin/zoo eval gemq.wiki2_mixtral_fp --json gemq_v2_mixtral.json --card

``--time-limit`` starts no arm once that many seconds have passed (the piece is resumable: run it again).
The v2 bases must be pinned first; a base still in ``zoo.gemq._V2_PENDING`` is registered for the run.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=("mixtral", "qwen2_moe"), required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--budgets", type=float, nargs="+", default=[2.5, 2.0, 1.5])
    parser.add_argument("--fp16", action="store_true", help="also the fp16 arm (default: with the first budget 2.5)")
    parser.add_argument("--set", nargs="*", default=[], help="KEY=VALUE settings, as zoo eval --set")
    parser.add_argument("--time-limit", type=float, default=1e9, help="start no arm after this many seconds")
    args = parser.parse_args()

    import zoo
    from zoo.gemq import _V2_PENDING, register_v2
    from zoo.gemq.evaluate_v2 import CACHE_ENV, FP_NAMES, KINDS, arm_name, build

    tag = FP_NAMES[args.arch].split(".", 1)[1]
    if tag in _V2_PENDING and FP_NAMES[args.arch] not in zoo.list_models("gemq"):
        register_v2(tag, _V2_PENDING[tag])  # pinned, not yet published: its pieces run before its card exists

    if not os.environ.get(CACHE_ENV):
        raise SystemExit(f"set {CACHE_ENV} to the folder that keeps the pieces")
    from zoo._eval import Run, paper_arms

    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    evaluation = build(args.arch)
    protocol = evaluation.PROTOCOL
    settings = protocol.resolve(protocol.parse_overrides(args.set))
    total = time.perf_counter()
    for seed in args.seeds:
        run = Run(paper_arms(FP_NAMES[args.arch]), protocol, seed, settings)
        arms = ["fp16"] if args.fp16 or 2.5 in args.budgets else []
        arms += [arm_name(kind, budget) for budget in args.budgets for kind in KINDS]
        for arm in arms:
            if time.perf_counter() - total > args.time_limit:
                print(f"time limit: stopped before {arm} seed {seed}; run again to resume", flush=True)
                return
            started = time.perf_counter()
            scores = evaluation.measure(arm, run)
            shown = {k: round(v, 4) for k, v in scores.items()}
            print(
                f"{args.arch} {arm} seed {seed} ({time.perf_counter() - started:.1f} s): {json.dumps(shown)}",
                flush=True,
            )
    print(f"pieces: {time.perf_counter() - total:.1f} s")


if __name__ == "__main__":
    main()
