"""Tune CVPO, VFD, random search and the oracle on the 16 validation items (4 configurations each).

The judges are heads fit exactly as the recipe fits them but with seed 100 (their own training crops and edits);
the test items and test seeds are never touched. The score of a configuration is the mean P(optimised chosen
over original) under the 3 optimisation heads (100 trials per order per item, trials seeded apart from the
optimisation). Random search gets the tuned CVPO's judge calls item by item, as in the evaluation. Writes
``zoo/visual_persuasion/tuning.json``, which the evaluation and the recipe's values follow.

Run in pieces under the CPU lock: ``flock /tmp/zoo-cpu.lock python -m zoo.visual_persuasion.tune --arms cvpo``,
then ``--arms vfd random_search oracle_gradient`` (each run keeps the others' record).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from zoo.visual_persuasion.evaluate import GRIDS, TUNING_FILE, VALIDATION_SEED
from zoo.visual_persuasion.pipeline import OPTIMISATION_HEADS, ArmSettings, head_to_head

HEADS_CACHE = Path("runs/visual_persuasion-tune/validation_heads.npz")


def validation_module():
    """The recipe's module with heads fit on seed 100's training edits (cached in runs/)."""
    import torch

    from zoo.visual_persuasion.data import PersuasionDataModule
    from zoo.visual_persuasion.module import VisualPersuasionModule

    module = VisualPersuasionModule(seed=VALIDATION_SEED, optimise=False)
    if HEADS_CACHE.is_file():
        state = dict(np.load(HEADS_CACHE))
        module.load_state_dict({k: torch.as_tensor(v) for k, v in state.items()})
        return module
    data = PersuasionDataModule(seed=VALIDATION_SEED)
    data.setup()
    module.fit_heads(data.train_images, data.train_measurements)
    HEADS_CACHE.parent.mkdir(parents=True, exist_ok=True)
    np.savez(HEADS_CACHE, **{k: v.numpy() for k, v in module.state_dict().items()})
    return module


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
    parser.add_argument("--arms", nargs="+", default=list(GRIDS), choices=list(GRIDS))
    parser.add_argument("--out", default=str(TUNING_FILE))
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    record = json.loads(Path(args.out).read_text()) if Path(args.out).is_file() else {}
    record.setdefault("scores", {})
    record.setdefault("chosen", {})
    record.setdefault("seconds", {})
    record.setdefault("cvpo_calls", None)
    module = validation_module()
    items = base_items("validation")
    for arm in args.arms:
        started = time.perf_counter()
        grid = GRIDS[arm]
        base = replace(ArmSettings(), **{k: v for chosen in record["chosen"].values() for k, v in chosen.items()})
        budgets = record["cvpo_calls"] if arm == "random_search" else None
        if arm == "random_search" and budgets is None:
            raise SystemExit("tune cvpo first: random search gets the tuned CVPO's judge calls")
        results = []
        for trial in range(len(next(iter(grid.values())))):
            values = {key: grid[key][trial] for key in grid}
            value, calls = score(module, arm, replace(base, **values), items, budgets)
            results.append({"values": values, "p_beats_original": round(value, 4),
                            "judge_calls": float(np.mean(calls))})  # fmt: skip
            print(arm, values, f"p={value:.4f} calls={np.mean(calls):.0f}", flush=True)
            if arm == "cvpo":
                results[-1]["calls_per_item"] = calls
        best = max(results, key=lambda r: r["p_beats_original"])
        record["scores"][arm] = results
        record["chosen"][arm] = best["values"]
        if arm == "cvpo":
            record["cvpo_calls"] = best["calls_per_item"]
        record["seconds"][arm] = round(time.perf_counter() - started, 1)
        record["criterion"] = (
            "mean P(optimised chosen over original), 3 judges x 2 orders x 100 trials, 16 validation items, heads "
            f"fit with seed {VALIDATION_SEED}; 4 configurations per arm"
        )
        Path(args.out).write_text(json.dumps(record, indent=2) + "\n")  # after each arm: a piece is never lost
    print(json.dumps(record["chosen"]))
    return record


if __name__ == "__main__":
    main()
