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
from pathlib import Path

from zoo._errors import RecipeError, ZooError
from zoo._run import RunRecord
from zoo._version import __version__
from zoo.eval.command import add_arguments as eval_arguments
from zoo.eval.reproduce import add_arguments as reproduce_arguments

LIGHTNING_COMMANDS = ("fit", "validate", "test", "predict")


def run_lightning(argv: list[str], record: RunRecord | None = None) -> int:
    """Run ``fit|validate|test|predict`` through ZooCLI, turning parser errors into one line.

    ``-c`` takes a recipe path or a packaged recipe's name (``dwp/standard``). ``--weights DIR`` (an
    exported folder) and ``--untrained`` are the zoo's own options; they are taken out before LightningCLI
    parses the rest. Afterwards prints where the weights (or why none), the logs and the checkpoint went.
    """
    from jsonargparse import ArgumentError

    from zoo._lightning_cli import ZooCLI
    from zoo._recipes import recipe_label, resolve_recipe

    record = record if record is not None else RunRecord()
    argv, weights, untrained = _zoo_options(argv)
    if untrained and argv[0] == "fit":
        raise ZooError("--untrained is for validate, test and predict; fit trains the model")
    if weights is not None and not Path(weights).is_dir():
        raise ZooError(f"--weights {weights} is not a folder; pass the folder `zoo fit` exported (config.json + ...)")
    argv, record.configs = _resolve_configs(argv, resolve_recipe, recipe_label)
    record.command = ["zoo", *argv]
    try:
        cli = ZooCLI(args=argv, weights=weights, untrained=untrained, record=record)
    except ArgumentError as error:
        recipe = record.configs[0] if record.configs else "the command line"
        raise RecipeError(f"{recipe}: {_summarise(error)}; see `zoo {argv[0]} --help` or add --print_config") from None
    _print_outputs(cli, argv[0], record.configs[0] if record.configs else "RECIPE")
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
    """Say where a run left its weights (or why it made none), logs and checkpoint, and how to use them."""
    trainer = getattr(cli, "trainer", None)
    if trainer is None:
        return
    lines = []
    for folder in cli.record.exports:
        lines.append(f"weights     {folder}  (zoo.load({str(folder)!r}); zoo test -c {recipe} --weights {folder})")
    lines += [f"weights     none: {reason}" for reason in cli.record.skipped]
    if trainer.loggers and not getattr(trainer, "fast_dev_run", False):
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
    from zoo.eval.command import cmd_eval as run

    return run(args)


def cmd_card(args: argparse.Namespace) -> int:
    from zoo._cards import write_card
    from zoo.eval.engine import evaluation
    from zoo.eval.published import figure_of

    print(write_card(args.name, metrics_path=args.metrics, figure=figure_of(evaluation(args.name).protocol)))
    return 0


def cmd_pin(args: argparse.Namespace) -> int:
    import zoo
    from zoo._hub import pinned_files
    from zoo._pins import write_pins
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
        if changed:
            backup = _backup_mirror(folder, entry.name, incoming)
            print(f"zoo: the previous files of {folder} are in {backup}", file=sys.stderr)
        folder.mkdir(parents=True, exist_ok=True)
        for path in source.iterdir():
            if path.is_file():
                shutil.copy2(path, folder / path.name)
    pins = pinned_files(folder)
    if args.write and pins != dict(entry.pretrained_cfg.sha256):
        print(f"zoo: wrote the pins of {entry.name} into {write_pins(entry.name, pins)}", file=sys.stderr)
    print(json.dumps({"sha256": pins}, indent=2))
    return 0


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


def cmd_download(args: argparse.Namespace) -> int:
    import zoo
    from zoo._hub import download

    for name in args.names:
        print(f"{zoo.get_entry(name).name}: {download(zoo.get_entry(name), to=args.to)}")
    if args.to:
        print(f"load offline with ZOO_MIRROR={args.to}", file=sys.stderr)
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    from zoo._hub import publish

    commit = publish(args.name, args.repo_id, tag=args.tag, token=args.token, private=args.private)
    print(commit)
    print(f"pin it in the registry: revision={commit!r}", file=sys.stderr)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from zoo._demo import demo

    return demo(args.name, table=lambda: cmd_list(argparse.Namespace(pattern=None, pretrained=False)))


def cmd_reproduce(args: argparse.Namespace) -> int:
    from zoo.eval.reproduce import cmd_reproduce as run

    return run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zoo",
        description="icml26-zoo: ICML 2026 papers as Lightning modules with pretrained checkpoints. "
        "Training: zoo {fit,validate,test,predict} -c RECIPE (LightningCLI; see `zoo fit --help`).",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars (for piped output)")
    parser.add_argument("--version", action="version", version=f"icml26-zoo {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("list", help="table of registered models")
    p.add_argument("pattern", nargs="?", default=None, help="shell pattern on the name or paper, e.g. 'fedgr*'")
    p.add_argument("--pretrained", action="store_true", help="only entries with published weights")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("info", help="everything the registry knows about a model (JSON)")
    p.add_argument("name")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("eval", help="the paper's claim: a card's published pieces, or re-measured ones beside them")
    eval_arguments(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser(
        "reproduce",
        help="fit, tune, evaluate and render a paper's cards as resumable steps",
        description="The steps, in order: the paper's preparation steps (data builds, tuning its recipes read); "
        "fit:<entry> (zoo fit of each published entry's recipe at the published seed) and pin:<entry> (zoo pin "
        "--from its export --force --write); the paper's tuning steps; eval (zoo eval NAME --verify --card "
        "--workers N: every piece measured, resumable through ZOO_EVAL_CACHE); readme (tools/readme_table.py). "
        "Finished steps are recorded in runs/reproduce/<paper>.json; --dry-run prints the plan with last times.",
    )
    reproduce_arguments(p)
    p.set_defaults(func=cmd_reproduce)

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
    p.add_argument("--write", action="store_true", help="also write the changed sha256 pins into zoo/<paper>/pins.json")
    p.set_defaults(func=cmd_pin)

    p = sub.add_parser("download", help="fetch published weights into the HF cache, or copy them into a mirror folder")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.add_argument(
        "--to", metavar="DIR", default=None, help="copy the verified files into DIR/NAME (use: ZOO_MIRROR=DIR)"
    )
    p.set_defaults(func=cmd_download)

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
    record = RunRecord()  # started now: a recipe's wall time counts from the command's start
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
            return run_lightning(argv, record)
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
    except BrokenPipeError:  # `zoo list | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


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
