"""``zoo eval``: run a paper's claim and return it in the one schema every paper shares.

A paper's ``evaluate.py`` defines::

    def evaluate(name: str, *, seeds: list[int] | None = None, retrain: bool = False) -> dict:
        # -> {"settings": {...}, "seeds": [...], "arms": {ARM: {METRIC: value}}, "timings": {...}}

where the arms are the method and its baselines run side by side on the same data and seeds. It may
also define ``score_pretrained(module, limit=None) -> dict[str, float]`` (the headline metric of a
loaded checkpoint, used by ``zoo demo`` and the golden tests) and ``plot(result, path)`` (the card's
figure; a grouped bar chart is drawn otherwise).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zoo._errors import ZooError
from zoo._registry import _all_entries, get_entry, import_object

SCHEMA_KEYS = ("name", "zoo_version", "settings", "seeds", "arms", "timings")


def run_eval(name: str, seeds: Sequence[int] | None = None, retrain: bool = False) -> dict[str, Any]:
    """Run an entry's evaluation and return the validated result.

    Args:
        name: Registry name.
        seeds: Seeds to run (default: the paper's own choice).
        retrain: Retrain every arm from scratch instead of using published weights.
    """
    from zoo import __version__

    entry = get_entry(name)
    if not entry.evaluate:
        raise ZooError(f"{entry.name} defines no evaluation; `zoo eval` needs `evaluate=` in its registration")
    entry.check_requirements()
    evaluate = import_object(entry.evaluate)
    started = time.perf_counter()
    raw = evaluate(entry.name, seeds=list(seeds) if seeds is not None else None, retrain=retrain)
    result = {
        "name": entry.name,
        "zoo_version": __version__,
        "settings": raw.get("settings", {}),
        "seeds": list(raw.get("seeds", seeds or [])),
        "arms": raw["arms"],
        "timings": {**raw.get("timings", {}), "total_s": round(time.perf_counter() - started, 2)},
    }
    validate_result(result)
    return result


def validate_result(result: dict[str, Any]) -> None:
    """Check the eval schema: the keys, and arms of finite numbers.

    Raises:
        ZooError: Naming the first problem.
    """
    if set(result) != set(SCHEMA_KEYS):
        raise ZooError(f"eval result keys are {sorted(result)}, expected {list(SCHEMA_KEYS)}")
    arms = result["arms"]
    if not isinstance(arms, dict) or not arms:
        raise ZooError("eval result has no arms; an evaluation compares the method with its baselines")
    for arm, metrics in arms.items():
        if not isinstance(metrics, dict) or not metrics:
            raise ZooError(f"arm {arm!r} has no metrics")
        for key, value in metrics.items():
            if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
                raise ZooError(f"arms.{arm}.{key} = {value!r} is not a finite number")
    if not isinstance(result["seeds"], list):
        raise ZooError("eval result 'seeds' must be a list of ints")
    json.dumps(result, allow_nan=False)


def write_cards(result: dict[str, Any]) -> list[Path]:
    """Store an eval result as metrics.json of every entry that shares the evaluation, and re-render their cards."""
    from zoo._cards import write_card

    evaluator = get_entry(result["name"]).evaluate
    folders = []
    for entry in _all_entries():
        if entry.evaluate != evaluator or entry.eval_arm not in result["arms"]:
            continue
        folder = entry.mirror_dir
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "metrics.json").write_text(json.dumps(result, indent=2, allow_nan=False) + "\n")
        write_card(entry.name)
        folders.append(folder)
    return folders


def score_pretrained(name: str, limit: int | None = None) -> dict[str, float]:
    """Load an entry's published weights and score them with its paper's ``score_pretrained``.

    Args:
        name: Registry name.
        limit: Score only the first ``limit`` test items (a small slice), if the paper supports it.
    """
    import zoo

    entry = get_entry(name)
    if not entry.evaluate:
        raise ZooError(f"{entry.name} defines no evaluation to score it with")
    module_path = entry.evaluate.partition(":")[0]
    scorer = import_object(f"{module_path}:score_pretrained")
    return scorer(zoo.load(entry.name, pretrained=True), limit=limit)
