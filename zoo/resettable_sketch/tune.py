"""Choose the space-bounded sketch's target accuracy ``alpha`` and the baselines' parameters on validation seeds.

For each ``alpha`` of the grid, :func:`~zoo.resettable_sketch.calibration.calibrate` gives ``k``, the rate and
``f_min``; the calibrated sketch then plays both adaptive attacks and the Wikipedia word stream on validation
seeds 100-104 (streams and sketch randomness both seeded there; never the evaluation's seeds 0-4). The chosen
``alpha`` is the largest (the smallest ``k``) for which every validation seed keeps >= 95% of post-warm-up probes
within 0.15 under both attacks and ends the word stream within 0.1. The baselines get the same number of trials
(the harness's rule): ``hash_threshold``'s rate in {0.2, 0.5} and DataSketches theta's lg_k in {11, 12}, each
chosen by its mean final error over both attacks on validation seeds 100-101 (two seeds: theta's A-not-B estimate
after every probe is slow). Writes the trials and the choices to ``zoo/resettable_sketch/tuning.json``, which
``evaluate.py`` reads (``alpha``, ``hash_rate``, ``theta_lg_k``). The trials in ``tuning.json`` were run at the
earlier stream lengths (60,000 attack probes, one pass of the word text); the code below now plays the evaluation's
lengths (``attack_probes`` = 25 k of each candidate, ``word_repeats`` passes), about five minutes per alpha.

``--words-check`` only replays the word stream at the evaluation's length for each alpha on the validation seeds
(the criterion that decided the grid before) and stores it as ``words_check`` in ``tuning.json``, keeping the rest:

    /work/cpu .venv/bin/python -m zoo.resettable_sketch.tune --words-check
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from zoo.resettable_sketch.evaluate import ATTACK_PER_K, TUNING_FILE

SEEDS = (100, 101, 102, 103, 104)
BASELINE_SEEDS = (100, 101)


def tune_baselines(settings: dict) -> dict:
    """Each baseline's value with the lowest mean final error over both attacks on the validation seeds."""
    from zoo.resettable_sketch.evaluate import attack
    from zoo.resettable_sketch.sketches import HashThresholdSketch, ThetaSketch

    baselines = {
        "hash_threshold": ("rate", (0.2, 0.5), lambda rate, seed: HashThresholdSketch("card", rate, seed=seed)),
        "datasketches_theta": ("lg_k", (11, 12), lambda lg_k, seed: ThetaSketch(lg_k, seed=9001 + seed)),
    }
    out = {}
    for arm, (name, grid, factory) in baselines.items():
        probes = settings["attack_probes"] if arm == "hash_threshold" else settings["side_attack_probes"]
        trials = []
        for value in grid:
            errors = [
                attack(factory(value, seed), mode, probes, settings["f_min"])[0][f"rel_err_final_{mode}"]
                for seed in BASELINE_SEEDS
                for mode in ("hide", "inflate")
            ]
            trials.append({name: value, "mean_rel_err_final": sum(errors) / len(errors), "errors": errors})
            print(arm, trials[-1], flush=True)
        out[arm] = {
            "grid": {name: list(grid)},
            "trials": trials,
            "chosen": min(trials, key=lambda t: t["mean_rel_err_final"])[name],
        }
    return out


def words_check(alphas, base: dict) -> list[dict]:
    """Each alpha's robust sketch on the evaluation-length word stream of every validation seed."""
    from zoo.resettable_sketch.calibration import calibrate
    from zoo.resettable_sketch.evaluate import arm_factories, run_stream
    from zoo.resettable_sketch.streams import word_stream

    trials = []
    for alpha in alphas:
        cal = calibrate(alpha=alpha, eps=base["eps"], horizon=base["horizon"], z=base["z"])
        _, factory = arm_factories({**base, "alpha": alpha, "f_min": cal.f_min})["robust"]
        runs = {}
        for seed in SEEDS:
            stream = word_stream(seed=seed, repeats=base["word_repeats"])
            runs[seed] = run_stream(factory(seed), "card", stream, "words", cal.f_min)
            print(alpha, seed, {k: round(v, 4) for k, v in runs[seed].items() if "updates" not in k}, flush=True)
        passes = all(r["rel_err_final_words"] <= 0.1 for r in runs.values())
        trials.append(
            {"alpha": alpha, "k": cal.k, "word_repeats": base["word_repeats"], "passes": passes, "runs": runs}
        )
    return trials


def main(argv=None) -> dict:
    from zoo.resettable_sketch.calibration import calibrate
    from zoo.resettable_sketch.evaluate import FRAC, PROTOCOL, arm_factories, attack, run_stream
    from zoo.resettable_sketch.streams import word_stream

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.15, 0.1])
    parser.add_argument("--out", default=str(TUNING_FILE))
    parser.add_argument("--skip-baselines", action="store_true", help="keep the baselines' record in --out")
    parser.add_argument("--words-check", action="store_true", help="only the word stream; adds `words_check`")
    args = parser.parse_args(argv)
    base = {key: setting.default for key, setting in PROTOCOL.settings.items()}
    if args.words_check:
        record = json.loads(Path(args.out).read_text())
        record["words_check"] = words_check(args.alphas, base)
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
        return record
    trials = []
    for alpha in args.alphas:
        cal = calibrate(alpha=alpha, eps=base["eps"], horizon=base["horizon"], z=base["z"])
        settings = {**base, "alpha": alpha, "f_min": cal.f_min}
        _, factory = arm_factories(settings)["robust"]
        runs = {}
        for seed in SEEDS:
            scores = {}
            for mode in ("hide", "inflate"):
                scores.update(attack(factory(seed), mode, ATTACK_PER_K * cal.k, cal.f_min)[0])
            words = word_stream(seed=seed, repeats=settings["word_repeats"])
            scores.update(run_stream(factory(seed), "card", words, "words", cal.f_min))
            runs[seed] = scores
            print(alpha, seed, {k: round(v, 4) for k, v in scores.items() if "updates" not in k}, flush=True)
        ok = all(
            r.get(f"{FRAC}_hide", 0) >= 0.95 and r.get(f"{FRAC}_inflate", 0) >= 0.95 and r["rel_err_final_words"] <= 0.1
            for r in runs.values()
        )
        trials.append({"alpha": alpha, "k": cal.k, "rate": cal.rate, "f_min": cal.f_min, "passes": ok, "runs": runs})
    passing = [t for t in trials if t["passes"]]
    chosen = max(passing, key=lambda t: t["alpha"])["alpha"] if passing else None
    previous = json.loads(Path(args.out).read_text()) if Path(args.out).is_file() else {}
    record = {"seeds": SEEDS, "chosen_alpha": chosen, "trials": trials}
    if args.skip_baselines:
        record.update({key: previous[key] for key in ("baselines", "baseline_seeds") if key in previous})
    else:
        record["baselines"] = tune_baselines(base)
        record["baseline_seeds"] = BASELINE_SEEDS
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print("chosen alpha:", chosen, {arm: b["chosen"] for arm, b in record.get("baselines", {}).items()}, flush=True)
    return record


if __name__ == "__main__":
    main()
