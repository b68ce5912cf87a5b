"""``zoo eval``: a card's claims from its published pieces, or re-measured pieces beside them.

* ``zoo eval NAME``: rebuild the result from the card's published pieces (seconds) and say whether it equals
  the card's metrics.json; ``--card`` re-renders the cards from them.
* ``zoo eval NAME --verify [--arms A B] [--seeds S]``: re-measure those pieces (training only what they need) and
  print each against the card, with its difference and the card's seed spread.
* ``zoo eval NAME --arms A B``, ``--seeds``, ``--set KEY=VALUE``, ``--retrain``: measure a subset or a variant;
  the other arms come from the published pieces when the settings are the card's, and are never retrained
  silently.
* ``zoo eval NAME --weights DIR``: score only the method on your exported weights beside the published pieces.

Every measured piece is written to ``--json PATH`` (default ``runs/eval/NAME-TIME.json``) as it finishes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from zoo._errors import ZooError
from zoo.eval.claims import claims_table
from zoo.eval.engine import Evaluation, Request, evaluation, measure
from zoo.eval.published import (
    card_metrics,
    differences,
    pieces_record,
    published_result,
    read_published,
    result_of,
    verify_table,
    write_card_files,
)
from zoo.eval.result import assemble


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``zoo eval``."""
    p.add_argument("name")
    p.add_argument("--verify", action="store_true", help="re-measure the chosen pieces and compare them with the card")
    p.add_argument("--arms", nargs="+", default=None, help="only these arms (default: all)")
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default: the protocol's)")
    p.add_argument("--set", metavar="KEY=VALUE", nargs="+", action="extend", default=[], help="override a setting")
    p.add_argument("--settings", action="store_true", help="list the evaluation's settings and arms, then exit")
    p.add_argument("--retrain", action="store_true", help="retrain the measured arms instead of loading weights")
    p.add_argument("--weights", metavar="DIR", default=None, help="score this exported folder as the method's arm")
    p.add_argument("--workers", type=int, default=1, help="processes measuring pieces side by side (default 1)")
    p.add_argument("--fresh", action="store_true", help="measure again even where the cache holds the piece")
    p.add_argument("--json", metavar="PATH", help="write the result here (updated as pieces finish)")
    p.add_argument("--card", action="store_true", help="write metrics.json and pieces.json and re-render the cards")


def cmd_eval(args: argparse.Namespace) -> int:
    ev = evaluation(args.name)
    protocol = ev.protocol
    if args.settings:
        print(protocol.describe_settings())
        print("arms: " + ", ".join(protocol.arms))
        return 0
    overrides = protocol.parse_overrides(args.set)
    if not (args.verify or args.arms or args.seeds or overrides or args.retrain or args.weights):
        return _from_published(ev, args)
    if args.card and (overrides or args.weights):
        raise ZooError("--card publishes the protocol's own numbers: drop --set and --weights to write cards")
    if args.weights and (overrides or args.retrain) and not args.arms:
        raise ZooError("with --set or --retrain the published pieces do not apply: name the arms to measure (--arms)")
    arms = tuple(args.arms) if args.arms else ((protocol.method_name,) if args.weights else None)
    request = Request(
        arms,
        tuple(args.seeds) if args.seeds else None,
        overrides,
        args.retrain,
        args.weights,
        max(1, args.workers),
        args.fresh,
    )
    return _measure(ev, request, args)


def _from_published(ev: Evaluation, args: argparse.Namespace) -> int:
    started = time.perf_counter()
    record = read_published(ev)
    result = published_result(ev)
    _write_json(args.json, result)
    print(claims_table(result))
    card = card_metrics(ev)
    where = ev.entry.mirror_dir
    seconds = time.perf_counter() - started
    print(
        f"rebuilt from {len(record['pieces'])} published pieces ({where}/pieces.json) in {seconds:.1f} s",
        file=sys.stderr,
    )
    if card is not None:
        diff = differences(card, result)
        verdict = "identical to metrics.json" if not diff else f"differs from metrics.json at {', '.join(diff[:8])}"
        print(verdict + (f" (+{len(diff) - 8} more)" if len(diff) > 8 else ""), file=sys.stderr)
    if args.card:
        for folder in write_card_files(ev, record):
            print(f"updated {folder}", file=sys.stderr)
    return 0


