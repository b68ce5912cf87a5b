"""Plateau pilot of issue #71: do DeepHA's arms gain from training beyond the tuning grid's edges?

``zoo/deepha/tuning.json`` tried lr {1e-3, 3e-3} and epochs {6, 8}; every arm chose 8 epochs and most 3e-3, the
grid's upper edges. This pilot trains the given arms beyond those edges with the tuning's protocol
(:func:`zoo.deepha.tune.run_trial`: one fit with seed 100, greedy success on 50 *validation* episodes of each
training level; the test split is never read) and prints them beside the tuning's own trials of the same arm.
The tuning's trials are labelled as ``tuning.json`` holds them: ``{}`` is the recipe *of that time* (flat's lr was
1e-3 then; ``tune --apply`` wrote the chosen 3e-3 into flat.yaml), a pilot trial departs from today's recipe.
Each trial's result is kept in ``runs/deepha-tune/`` (resumable) and the table is written to
``benchmarks/deepha/plateau.json``.

    /work/cpu .venv/bin/python benchmarks/deepha/plateau.py --arm flat --trial max_epochs=16 [--trial lr=0.006]
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

OUT = Path(__file__).with_name("plateau.json")


def parse(text: str) -> dict:
    key, _, value = text.partition("=")
    return {key: int(value) if key == "max_epochs" else float(value)}


def main() -> None:
    from zoo.deepha.evaluate import tuning_record
    from zoo.deepha.tune import run_trial

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", default="flat")
    parser.add_argument("--trial", action="append", default=[], help="knob=value (one departure from the recipe)")
    parser.add_argument("--smoke", action="store_true", help="print the recorded table only (no fit, nothing written)")
    args = parser.parse_args()
    if args.smoke:
        args.trial = []
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    record = json.loads(OUT.read_text()) if OUT.is_file() else {"note": __doc__.splitlines()[0], "arms": {}}
    rows = record["arms"].setdefault(args.arm, {"tuning_trials": [], "pilot_trials": []})
    rows["tuning_trials"] = [
        {k: t[k] for k in ("trial", "success_all", "success_multistep", "success", "fit_s")}
        for t in tuning_record().get("arms", {}).get(args.arm, {}).get("trials", [])
    ]
    for text in args.trial:
        trial = parse(text)
        result = run_trial(args.arm, trial)
        rows["pilot_trials"] = [t for t in rows["pilot_trials"] if t["trial"] != trial]
        rows["pilot_trials"].append({k: result[k] for k in ("trial", "success_all", "success_multistep", "success",
                                                            "fit_s")})  # fmt: skip
        OUT.write_text(json.dumps(record, indent=1) + "\n")
    for kind in ("tuning_trials", "pilot_trials"):
        for t in rows[kind]:
            per_level = " ".join(f"{level} {v:.2f}" for level, v in t["success"].items())
            print(f"{args.arm} {kind[:-7]:7s} {json.dumps(t['trial']):24s} all {t['success_all']:.3f} "
                  f"multistep {t['success_multistep']:.3f} | {per_level} | fit {t['fit_s']} s")  # fmt: skip


if __name__ == "__main__":
    main()
