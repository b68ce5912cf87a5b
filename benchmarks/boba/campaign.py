"""BOBA's cost against full-library greedy BO on the large (cap-18) amide library, as ratios in the same run.

Runs one campaign of ``boba_ucb`` (the recipe: UCB1 over acid arms) and one of ``full_greedy`` (the surrogate
scores every unlabelled molecule each round, MolPAL-style, with its tuned beta and epochs) on the 109,140-molecule
cap-18 library with the same seed and oracle budget, and prints each campaign's wall time, surrogate-inference
time and count, and the ratios boba_ucb / full_greedy (target: inference-time ratio <= 0.3). The first run
enumerates and caches the cap-18 library (about 1 min). The last measurement is in zoo/boba/card.md (## Why).

Run: ``flock /tmp/zoo-cpu.lock python benchmarks/boba/campaign.py [--cap 18 --seed 0]``
(``--smoke``: the cap-7 library, one round of one epoch: checks that it runs, in seconds).
"""

from __future__ import annotations

import argparse
import json
import logging
import time

SMOKE = ("--model.init_args.epochs_per_round=1", "--model.init_args.rounds=1")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=int, default=18)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the numbers here")
    parser.add_argument("--smoke", action="store_true", help="cap-7 library, one round of one epoch")
    args = parser.parse_args(argv)
    import torch

    from zoo.boba.evaluate import FULL_GREEDY, SEED_ARGS
    from zoo.boba.library import LibrarySpec, load_library
    from zoo.eval.run import fit_recipe

    cap = 7 if args.smoke else args.cap
    torch.set_num_threads(2)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    started = time.perf_counter()
    library = load_library(LibrarySpec(cap=cap))
    print(f"library cap {cap}: {len(library)} molecules ({time.perf_counter() - started:.1f} s incl. enumeration)")
    rows = {}
    for arm, arm_overrides in (("boba_ucb", ()), ("full_greedy", FULL_GREEDY)):
        started = time.perf_counter()
        overrides = [f"--data.init_args.cap={cap}", "--model.init_args.num_arms=1", *arm_overrides]
        overrides += SMOKE if args.smoke else ()
        record = fit_recipe("recipes/boba/amide_cap14.yaml", args.seed, overrides, SEED_ARGS).campaign_record
        rows[arm] = {
            "wall_s": round(time.perf_counter() - started, 2),
            "campaign_s": record["campaign_seconds"],
            "inference_s": record["inference_seconds"],
            "surrogate_inferences": record["surrogate_inferences"],
            "oracle_calls": record["oracle_calls"],
            "recall_top1pct": record["recall_top1pct"],
        }
        print(arm, rows[arm], flush=True)
    ratios = {
        key: round(rows["boba_ucb"][key] / max(rows["full_greedy"][key], 1e-9), 4)
        for key in ("wall_s", "campaign_s", "inference_s", "surrogate_inferences")
    }
    print("ratios boba_ucb / full_greedy:", ratios, "(target inference_s <= 0.3)")
    out = {"cap": cap, "size": len(library), "seed": args.seed, "arms": rows, "ratios": ratios}
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(out, handle, indent=1)
    return out


if __name__ == "__main__":
    main()