def _measure(ev: Evaluation, request: Request, args: argparse.Namespace) -> int:
    protocol = ev.protocol
    settings = protocol.resolve(request.overrides)
    seeds = list(request.seeds or protocol.seeds)
    try:
        record = read_published(ev)
    except ZooError:
        record = None
    reuse = record is not None and record["settings"] == settings and not request.retrain
    source = _source(request, reuse)
    out = Path(args.json or f"runs/eval/{ev.entry.name}-{time.strftime('%Y%m%d-%H%M%S')}.json")
    print(
        f"zoo: measuring {', '.join(request.arms or protocol.arms)} for seeds {seeds}; results go to {out}",
        file=sys.stderr,
    )
    measured: list[dict[str, Any]] = []

    def combined() -> dict[str, Any]:
        keys = {(p["arm"], str(p["seed"])) for p in measured}
        others = []
        if reuse:
            others = [
                p
                for p in record["pieces"]
                if str(p["seed"]) in map(str, seeds) and (p["arm"], str(p["seed"])) not in keys
            ]
        return assemble(
            protocol,
            ev.entry.name,
            [*measured, *others],
            settings,
            seeds=seeds,
            overrides=request.overrides,
            source=source,
        )

    def on_piece(piece: dict[str, Any]) -> None:
        measured.append(piece)
        try:
            _write_json(str(out), combined())
        except (ZooError, KeyError) as error:  # new pieces beside published ones of an older protocol: wait for more
            print(f"zoo: the partial result is not written yet ({error})", file=sys.stderr)
        state = "cached" if piece.get("cached") else f"{piece['seconds']:.0f} s"
        print(f"zoo: {piece['arm']} seed {piece['seed']}: {_short(piece['scores'])} ({state})", file=sys.stderr)

    started = time.perf_counter()
    measure(ev.entry.name, request, on_piece)
    result = combined()
    _write_json(str(out), result)
    if result["claims"]:
        print(claims_table(result))
    if args.verify and record is not None:
        try:
            print(verify_table(result_of(ev, record), measured))
        except (ZooError, KeyError) as error:  # the card's pieces predate a change of the protocol's metrics
            print(f"zoo: the card's pieces make no result with today's protocol ({error}): nothing to verify against")
    print(f"zoo: {len(measured)} pieces in {time.perf_counter() - started:.0f} s; wrote {out}", file=sys.stderr)
    if args.card:
        keys = {(p["arm"], str(p["seed"])) for p in measured}
        others = [
            p
            for p in (record["pieces"] if reuse else [])
            if (p["arm"], str(p["seed"])) not in keys and str(p["seed"]) in map(str, seeds)
        ]
        new = pieces_record(ev, [*measured, *others], settings, seeds, source)
        for folder in write_card_files(ev, new):
            print(f"updated {folder}", file=sys.stderr)
    return 0


def _source(request: Request, reuse: bool) -> str:
    rest = "; the other arms: the published pieces" if reuse else ""
    if request.weights is not None:
        return f"method scored from the local folder {request.weights}{rest}"
    if request.retrain:
        return "every measured arm retrained from its recipe"
    return "published checkpoints for the published seed with default settings; other runs trained" + rest


def _short(scores: dict[str, float], limit: int = 4) -> str:
    items = [f"{k}={v:.4g}" for k, v in list(scores.items())[:limit]]
    return ", ".join(items) + (", ..." if len(scores) > limit else "")


def _write_json(path: str | None, result: dict[str, Any]) -> None:
    if not path:
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.partial")
    temporary.write_text(json.dumps(result, indent=2, allow_nan=False) + "\n")
    temporary.replace(target)
