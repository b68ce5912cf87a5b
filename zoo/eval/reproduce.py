"""``zoo reproduce NAME``: everything behind a paper's cards as resumable steps.

The steps are the paper's own preparation steps (building data, a tokenizer: ``Protocol.steps`` of stage
``prepare``), then for every published entry with a recipe a fit at the published seed and a pin of its export
into the card (``zoo pin --from ... --force --write``), the paper's tuning (stage ``tune``), the evaluation of
every piece (``zoo eval NAME --verify --card``, which resumes from the evaluation cache) and the README table.
Each step runs as its own command; finished steps are recorded in ``runs/reproduce/<paper>.json`` with their
times, so a second call resumes at the first unfinished one. ``--dry-run`` prints the plan with the time each
step took last (from that record, else from the card: a fit's recorded wall time, the evaluation's total).
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from zoo._errors import ZooError
from zoo.eval.engine import Evaluation, evaluation
from zoo.eval.protocol import Step
from zoo.eval.published import read_published

STATE_ROOT = Path("runs") / "reproduce"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``zoo reproduce``."""
    p.add_argument("name", help="any entry of the paper (its evaluation's steps)")
    p.add_argument("--dry-run", action="store_true", help="print the steps and their last times, run nothing")
    p.add_argument("--only", metavar="STEP", help="run this step only")
    p.add_argument("--from", dest="start", metavar="STEP", help="run from this step on, finished or not")
    p.add_argument("--restart", action="store_true", help="forget the finished steps and run them all")
    p.add_argument("--workers", type=int, default=2, help="processes of the eval step (default 2)")


def plan(ev: Evaluation, workers: int = 2) -> list[Step]:
    """The steps that reproduce an evaluation's cards, in order."""
    protocol = ev.protocol
    steps = [step for step in protocol.steps if step.stage == "prepare"]
    for entry in ev.entries.values():
        cfg = entry.pretrained_cfg
        if not (cfg.has_weights and cfg.recipe):
            continue
        seed_args = tuple(f"--{key}={protocol.published_seed}" for key in protocol.seed_args)
        steps.append(Step(f"fit:{entry.name}", ("zoo", "fit", "-c", cfg.recipe, *seed_args), f"train {entry.name}"))
        export = f"{_root_dir(cfg.recipe, entry.name)}/pretrained"
        pin = ("zoo", "pin", entry.name, "--from", export, "--force", "--write")
        steps.append(Step(f"pin:{entry.name}", pin, f"copy the export into hub_cards/{entry.name} and pin it"))
    steps += [step for step in protocol.steps if step.stage == "tune"]
    name = ev.entry.name
    measure = ("zoo", "eval", name, "--verify", "--card", "--workers", str(workers))
    steps.append(Step("eval", measure, "measure every piece, compare with the card, publish metrics and pieces"))
    steps.append(Step("readme", ("python", "tools/readme_table.py"), "regenerate README.md's models table"))
    return steps


def _root_dir(recipe: str, name: str) -> str:
    """The recipe's ``trainer.default_root_dir`` (where its latest export is linked), default ``runs/<name>``."""
    import yaml

    from zoo._recipes import resolve_recipe

    config = yaml.safe_load(Path(resolve_recipe(recipe)).read_text()) or {}
    return str((config.get("trainer") or {}).get("default_root_dir") or f"runs/{name}")


def last_seconds(ev: Evaluation, step: Step, state: dict[str, Any]) -> tuple[float | None, str]:
    """How long a step took last, and where that number comes from."""
    if step.name in state:
        return state[step.name]["seconds"], "this checkout's last run"
    entries = {entry.name: entry for entry in ev.entries.values()}
    if step.name.startswith("fit:") and step.name[4:] in entries:
        from zoo._serialization import read_config

        folder = entries[step.name[4:]].mirror_dir
        try:
            seconds = read_config(folder).get("metadata", {}).get("training", {}).get("wall_time_s")
        except ZooError:
            seconds = None
        return seconds, "the published export's wall time"
    if step.name == "eval":
        try:
            pieces = read_published(ev)["pieces"]
        except ZooError:  # nothing published yet
            pieces = []
        if pieces and all(piece.get("seconds") is not None for piece in pieces):  # carried over untimed: no total
            return sum(piece["seconds"] for piece in pieces), "the sum of the card's measured pieces"
    return None, ""


def _state_path(ev: Evaluation) -> Path:
    return STATE_ROOT / f"{ev.entry.paper}.json"


def _read_state(ev: Evaluation) -> dict[str, Any]:
    path = _state_path(ev)
    return json.loads(path.read_text()) if path.is_file() else {}


def cmd_reproduce(args: argparse.Namespace) -> int:
    ev = evaluation(args.name)
    steps = plan(ev, args.workers)
    names = [step.name for step in steps]
    for option in (args.only, args.start):
        if option and option not in names:
            raise ZooError(f"no step {option!r}; the steps are: {', '.join(names)}")
    state = {} if args.restart else _read_state(ev)
    if args.only:
        chosen = [step for step in steps if step.name == args.only]
    elif args.start:
        chosen = steps[names.index(args.start) :]
    else:
        chosen = [step for step in steps if step.name not in state]
    for step in steps:
        seconds, origin = last_seconds(ev, step, state)
        took = f"{seconds / 60:.1f} min ({origin})" if seconds is not None else "no time recorded"
        mark = "run " if step in chosen else "done"
        print(f"[{mark}] {step.name:<28} last: {took}\n       $ {' '.join(step.argv)}   # {step.help}")
    if args.dry_run:
        return 0
    for step in chosen:
        print(f"zoo reproduce: {step.name}: {' '.join(step.argv)}", file=sys.stderr, flush=True)
        started = time.perf_counter()
        argv = [sys.executable, "-m", "zoo", *step.argv[1:]] if step.argv[0] == "zoo" else list(step.argv)
        argv = [sys.executable, *argv[1:]] if argv[0] == "python" else argv
        code = subprocess.run(argv).returncode
        if code:
            raise ZooError(f"step {step.name} failed (exit {code}); fix it and run `zoo reproduce {args.name}` again")
        state[step.name] = {
            "seconds": round(time.perf_counter() - started, 1),
            "finished": datetime.datetime.now().isoformat(timespec="seconds"),
        }
        _state_path(ev).parent.mkdir(parents=True, exist_ok=True)
        _state_path(ev).write_text(json.dumps(state, indent=2) + "\n")
    return 0
