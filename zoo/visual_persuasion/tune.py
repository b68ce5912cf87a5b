"""Tune CVPO, VFD, random search and the oracle on the 16 validation items (6-9 configurations each).

The judges are heads fit exactly as the recipe fits them but with seed 100 (their own training crops and edits);
the test items and test seeds are never touched. The score of a configuration is the mean P(optimised chosen
over original) under the 3 optimisation heads (100 trials per order per item, trials seeded apart from the
optimisation). Random search gets the tuned CVPO's judge calls item by item, as in the evaluation. Writes
``zoo/visual_persuasion/tuning.json``, which the evaluation and the recipe's values follow.

Run in pieces under the CPU lock: ``flock /tmp/zoo-cpu.lock python -m zoo.visual_persuasion.tune --arms cvpo``,
then ``--arms vfd random_search oracle_gradient`` (each run keeps the others' record).

``--calibrate 0.5 0.4 0.3`` chooses the judges' utility scale (``attributes.UTILITY_SCALE``): the largest at
which random search (range 0.5, at the recorded CVPO winner's judge calls) stays <= 0.88 on the validation items
(the headroom gate 0.90 with a margin), then tunes every arm at it (``tuning.json["calibration"]``; the tuning at
0.2, T_c over the unscaled spread, is kept under ``"scale_0.2"``).

``--probe`` measures two things on the validation items before any arm is tuned (``tuning.json["probe"]``):

* the utility spread: the standard deviation of the judges' mean utility change under random plausible edits
  (every parameter uniform in its bounds, then the SSIM floor), in units of the temperature T_c (unscaled 0.91,
  4.5 T_c);
* the chooser's true sensitivities by each way in ``preferences.SENSITIVITY_METHODS``, on the two halves of the
  validation items (one crop of every photo each): the way with the highest split-half Spearman is the one the
  evaluation uses (ties: the smaller edits). Spearman with the disclosed taste is reported, not used to choose;
  neither the optimisers' logs nor the test items enter the choice.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from zoo.visual_persuasion.pipeline import OPTIMISATION_HEADS, ArmSettings, head_to_head

TUNING_FILE = Path(__file__).with_name("tuning.json")
VALIDATION_SEED = 100
_LEARN = {"cvpo_learn": [True] * 6, "cvpo_winner_base": [True] * 6, "cvpo_decay": [0.9] * 6, "cvpo_candidates": [3] * 6}
GRIDS = {  # per tuned arm: its configurations; every winning edge of the first pass (4 each) is inside the range now
    # CVPO: 6 here after 7 design runs (tuning.json["cvpo_design"], steps up to 0.5); random search: 7
    "cvpo": {"cvpo_step": [0.2, 0.3, 0.3, 0.45, 0.3, 0.45], "cvpo_noise": [0.1, 0.15, 0.25, 0.25, 0.35, 0.35],
             **_LEARN},
    "vfd": {"vfd_step": [0.15, 0.1, 0.2, 0.1, 0.3, 0.3], "vfd_noise": [0.15, 0.05, 0.05, 0.05, 0.05, 0.15],
            "vfd_candidates": [3, 3, 3, 4, 3, 3]},
    "random_search": {"random_range": [0.25, 0.35, 0.5, 0.7, 0.85, 1.0, 1.5]},
    # a ceiling, not a competitor: the first pass's 4 learning rates at 12 steps, then 30 steps up to 4x the lr
    "oracle_gradient": {"oracle_learning_rate": [0.03, 0.06, 0.1, 0.15, 0.15, 0.2, 0.3, 0.45, 0.6],
                        "oracle_steps": [12, 12, 12, 12, 30, 30, 30, 30, 30]},
}  # fmt: skip
#: Arms whose code and validation context did not change since their rows were measured: a row with the same
#: values is kept instead of re-measured (a random search row only at the same per-item budgets, CVPO's calls).
REUSABLE = ("cvpo", "vfd", "oracle_gradient", "random_search")


def tuned_settings() -> ArmSettings:
    """The arms' constants: the validation winners of ``tuning.json`` (the spec's defaults without it)."""
    chosen = json.loads(TUNING_FILE.read_text()).get("chosen", {}) if TUNING_FILE.is_file() else {}
    return replace(ArmSettings(), **{k: v for values in chosen.values() for k, v in values.items()})


def validation_module(utility_scale: float | None = None):
    """The recipe's module with heads fit on seed 100's training edits (cached in ``cache_dir("visual_persuasion")``),
    at ``utility_scale`` (the module's default without it)."""
    import torch

    from zoo._paths import cache_dir
    from zoo.visual_persuasion.data import PersuasionDataModule
    from zoo.visual_persuasion.module import VisualPersuasionModule

    heads_cache = cache_dir("visual_persuasion") / "validation_heads.npz"

    extra = {} if utility_scale is None else {"utility_scale": float(utility_scale)}
    module = VisualPersuasionModule(seed=VALIDATION_SEED, optimise=False, **extra)
    if heads_cache.is_file():
        # ridge is linear in its target, so heads fit at another utility scale are exactly rescaled
        state = dict(np.load(heads_cache))
        factor = module.hparams.utility_scale / float(state.pop("utility_scale", 1.0))
        state["head_weight"], state["head_bias"] = state["head_weight"] * factor, state["head_bias"] * factor
        module.load_state_dict({k: torch.as_tensor(v) for k, v in state.items()})
        return module
    data = PersuasionDataModule(seed=VALIDATION_SEED)
    data.setup()
    module.fit_heads(data.train_images, data.train_measurements)
    state = {k: v.numpy() for k, v in module.state_dict().items()}
    np.savez(heads_cache, utility_scale=np.array(module.hparams.utility_scale), **state)
    return module


def utility_spread(module, items, edits_per_item: int = 24) -> dict:
    """Standard deviation of the judges' mean utility change under random plausible edits (module units, T_c)."""
    rng = np.random.default_rng([VALIDATION_SEED, 1419])
    editor, judge = module.editor(), module.judge(VALIDATION_SEED)
    changes = []
    for item in items:
        edited = [editor.random_plausible(item, rng) for _ in range(edits_per_item)]
        utilities = judge.utilities([item, *edited]).mean(axis=1)
        changes.append(utilities[1:] - utilities[0])
    changes = np.concatenate(changes)
    std = float(changes.std())
    scale, temperature = module.hparams.utility_scale, module.hparams.temperature
    return {
        "edits": int(changes.size),
        "std": round(std, 4),
        "std_over_temperature": round(std / temperature, 3),
        "utility_scale": scale,
        "unscaled_std": round(std / scale, 4),
        "scale_for_one_temperature": round(temperature * scale / std, 3),
    }


def sensitivity_probe(module, items) -> dict:
    """Every way of measuring the true sensitivities on the two halves of the validation items."""
    from scipy.stats import spearmanr

    from zoo.visual_persuasion.preferences import SENSITIVITY_METHODS, true_sensitivities

    judge = module.judge(VALIDATION_SEED)
    mean, std = module.attribute_stats
    taste = np.asarray(module.hparams.taste)
    out = {}
    for name, kwargs in SENSITIVITY_METHODS.items():
        halves = [true_sensitivities(lambda images: judge.utilities(images).mean(axis=1), module.editor(),
                                     items[half::2], mean, std, seed=VALIDATION_SEED + half, **kwargs)
                  for half in (0, 1)]  # fmt: skip
        whole = (halves[0] + halves[1]) / 2
        out[name] = {"split_half_spearman": round(float(spearmanr(*halves).statistic), 4),
                     "spearman_taste": round(float(spearmanr(whole, taste).statistic), 4),
                     "halves": [[round(float(v), 4) for v in h] for h in halves]}  # fmt: skip
        print("sensitivity", name, out[name], flush=True)
    chosen = max(out, key=lambda name: out[name]["split_half_spearman"])  # dict order: smaller edits first on ties
    return {"methods": out, "chosen": chosen,
            "criterion": "highest split-half Spearman of the sensitivities on the 16 validation items (halves: one "
                         "crop of every photo each), validation heads"}  # fmt: skip


def score(module, arm: str, settings: ArmSettings, items, budgets=None) -> tuple[float, list[int]]:
    """Mean validation P(chosen over original) of ``arm`` and its judge calls per item."""
    outcomes, _, _ = module.optimise(arm, items, seed=VALIDATION_SEED, budgets=budgets, settings=settings)
    judge = module.judge(VALIDATION_SEED, heads=OPTIMISATION_HEADS)
    p = head_to_head(judge, items, [o.best.image for o in outcomes], 100, VALIDATION_SEED + 1, (0, 1, 2))
    return float(p.mean()), [o.calls for o in outcomes]


def main(argv=None) -> dict:
    import torch

    from zoo.visual_persuasion.images import base_items

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", nargs="*", default=list(GRIDS), choices=list(GRIDS))
    parser.add_argument("--probe", action="store_true", help="measure the utility spread and the sensitivity ways")
    parser.add_argument("--utility-scale", type=float, default=None, help="the judges' utility scale")
    parser.add_argument(
        "--calibrate",
        type=float,
        nargs="*",
        default=None,
        help="utility scales to try, largest first: the first at which random search (range 0.5, "
        "at the recorded CVPO winner's calls) stays <= --headroom is the one tuned",
    )
    parser.add_argument("--headroom", type=float, default=0.88)
    parser.add_argument("--out", default=str(TUNING_FILE))
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    record = json.loads(Path(args.out).read_text()) if Path(args.out).is_file() else {}
    record.setdefault("scores", {})
    record.setdefault("chosen", {})
    record.setdefault("seconds", {})
    record.setdefault("cvpo_calls", None)
    items = base_items("validation")
    scale = args.utility_scale
    if args.calibrate:
        rows = []
        for scale in sorted(args.calibrate, reverse=True):
            started = time.perf_counter()
            module = validation_module(scale)
            base = replace(ArmSettings(), **record["chosen"].get("cvpo", {}), random_range=0.5)
            p_cvpo, calls = score(module, "cvpo", base, items)
            p_random, _ = score(module, "random_search", base, items, calls)
            rows.append(
                {
                    "utility_scale": scale,
                    "cvpo": round(p_cvpo, 4),
                    "random_search": round(p_random, 4),
                    "judge_calls": float(np.mean(calls)),
                    "seconds": round(time.perf_counter() - started, 1),
                }
            )
            print("calibrate", rows[-1], flush=True)
            if p_random <= args.headroom:
                break
        record["calibration"] = {
            "rows": rows,
            "chosen": scale,
            "cvpo_settings": record["chosen"].get("cvpo", {}),
            "criterion": f"the largest utility scale at which random search (range 0.5) at CVPO's judge calls "
            f"stays <= {args.headroom} on the validation items (headroom gate 0.90 with a margin)",
        }
        Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    module = validation_module(scale)
    record["utility_scale"] = module.hparams.utility_scale
    if args.probe:
        started = time.perf_counter()
        record["probe"] = {"utility_spread": utility_spread(module, items)}
        print("spread", record["probe"]["utility_spread"], flush=True)
        record["sensitivity"] = sensitivity_probe(module, items)
        record["probe"]["seconds"] = round(time.perf_counter() - started, 1)
        Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    for arm in args.arms:
        started = time.perf_counter()
        grid = GRIDS[arm]
        base = replace(ArmSettings(), **{k: v for chosen in record["chosen"].values() for k, v in chosen.items()})
        budgets = record["cvpo_calls"] if arm == "random_search" else None
        if arm == "random_search" and budgets is None:
            raise SystemExit("tune cvpo first: random search gets the tuned CVPO's judge calls")
        results = []
        kept = {json.dumps(row["values"], sort_keys=True): row for row in record["scores"].get(arm, [])}
        for trial in range(len(next(iter(grid.values())))):
            values = {key: grid[key][trial] for key in grid}
            row = kept.get(json.dumps(values, sort_keys=True))
            if arm in REUSABLE and row is not None and row.get("budgets") == budgets:
                results.append({**row, "kept": True})
                print(arm, values, "kept", results[-1]["p_beats_original"], flush=True)
                continue
            value, calls = score(module, arm, replace(base, **values), items, budgets)
            results.append({"values": values, "p_beats_original": round(value, 4),
                            "judge_calls": float(np.mean(calls))})  # fmt: skip
            print(arm, values, f"p={value:.4f} calls={np.mean(calls):.0f}", flush=True)
            if arm == "cvpo":
                results[-1]["calls_per_item"] = calls
            if budgets is not None:
                results[-1]["budgets"] = list(budgets)
        best = max(results, key=lambda r: r["p_beats_original"])
        record["scores"][arm] = results
        record["chosen"][arm] = best["values"]
        if arm == "cvpo":
            record["cvpo_calls"] = best["calls_per_item"]
        record["seconds"][arm] = round(time.perf_counter() - started, 1)
        record["criterion"] = (
            "mean P(optimised chosen over original), 3 judges x 2 orders x 100 trials, 16 validation items, heads "
            f"fit with seed {VALIDATION_SEED}; 6-9 configurations per tuned arm (GRIDS)"
        )
        Path(args.out).write_text(json.dumps(record, indent=2) + "\n")  # after each arm: a piece is never lost
    print(json.dumps(record["chosen"]))
    return record


if __name__ == "__main__":
    main()
