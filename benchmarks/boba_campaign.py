"""BOBA's cost against full-library greedy BO on the large (cap-18) amide library, as ratios in the same run.

Runs one campaign of ``boba_ucb`` (the recipe: UCB1 over acid arms) and one of ``full_greedy`` (the surrogate
scores every unlabelled molecule each round, MolPAL-style, with its tuned beta and epochs) on the 109,140-molecule
cap-18 library with the same seed and oracle budget, and prints each campaign's wall time, surrogate-inference
time and count, and the ratios boba_ucb / full_greedy (target: inference-time ratio <= 0.3). The first run
enumerates and caches the cap-18 library (about 1 min).

Run: ``flock /tmp/zoo-cpu.lock python benchmarks/boba_campaign.py [--cap 18 --seed 0]``
"""

from __future__ import annotations

import argparse
import json
import logging
import time


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=int, default=18)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    import torch

    from zoo._eval import fit_recipe
    from zoo.boba.evaluate import ARMS, SEED_ARGS
    from zoo.boba.library import LibrarySpec, load_library

    torch.set_num_threads(2)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    started = time.perf_counter()
    library = load_library(LibrarySpec(cap=args.cap))
    print(f"library cap {args.cap}: {len(library)} molecules ({time.perf_counter() - started:.1f} s incl. enumeration)")
    rows = {}
    for arm in ("boba_ucb", "full_greedy"):
        started = time.perf_counter()
        overrides = [f"--data.init_args.cap={args.cap}", "--model.init_args.num_arms=1", *ARMS[arm]]
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
    out = {"cap": args.cap, "size": len(library), "seed": args.seed, "arms": rows, "ratios": ratios}
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(out, handle, indent=1)
    return out


if __name__ == "__main__":
    main()
