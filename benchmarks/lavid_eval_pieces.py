"""Run ``zoo eval lavid``'s units in locked pieces of bounded length; every unit is cached, so pieces resume.

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/lavid_eval_pieces.py --budget 540
    ...  (repeat until it prints "all units cached")
    flock /tmp/zoo-cpu.lock .venv/bin/zoo eval lavid --json out.json --card   # reads the cache: seconds

Spurious units run first (seed order), then the few-shot ones in seed order (seed 0 of every arm first).
"""

from __future__ import annotations

import argparse
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=float, default=540.0, help="stop starting units after this many seconds")
    parser.add_argument("--set", nargs="*", default=[], help="settings overrides KEY=VALUE, as zoo eval --set")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="as zoo eval --seeds")
    args = parser.parse_args()
    run(args.budget, args.set, args.seeds)


def run(budget: float, overrides=(), seeds=None) -> bool:
    """Run uncached units until ``budget`` seconds are spent; True when every unit is cached."""
    from zoo.lavid.evaluate import ARMS_ORDER, PROTOCOL, cache_folder, few_shot_unit, spurious_unit, unit_key

    torch.set_num_threads(2)
    settings = PROTOCOL.resolve(PROTOCOL.parse_overrides(list(overrides)))
    caches = {kind: cache_folder(settings, kind) for kind in ("fewshot", "spurious")}
    started = time.perf_counter()
    seeds = list(PROTOCOL.seeds if seeds is None else seeds)
    first = PROTOCOL.seeds[: settings["spurious_seeds"]]
    spurious_seeds = [s for s in seeds if s in first or s < settings["spurious_seeds"]]
    units = [("spurious", arm, None, seed) for seed in spurious_seeds for arm in ARMS_ORDER]
    units += [("fewshot", arm, shots, seed) for seed in seeds for arm in ARMS_ORDER for shots in settings["shots"]]
    todo = [u for u in units if not (caches[u[0]] / f"{unit_key(*u, settings)}.json").is_file()]
    print(f"{len(units) - len(todo)} of {len(units)} units cached in {caches}", flush=True)
    for kind, arm, shots, seed in todo:
        if time.perf_counter() - started > budget:
            print("budget spent; run again to continue")
            return False
        unit = few_shot_unit(arm, shots, seed, settings) if kind == "fewshot" else spurious_unit(arm, seed, settings)
        shown = {k: v for k, v in unit.items() if k != "group_accs"}
        print(kind, arm, shots, seed, shown, flush=True)
    print("all units cached")
    return True


if __name__ == "__main__":
    main()
