"""The ``zoo`` command (also ``python -m zoo``).

``fit|validate|test|predict -c RECIPE`` run through :class:`ZooCLI`, a LightningCLI in subclass mode
for both model and data, so a recipe names any LightningModule / LightningDataModule by class path.
The other commands work on the registry: ``list``, ``info``, ``eval``, ``card``, ``pin``,
``publish`` and ``demo``. Registry commands do not import Lightning or torch unless they must.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from zoo._errors import RecipeError, ZooError
from zoo._lightning_cli import ZooCLI

LIGHTNING_COMMANDS = ("fit", "validate", "test", "predict")


def run_lightning(argv: list[str]) -> int:
    """Run ``fit|validate|test|predict`` through ZooCLI, turning parser errors into one line.

    ``-c`` takes a recipe path or a packaged recipe's name (``dwp/standard``). ``--weights DIR`` (an
    exported folder) and ``--untrained`` are the zoo's own options; they are taken out before LightningCLI
    parses the rest. After ``fit``, prints where the weights, the logs and the checkpoint went.
    """
    from jsonargparse import ArgumentError

    from zoo._recipes import recipe_label, resolve_recipe
    from zoo._run import RUN_INFO

    argv, weights, untrained = _zoo_options(argv)
    if untrained and argv[0] == "fit":
        raise ZooError("--untrained is for validate, test and predict; fit trains the model")
    if weights is not None and not Path(weights).is_dir():
        raise ZooError(f"--weights {weights} is not a folder; pass the folder `zoo fit` exported (config.json + ...)")
    argv, RUN_INFO["configs"] = _resolve_configs(argv, resolve_recipe, recipe_label)
    RUN_INFO["command"] = ["zoo", *argv]
    saved_argv = sys.argv
    sys.argv = [saved_argv[0], *argv]  # LightningCLI reads sys.argv itself when args is None
    try:
        cli = ZooCLI(args=None, weights=weights, untrained=untrained)
    except ArgumentError as error:
        recipe = RUN_INFO["configs"][0] if RUN_INFO["configs"] else "the command line"
        raise RecipeError(f"{recipe}: {_summarise(error)}; see `zoo {argv[0]} --help` or add --print_config") from None
    finally:
        sys.argv = saved_argv
    _print_outputs(cli, argv[0], RUN_INFO["configs"][0] if RUN_INFO["configs"] else "RECIPE")
    _close_process_group()
    return 0


def _close_process_group() -> None:
    """Destroy the process group a multi-process run (DDP) left open: Lightning does not, and gloo's threads
    left running at interpreter exit abort the process ("terminate called without an active exception")."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _zoo_options(argv: list[str]) -> tuple[list[str], str | None, bool]:
    """Take ``--weights DIR`` / ``--weights=DIR`` and ``--untrained`` out of a Lightning command line."""
    rest, weights, untrained = [], None, False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--weights":
            if i + 1 >= len(argv):
                raise ZooError("--weights needs a folder: --weights runs/<name>/version_N/pretrained")
            weights, i = argv[i + 1], i + 2
            continue
        if arg.startswith("--weights="):
            weights = arg.split("=", 1)[1]
        elif arg == "--untrained":
            untrained = True
        else:
            rest.append(arg)
        i += 1
    return rest, weights, untrained


def _resolve_configs(argv: list[str], resolve, label) -> tuple[list[str], list[str]]:
    """Replace each ``-c``/``--config`` value by the recipe file it names; also return how to record them."""
    out, labels = list(argv), []
    for i, arg in enumerate(argv):
        if arg in ("-c", "--config") and i + 1 < len(argv):
            resolved = resolve(argv[i + 1])
            out[i + 1] = resolved
            labels.append(label(argv[i + 1], resolved))
        elif arg.startswith("--config="):
            value = arg.split("=", 1)[1]
            resolved = resolve(value)
            out[i] = f"--config={resolved}"
            labels.append(label(value, resolved))
    return out, labels


