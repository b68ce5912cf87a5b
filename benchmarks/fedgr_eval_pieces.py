"""``zoo eval fedgr`` in pieces that each fit the shared CPU lock, resumable through ``ZOO_FEDGR_CACHE``.

Each call measures the given arms on the given seeds and stores every (arm, seed) result as a JSON file in
the cache folder (see zoo/fedgr/evaluate.py); a later ``zoo eval fedgr --card`` with the same folder reads
them instead of training again. Run each piece under the lock, e.g.:

    export ZOO_FEDGR_CACHE=/tmp/fedgr_cache
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/fedgr_eval_pieces.py --arms fedgr fedavg --seeds 0
    ...
    flock /tmp/zoo-cpu.lock .venv/bin/zoo eval fedgr --json fedgr.json --card   # all cached: seconds

``--merge OUT.json [--card]`` instead assembles one result from the cache only (nothing is trained): the arms
with all of ``--seeds`` stored, plus arms stored for fewer seeds (e.g. ablations run on seed 0 only), which are
then summarised over the seeds they have (their ``n_seeds`` says how many). Claims are recomputed on the merge.
"""

from __future__ import annotations

import argparse
import logging
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", nargs="+", default=None)
    parser.add_argument("--merge", metavar="OUT", default=None, help="assemble the cached pieces into OUT (json)")
    parser.add_argument("--card", action="store_true", help="with --merge: write metrics.json and the cards")
    parser.add_argument(
        "--partial",
        action="store_true",
        help="with --merge: leave out arms with no stored piece (settings.missing_arms lists them, also on a card)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--set", nargs="*", default=[], help="KEY=VALUE settings, as zoo eval --set")
    args = parser.parse_args()
    if not os.environ.get("ZOO_FEDGR_CACHE"):
        raise SystemExit("set ZOO_FEDGR_CACHE to the folder that keeps the pieces")
    from zoo._eval import run_eval

    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    if args.merge:
        merge(args.seeds, args.merge, args.card, args.partial)
        return
    if not args.arms:
        raise SystemExit("give --arms (or --merge)")
    for seed in args.seeds:
        for arm in args.arms:
            started = time.perf_counter()
            result = run_eval("fedgr", seeds=[seed], arms=[arm], overrides=args.set)
            scores = result["per_seed"][arm][str(seed)]
            print(f"{arm} seed {seed}: {scores} ({time.perf_counter() - started:.0f} s)", flush=True)


def merge(seeds: list[int], out: str, card: bool, partial: bool = False) -> None:
    """One eval result from the cached (arm, seed) pieces; raises if an arm is not stored for any seed."""
    import json
    from dataclasses import asdict
    from pathlib import Path

    from zoo._eval import Run, paper_arms, run_eval, summarise, validate_result, write_cards
    from zoo.fedgr import evaluate

    protocol, entries = evaluate.PROTOCOL, paper_arms("fedgr")
    stored = {}
    for arm in protocol.arms:
        have = [s for s in seeds if _cached(evaluate, Run(entries, protocol, s, protocol.resolve()), arm)]
        if have:
            stored[arm] = have
    missing = [arm for arm in protocol.arms if arm not in stored]
    if missing and not partial:
        raise SystemExit(f"not stored for any seed: {', '.join(missing)} (--partial leaves them out)")
    complete = [a for a in protocol.arms if stored.get(a) == seeds]
    result = run_eval("fedgr", seeds=seeds, arms=complete or [protocol.references[-1]])
    for arm, have in stored.items():
        if have != seeds:
            partial = run_eval("fedgr", seeds=have, arms=[arm])
            result["per_seed"][arm] = partial["per_seed"][arm]
            for seed, extra in partial["extras"].items():
                result["extras"].setdefault(seed, {}).setdefault("test_curve", {}).update(extra.get("test_curve", {}))
    result["per_seed"] = {arm: result["per_seed"][arm] for arm in protocol.arms if arm in stored}
    result["arms"] = {arm: summarise(runs) for arm, runs in result["per_seed"].items()}
    if missing:
        result["settings"]["missing_arms"] = missing
    result["claims"] = [asdict(claim) for claim in evaluate.claims(result)]
    timings = {}  # the fits' own times, stored with the pieces (each measured under the CPU lock)
    for arm, have in stored.items():
        for seed in have:
            piece = json.loads(evaluate._cache_file(arm, Run(entries, protocol, seed, protocol.resolve())).read_text())
            timings[f"{arm}_s"] = round(timings.get(f"{arm}_s", 0.0) + piece.get("seconds", 0.0), 1)
    result["timings"] = {**timings, "total_s": round(sum(timings.values()), 1)}
    result["settings"]["source"] += "; assembled from cached pieces (benchmarks/fedgr_eval_pieces.py --merge)"
    validate_result(result, require_seeds=card, complete=not missing)
    Path(out).write_text(json.dumps(result, indent=2, allow_nan=False) + "\n")
    print(f"wrote {out}: " + ", ".join(f"{arm} x{len(have)}" for arm, have in stored.items()), flush=True)
    if card:
        for folder in write_cards(result):
            print(f"updated {folder}", flush=True)


def _cached(evaluate, run, arm: str) -> bool:
    path = evaluate._cache_file(arm, run)
    return path is not None and path.is_file()


if __name__ == "__main__":
    main()
