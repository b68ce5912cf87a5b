"""The published pieces of a card (``hub_cards/<name>/pieces.json``), the result rebuilt from them, and the
comparison of re-measured pieces with them (``zoo eval NAME --verify``).

``pieces.json`` is the record of the measurement behind a card::

    {"evaluation": "zoo.fedgr.evaluate:PROTOCOL", "name": "fedgr.fashion_mnist", "zoo_version": "0.1.0",
     "settings": {...}, "overrides": {}, "seeds": [0, 1, 2], "source": "...", "timings": {...},
     "pieces": [{"arm": "fedgr", "seed": 0, "scores": {...}, "extras": {...}, "seconds": 512.3,
                 "code": "<sha256 of the code>", "commit": "<git commit>", "measured": "2026-12-06T10:00:00"}]}

and metrics.json is what :func:`zoo.eval.result.assemble` makes of it, so ``zoo eval NAME`` rebuilds a card's
numbers and claims from its pieces in seconds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from zoo._errors import ZooError
from zoo.eval.engine import Evaluation
from zoo.eval.protocol import Protocol
from zoo.eval.result import assemble

PIECES_FILE = "pieces.json"
METRICS_FILE = "metrics.json"


def folders(ev: Evaluation) -> list[Path]:
    """The card folders of the entries that share an evaluation (each holds the same metrics and pieces)."""
    return [entry.mirror_dir for entry in ev.entries.values()]


def read_published(ev: Evaluation) -> dict[str, Any]:
    """The published pieces record of an evaluation (its named entry's card first).

    Raises:
        ZooError: If no card of the evaluation has a pieces.json.
    """
    for folder in [ev.entry.mirror_dir, *folders(ev)]:
        path = folder / PIECES_FILE
        if path.is_file():
            return _with_piece_seconds(json.loads(path.read_text()))
    raise ZooError(
        f"{ev.entry.name} has no published pieces ({ev.entry.mirror_dir / PIECES_FILE}); measure them with "
        f"`zoo eval {ev.entry.name} --verify` (add --card to publish)"
    )


def _with_piece_seconds(record: dict[str, Any]) -> dict[str, Any]:
    """Give pieces recorded before pieces carried ``seconds`` their share of their arm's recorded time, so that a
    measurement that reuses them (``--arms NEW --card``) keeps the old arms' timings instead of zeros."""
    timings = record.get("timings") or {}
    counts: dict[str, int] = {}
    for piece in record["pieces"]:
        counts[piece["arm"]] = counts.get(piece["arm"], 0) + 1
    for piece in record["pieces"]:
        if piece.get("seconds") is None and f"{piece['arm']}_s" in timings:
            piece["seconds"] = round(timings[f"{piece['arm']}_s"] / counts[piece["arm"]], 2)
    return record


def result_of(ev: Evaluation, record: Mapping[str, Any], pieces: Sequence[Mapping[str, Any]] | None = None) -> dict:
    """The result a pieces record makes (optionally with other pieces in place of the record's)."""
    return assemble(
        ev.protocol,
        record["name"],
        record["pieces"] if pieces is None else pieces,
        record["settings"],
        seeds=record["seeds"],
        overrides=record.get("overrides", {}),
        source=record.get("source", ""),
        zoo_version=record.get("zoo_version"),
        timings=record.get("timings"),
        provenance=record.get("provenance"),
    )


def published_result(ev: Evaluation) -> dict[str, Any]:
    """The card's result rebuilt from its published pieces."""
    return result_of(ev, read_published(ev))


def card_metrics(ev: Evaluation) -> dict[str, Any] | None:
    """The metrics.json of the named entry's card, if it has one."""
    path = ev.entry.mirror_dir / METRICS_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON values differ, as dotted paths (empty when they are equal)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out = []
        for key in list(a) + [k for k in b if k not in a]:
            where = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                out.append(where)
            else:
                out += differences(a[key], b[key], where)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [path or "(root)"]


def verify_table(published: Mapping[str, Any], measured: Sequence[Mapping[str, Any]]) -> str:
    """Each re-measured metric against the card: card value, measured, difference, the card's seed spread.

    Args:
        published: The card's result (rebuilt from its pieces).
        measured: The re-measured pieces.
    """
    rows = [("arm", "seed", "metric", "card", "measured", "difference", "card spread", "within")]
    inside = total = 0
    for piece in measured:
        arm, seed = piece["arm"], str(piece["seed"])
        card = published["per_seed"].get(arm, {}).get(seed)
        spread = published["arms"].get(arm, {})
        for metric, value in piece["scores"].items():
            if card is None or metric not in card:
                rows.append((arm, seed, metric, "-", f"{value:.4g}", "-", "-", "new"))
                continue
            diff = value - card[metric]
            band = spread.get(f"{metric}_std", 0.0)
            ok = abs(diff) <= band + 1e-9 * max(1.0, abs(card[metric]))
            inside, total = inside + ok, total + 1
            cells = (f"{card[metric]:.4g}", f"{value:.4g}", f"{diff:+.3g}", f"{band:.3g}", "yes" if ok else "NO")
            rows.append((arm, seed, metric, *cells))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    lines.append(f"{inside} of {total} re-measured metrics lie within the card's seed spread")
    return "\n".join(lines)


def pieces_record(
    ev: Evaluation,
    pieces: Sequence[Mapping[str, Any]],
    settings: Mapping[str, Any],
    seeds: Sequence[int],
    source: str,
    timings: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The pieces.json record of a complete measurement."""
    from zoo._serialization import git_commit
    from zoo._version import __version__

    commit = (git_commit() or {}).get("commit")
    kept = [{k: v for k, v in p.items() if k != "cached"} for p in pieces]
    for piece in kept:
        piece.setdefault("commit", commit)
    record = {
        "evaluation": ev.ref,
        "name": ev.entry.name,
        "zoo_version": __version__,
        "settings": dict(settings),
        "overrides": {},
        "seeds": list(seeds),
        "source": source,
        "pieces": kept,
    }
    if timings is not None:
        record["timings"] = dict(timings)
    return record


def provenance(ev: Evaluation, record: Mapping[str, Any]) -> dict[str, Any]:
    """Which code and weights made a card: the pieces' commits and code digests, the weights' pins now."""
    pieces = record["pieces"]
    return {
        "zoo_version": record.get("zoo_version"),
        "commits": sorted({p["commit"] for p in pieces if p.get("commit")}),
        "code_sha256": sorted({p["code"] for p in pieces if p.get("code")}),
        "weights_sha256": {
            entry.name: entry.pretrained_cfg.sha256["model.safetensors"]
            for entry in ev.entries.values()
            if entry.pretrained_cfg.has_weights
        },
    }


def write_card_files(ev: Evaluation, record: Mapping[str, Any]) -> list[Path]:
    """Write pieces.json and metrics.json (with its provenance) into every card of the evaluation, re-render them.

    Raises:
        ZooError: If the result is not a complete, valid card (every arm, at least three seeds).
    """
    from zoo._cards import write_card
    from zoo._registry import clear_metrics_cache
    from zoo.eval.result import is_complete, validate_result

    record = {**record, "provenance": provenance(ev, record)}
    result = result_of(ev, record)
    if not is_complete(ev.protocol, result):
        raise ZooError("a card needs every arm for every seed: measure the missing pieces first (zoo eval --verify)")
    validate_result(result)
    written = []
    for folder in folders(ev):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / PIECES_FILE).write_text(json.dumps(record, indent=1, allow_nan=False) + "\n")
        (folder / METRICS_FILE).write_text(json.dumps(result, indent=2, allow_nan=False) + "\n")
        written.append(folder)
    clear_metrics_cache()
    for entry in ev.entries.values():
        write_card(entry.name, figure=figure_of(ev.protocol))
    return written


def figure_of(protocol: Protocol):
    """``figure(metrics, path, highlight)``: the protocol's ``plot`` on its panels, else bars of its headline."""
    from zoo._figures import card_figure, default_plot

    def figure(metrics: Mapping[str, Any], path: Path, highlight: str | None = None) -> None:
        if protocol.plot is None:
            default_plot(metrics, path, protocol.headline)
            return
        with card_figure(metrics, path, panels=protocol.panels) as axes:
            protocol.plot(metrics, axes)

    return figure


def stale(ev: Evaluation) -> list[str]:
    """Why an evaluation's cards no longer describe the code and weights (empty when they do).

    A card is stale when its metrics.json is not what its pieces make with today's protocol (the claims code or
    the arms changed), or when a published entry's weights differ from the ones the card scored.
    """
    problems = []
    card = card_metrics(ev)
    if card is None:
        return [f"{ev.entry.name} has no metrics.json"]
    rebuilt = published_result(ev)
    diff = differences(card, rebuilt)
    if diff:
        problems.append(f"{ev.entry.mirror_dir}/metrics.json differs from its pieces rebuilt at {', '.join(diff[:5])}")
    scored = card.get("provenance", {}).get("weights_sha256", {})
    for entry in ev.entries.values():
        pinned = entry.pretrained_cfg.sha256.get("model.safetensors")
        if pinned and scored.get(entry.name) != pinned:
            problems.append(
                f"{entry.mirror_dir.name}: its card scored weights {str(scored.get(entry.name))[:12]}, but the pinned "
                f"model.safetensors is {pinned[:12]}: re-measure (zoo eval {ev.entry.name} --verify --card)"
            )
    return problems