def _print_outputs(cli, subcommand: str, recipe: str) -> None:
    """Say where a run left its weights, logs and checkpoint, and how to use them."""
    trainer = getattr(cli, "trainer", None)
    if trainer is None or getattr(trainer, "fast_dev_run", False):
        return
    from zoo.callbacks import ExportPretrained

    lines = []
    for callback in trainer.callbacks:
        if isinstance(callback, ExportPretrained) and callback.last_export is not None:
            folder = callback.last_export
            lines.append(f"weights     {folder}  (zoo.load({str(folder)!r}); zoo test -c {recipe} --weights {folder})")
    if trainer.loggers:
        lines.append(f"logs        {trainer.log_dir}")
    checkpoint = getattr(trainer, "checkpoint_callback", None)
    saved = checkpoint and (checkpoint.last_model_path or checkpoint.best_model_path)
    if subcommand == "fit" and saved:
        lines.append(f"checkpoint  {saved}  (resume: zoo fit -c {recipe} --ckpt_path {saved})")
    for line in lines:
        print(f"zoo: {line}")


_NOISE = (
    "Subtypes:",
    "Given value type:",
    "Errors:",
    "Parser key",
    "Does not validate",
    "- Expected a <class 'NoneType'>",
)


def _summarise(error: Exception) -> str:
    """One line from jsonargparse's nested message: the dotted key and the specific complaints."""
    import re

    text = str(error)
    keys = re.findall(r'Parser key "([^"]+)"', text)
    key = ".init_args.".join(keys[:2]) + "".join(f".{k}" for k in keys[2:]) if keys else ""
    details = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(_NOISE) or "NestedArg(" in line:
            continue
        details.append(line.lstrip("- ").rstrip(":"))
    message = ": ".join(details) or type(error).__name__
    return f"{key}: {message}" if key else message


# ---------------------------------------------------------------------------------------- registry commands


def cmd_list(args: argparse.Namespace) -> int:
    import zoo

    names = zoo.list_models(args.pattern, pretrained=True if args.pretrained else None)
    if not names:
        print(
            "The zoo has no registered models yet." if args.pattern is None else f"No model matches {args.pattern!r}."
        )
        return 0
    rows = [("name", "paper", "params", "pretrained", "headline metric")]
    for name in names:
        entry = zoo.get_entry(name)
        cfg, metrics = entry.pretrained_cfg, entry.metrics
        metric = ""
        if cfg.headline and cfg.headline in metrics:
            metric = f"{cfg.headline}={metrics[cfg.headline]:.4g}"
        params = _human(cfg.num_params) if cfg.num_params else "-"
        rows.append(
            (name, f"{cfg.paper.title[:48]} ({cfg.paper.label})", params, "yes" if cfg.has_weights else "no", metric)
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for i, row in enumerate(rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * width for width in widths))
    return 0


def _human(count: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f}{unit}"
    return str(count)


