"""Merge ``zoo eval visual_persuasion --json`` results of single seeds into one result (and optionally the card).

The evaluation of all three seeds runs ~20 minutes on 2 cores; on the shared machine it runs as one locked job per
seed (``zoo eval visual_persuasion --seeds 0 --json out0.json``, ...). This recombines them exactly as one run would:
``per_seed`` and ``extras`` are united, ``arms`` re-summarised with the harness's ``summarise``, claims re-checked,
and each arm's and the total time summed.

Run: ``python -m zoo.visual_persuasion.merge out0.json out1.json out2.json --json out.json [--card]``.
"""

from __future__ import annotations

import argparse
import json


def merge(results: list[dict]) -> dict:
    """One result from several single-seed results of the same settings."""
    from zoo._eval import summarise, validate_result
    from zoo.visual_persuasion import evaluate

    first = results[0]
    for other in results[1:]:
        if {k: v for k, v in other["settings"].items() if k != "source"} != {
            k: v for k, v in first["settings"].items() if k != "source"
        }:
            raise ValueError("results with different settings cannot be merged")
    per_seed: dict = {}
    extras: dict = {}
    timings: dict = {}
    seeds: list = []
    for result in results:
        seeds += [s for s in result["seeds"] if s not in seeds]
        for arm, runs in result["per_seed"].items():
            per_seed.setdefault(arm, {}).update(runs)
        extras.update(result["extras"])
        for key, value in result["timings"].items():
            timings[key] = round(timings.get(key, 0.0) + value, 2)
    merged = {**first, "seeds": seeds, "per_seed": per_seed, "extras": extras, "timings": timings}
    merged["arms"] = {arm: summarise(runs) for arm, runs in per_seed.items() if runs}
    merged["claims"] = [
        {"id": c.id, "text": c.text, "value": c.value, "threshold": c.threshold, "holds": c.holds, "versus": c.versus}
        for c in evaluate.claims(merged)
    ]
    validate_result(merged)
    return merged


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--json", required=True)
    parser.add_argument("--card", action="store_true", help="write metrics.json and the card of every entry")
    args = parser.parse_args(argv)
    from pathlib import Path

    merged = merge([json.loads(Path(path).read_text()) for path in args.inputs])
    with open(args.json, "w") as handle:
        json.dump(merged, handle, indent=2, allow_nan=False)
        handle.write("\n")
    if args.card:
        from zoo._eval import write_cards

        write_cards(merged)
    from zoo._eval import claims_table

    print(claims_table(merged))
    return merged


if __name__ == "__main__":
    main()