def cmd_info(args: argparse.Namespace) -> int:
    import zoo

    print(json.dumps(zoo.model_info(args.name), indent=2))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from zoo._eval import claims_table, describe_settings, run_eval, write_cards

    if args.settings:
        print(describe_settings(args.name))
        return 0
    result = run_eval(args.name, seeds=args.seeds, retrain=args.retrain, overrides=args.set, weights=args.weights)
    text = json.dumps(result, indent=2, allow_nan=False)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(text + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    else:
        print(text)
    print(claims_table(result), file=sys.stderr)
    if args.card:
        if args.set or args.weights:
            raise ZooError("--card publishes the protocol's own numbers: drop --set and --weights to write cards")
        for folder in write_cards(result):
            print(f"updated {folder}", file=sys.stderr)
    return 0


def cmd_card(args: argparse.Namespace) -> int:
    from zoo._cards import write_card

    print(write_card(args.name, metrics_path=args.metrics))
    return 0


def cmd_pin(args: argparse.Namespace) -> int:
    import zoo
    from zoo._hub import pinned_files
    from zoo._serialization import read_config

    entry = zoo.get_entry(args.name)
    folder = entry.mirror_dir
    if args.source:
        source = Path(args.source)
        read_config(source)  # fails with a clear message if this is not an exported folder
        incoming = {path.name for path in source.iterdir() if path.is_file()}
        current = pinned_files(folder) if folder.is_dir() else {}
        changed = sorted(name for name, digest in pinned_files(source).items() if current.get(name, digest) != digest)
        if changed and not args.force:
            raise ZooError(
                f"pass --force to replace {', '.join(changed)} of the shipped mirror {folder} (the old files go to "
                f"{_backup_root()}/): it holds the published {entry.name}, which --from {source} would overwrite"
            )
        if args.write:  # refuse before copying anything: the mirror and the registry change together or not at all
            write_pins(entry.pretrained_cfg.sha256, {**current, **pinned_files(source)}, _registry_sources(), dry=True)
        if changed:
            backup = _backup_mirror(folder, entry.name, incoming)
            print(f"zoo: the previous files of {folder} are in {backup}", file=sys.stderr)
        folder.mkdir(parents=True, exist_ok=True)
        for path in source.iterdir():
            if path.is_file():
                shutil.copy2(path, folder / path.name)
    pins = pinned_files(folder)
    if args.write:
        for source_file, names in write_pins(entry.pretrained_cfg.sha256, pins, _registry_sources()).items():
            print(f"zoo: wrote the new pins of {', '.join(names)} into {source_file}", file=sys.stderr)
    print(json.dumps({"sha256": pins}, indent=2))
    return 0


def _registry_sources() -> list[Path]:
    """The zoo's Python files: where a registry entry spells its pins."""
    return sorted(Path(__file__).parent.rglob("*.py"))


def write_pins(
    old: Mapping[str, str], new: Mapping[str, str], sources: Iterable[Path], dry: bool = False
) -> dict[Path, list[str]]:
    """Replace each changed pin of an entry in the one source file that spells its old digest.

    Works whatever shape a paper's pin table has (a dict per entry, a ``_PINS`` table by tag): a sha256 literal
    names one file of one entry, so it is replaced where it is written, and nothing else is touched.

    Args:
        old: The entry's registered pins (``entry.sha256``), by file name.
        new: The mirror's pins after the copy (``zoo._hub.pinned_files``), by file name.
        sources: The Python files to search for the old digests.
        dry: Check only: raise where a write would be refused, write nothing.

    Returns:
        The file names rewritten, by source file (empty when nothing changed).

    Raises:
        ZooError: If the files differ from the pinned ones (add or drop a pin by hand), or an old digest is
            spelled in no source file or in more than one place; nothing is written then.
    """
    if set(new) != set(old):
        added, dropped = sorted(set(new) - set(old)), sorted(set(old) - set(new))
        raise ZooError(
            f"the mirror's files differ from the entry's pins (new: {added or 'none'}, gone: {dropped or 'none'}): "
            "add or remove those pins in the registry module by hand, then run zoo pin --write again"
        )
    changed = sorted(name for name in new if new[name] != old[name])
    texts = {path: path.read_text() for path in sources}
    edits: dict[Path, list[str]] = {}
    for name in changed:
        places = [(path, text.count(f'"{old[name]}"')) for path, text in texts.items() if old[name] in text]
        if len(places) != 1 or places[0][1] != 1:
            where = ", ".join(f"{path} ({count}x)" for path, count in places) or "no source file"
            raise ZooError(
                f"the old pin of {name} ({old[name][:12]}...) is spelled in {where}; --write needs it quoted exactly "
                "once: write the new digest by hand"
            )
        path = places[0][0]
        texts[path] = texts[path].replace(f'"{old[name]}"', f'"{new[name]}"')
        edits.setdefault(path, []).append(name)
    for path in edits if not dry else ():
        path.write_text(texts[path])
    return edits


def _backup_root() -> Path:
    return Path("runs") / "pin-backups"


def _backup_mirror(folder: Path, name: str, names: set[str]) -> Path:
    """Copy the files of ``folder`` that a pin replaces to ``runs/pin-backups/<name>-<time>/``."""
    backup = _backup_root() / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    backup.mkdir(parents=True, exist_ok=True)
    for path in folder.iterdir():
        if path.is_file() and path.name in names:
            shutil.copy2(path, backup / path.name)
    return backup.resolve()


def cmd_publish(args: argparse.Namespace) -> int:
    from zoo._hub import publish

    commit = publish(args.name, args.repo_id, tag=args.tag, token=args.token, private=args.private)
    print(commit)
    print(f"pin it in the registry: revision={commit!r}", file=sys.stderr)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    import zoo
    from zoo._registry import resolve_name

    cmd_list(argparse.Namespace(pattern=None, pretrained=False))
    names = zoo.list_models(pretrained=True)
    if not names:
        print(
            "\nNo paper has landed with pretrained weights yet, so there is nothing to evaluate: "
            "the registry above is the demo."
        )
        return 0
    if args.name:
        name = resolve_name(args.name)
    else:
        name = resolve_name("fedgr") if "fedgr" in {zoo.get_entry(n).paper for n in names} else names[0]
    from zoo._cards import load_metrics
    from zoo._eval import score_pretrained

    print(f"\nzoo.load({name!r}, pretrained=True), then scored offline:")
    started = time.perf_counter()
    scores = score_pretrained(name)
    entry = zoo.get_entry(name)
    card = entry.metrics
    has_card = (entry.mirror_dir / "metrics.json").is_file()
    seeds = load_metrics(entry.mirror_dir).get("seeds", []) if has_card else []
    # A card may average several seeds while the checkpoint is one of them: say which number is which.
    label = f"card, mean over seeds {seeds}" if len(seeds) > 1 else "card"
    for key, value in scores.items():
        published = f" ({label}: {card[key]:.4g})" if key in card else ""
        print(f"  {key} = {value:.4g}{published}")
    print(f"  in {time.perf_counter() - started:.1f} s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zoo",
        description="icml26-zoo: ICML 2026 papers as Lightning modules with pretrained checkpoints. "
        "Training: zoo {fit,validate,test,predict} -c RECIPE (LightningCLI; see `zoo fit --help`).",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars (for piped output)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("list", help="table of registered models")
    p.add_argument("pattern", nargs="?", default=None, help="shell pattern on the name or paper, e.g. 'fedgr*'")
    p.add_argument("--pretrained", action="store_true", help="only entries with published weights")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("info", help="everything the registry knows about a model (JSON)")
    p.add_argument("name")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("eval", help="measure the paper's claim: the method and its baselines side by side")
    p.add_argument("name")
    p.add_argument("--json", metavar="PATH", help="write the result here (default: stdout)")
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default: the protocol's, at least 3)")
    p.add_argument(
        "--retrain", action="store_true", help="retrain every arm from scratch instead of using published weights"
    )
    p.add_argument(
        "--card", action="store_true", help="also write metrics.json into hub_cards/ and re-render the cards"
    )
    p.add_argument(
        "--set",
        metavar="KEY=VALUE",
        nargs="+",
        action="extend",
        default=[],
        help="override a setting of the evaluation (list them with --settings)",
    )
    p.add_argument("--settings", action="store_true", help="list the evaluation's settings with defaults and exit")
    p.add_argument("--weights", metavar="DIR", default=None, help="score this exported folder as the method's arm")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("card", help="re-render hub_cards/NAME/README.md and its figure from metrics.json")
    p.add_argument("name")
    p.add_argument("--metrics", default=None, help="eval JSON to render from (default: hub_cards/NAME/metrics.json)")
    p.set_defaults(func=cmd_card)

    p = sub.add_parser("pin", help="print the sha256 pins of hub_cards/NAME (optionally copying an exported folder in)")
    p.add_argument("name")
    p.add_argument("--from", dest="source", default=None, help="folder written by ExportPretrained to copy in first")
    p.add_argument(
        "--force", action="store_true", help="replace published files (the old ones are kept in runs/pin-backups/)"
    )
    p.add_argument(
        "--write", action="store_true", help="also write the changed sha256 pins into the registry module's source"
    )
    p.set_defaults(func=cmd_pin)

    p = sub.add_parser("publish", help="upload hub_cards/NAME to a Hub repo, tag it, print the commit to pin")
    p.add_argument("name")
    p.add_argument("--repo-id", required=True, help="ORG/REPO")
    p.add_argument("--tag", default=None, help="tag for the commit (default: the registry's revision)")
    p.add_argument("--token", default=None, help="Hub token (default: the logged-in one)")
    p.add_argument("--private", action="store_true")
    p.set_defaults(func=cmd_publish)

    p = sub.add_parser("demo", help="list the zoo and score a pretrained model offline")
    p.add_argument("name", nargs="?", default=None, help="the model to score (default: fedgr, the flagship)")
    p.set_defaults(func=cmd_demo)
    return parser


def _set_quiet() -> None:
    os.environ["ZOO_QUIET"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"


def _log_to_stderr() -> None:
    """Show the zoo's own INFO messages (e.g. "using the offline mirror") as ``zoo: ...`` lines."""
    logger = logging.getLogger("zoo")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("zoo: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``zoo`` console script."""
    from zoo._run import mark_start

    mark_start()
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--quiet" in argv:
        argv.remove("--quiet")
        _set_quiet()
        if argv and argv[0] in LIGHTNING_COMMANDS:
            argv.append("--trainer.enable_progress_bar=false")
    _log_to_stderr()
    # Like `python -m`, make the working directory importable, so recipes can name the user's own modules.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        if argv and argv[0] in LIGHTNING_COMMANDS:
            return run_lightning(argv)
        args = build_parser().parse_args(argv)
        if args.quiet:
            _set_quiet()
        if not getattr(args, "func", None):
            build_parser().print_help()
            return 0
        return args.func(args)
    except ZooError as error:
        print(f"zoo: error: {error}", file=sys.stderr)
        return 2


# ---------------------------------------------------------------------------------- the `lightning` command

LIGHTNING_USAGE = (
    "usage: lightning {fit,validate,test,predict} -c RECIPE [--trainer.* ...]   (the zoo's LightningCLI, as "
    "`zoo fit`); other subcommands go to lightning-sdk (pip install lightning-sdk)"
)


def _lightning_sdk_entry_point():
    """The ``lightning`` console script of lightning-sdk, if that is installed (else None)."""
    from importlib.metadata import entry_points

    for entry_point in entry_points(group="console_scripts", name="lightning"):
        dist = (entry_point.dist.name if entry_point.dist else "").lower().replace("_", "-")
        if dist == "lightning-sdk":
            return entry_point
    return None


def lightning_main(argv: list[str] | None = None) -> int:
    """Entry point of the ``lightning`` console script.

    ``lightning fit|validate|test|predict -c RECIPE`` runs through the zoo's CLI (what LightningCLI users
    type); every other subcommand goes to lightning-sdk's own ``lightning`` when that is installed, so the
    two coexist.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in LIGHTNING_COMMANDS:
        return main(argv)
    sdk = _lightning_sdk_entry_point()
    if sdk is not None:
        sys.argv = ["lightning", *argv]
        result = sdk.load()()
        return result if isinstance(result, int) else 0
    if not argv or argv[0] in ("-h", "--help"):
        print(LIGHTNING_USAGE)
        return 0
    print(
        f"lightning: error: `lightning {argv[0]}` is Lightning AI's command, from lightning-sdk, which is not "
        "installed: pip install lightning-sdk (this `lightning` runs fit, validate, test and predict)",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
