"""Lightning callbacks shared by the recipes."""

from __future__ import annotations

import datetime
import logging
import os
import platform
import time
from pathlib import Path

import lightning.pytorch as pl
import torch

from zoo._run import RunRecord

logger = logging.getLogger("zoo.callbacks")


class ExportPretrained(pl.Callback):
    """At the end of ``fit``, write the module as a Hub folder (config.json + model.safetensors).

    The folder records how it was made under ``config.json["metadata"]["training"]``: the recipe, the
    command line, the fully resolved config (recipe plus command-line overrides), the seed, the wall time
    of the whole ``zoo fit`` command (from process start, so data preparation counts), the step count, the
    zoo version, the git commit of the zoo's checkout (when it runs from one) and the library versions.
    Copy it into ``hub_cards/<name>`` with ``zoo pin <name> --from <folder>``.

    Args:
        dirpath: Destination; relative paths are under the run's folder ``trainer.log_dir``
            (``runs/<name>/version_N`` with the recipes' CSVLogger, so a later run never overwrites an
            earlier run's export; ``<default_root_dir>/run-<time>`` without a logger).
            Default: ``<log_dir>/pretrained``, and ``<default_root_dir>/pretrained`` becomes a link to the
            latest *finished* export: a ``fast_dev_run`` exports nothing, and a fit that was interrupted, trained
            with ``limit_train_batches`` or ended short of its epochs or steps exports into its own folder
            without moving the link.
    """

    def __init__(self, dirpath: str | None = None) -> None:
        self.dirpath = dirpath
        self._fit_start: float | None = None
        #: The command's record (ZooCLI hands it over); exports and skipped exports are noted there.
        self.record = RunRecord(started=None)
        #: The folder of the last export (None before one).
        self.last_export: Path | None = None

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._fit_start = time.perf_counter()

    def export_dir(self, trainer: pl.Trainer) -> Path:
        """Where this fit exports: ``dirpath``, else ``<log_dir>/pretrained`` of a versioned run, else a folder
        of its own (``<default_root_dir>/run-<time>/pretrained``), never the latest-export link."""
        if self.dirpath is not None:
            path = Path(self.dirpath)
            return path if path.is_absolute() else Path(trainer.log_dir or trainer.default_root_dir) / path
        log_dir = Path(trainer.log_dir or trainer.default_root_dir)
        if log_dir.resolve() == Path(trainer.default_root_dir).resolve():  # no versioned logger
            log_dir = log_dir / f"run-{time.strftime('%Y%m%d-%H%M%S')}"
        return log_dir / "pretrained"

    @staticmethod
    def unfinished(trainer: pl.Trainer) -> str | None:
        """Why a fit's weights are not a finished recipe run (None when they are)."""
        if trainer.fast_dev_run:
            return "a fast_dev_run trains a few batches only"
        if trainer.interrupted:
            return "the fit was interrupted"
        if trainer.limit_train_batches not in (1.0, None):
            return f"limit_train_batches={trainer.limit_train_batches} trained on part of the data"
        if trainer.max_steps and trainer.max_steps > 0:
            reached = trainer.global_step >= trainer.max_steps
        else:
            reached = trainer.max_epochs is None or trainer.current_epoch >= trainer.max_epochs
        if not reached and not trainer.should_stop:
            return "the fit stopped before its configured epochs or steps"
        return None

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Under DDP trainer.log_dir is a collective (rank 0 broadcasts it): every rank must ask, or rank 0 hangs.
        unfinished = self.unfinished(trainer)
        folder = None if trainer.fast_dev_run else self.export_dir(trainer)
        if not trainer.is_global_zero:
            return
        if folder is None:
            self.record.skipped.append(unfinished)
            return
        from zoo._serialization import git_commit, save_pretrained
        from zoo._version import __version__

        now = time.perf_counter()
        start = self.record.started if self.record.started is not None else self._fit_start
        training = {
            "recipe": self.record.configs[0] if self.record.configs else None,
            "seed": int(os.environ["PL_GLOBAL_SEED"]) if "PL_GLOBAL_SEED" in os.environ else None,
            "wall_time_s": round(now - start, 1) if start is not None else None,
            "fit_time_s": round(now - self._fit_start, 1) if self._fit_start is not None else None,
            "global_step": trainer.global_step,
            "epochs": trainer.current_epoch,
            "accelerator": type(trainer.accelerator).__name__.replace("Accelerator", "").lower(),
            "cpu_threads": torch.get_num_threads(),
            "zoo": __version__,
            "git": git_commit(),
            "torch": torch.__version__,
            "lightning": pl.__version__,
            "python": platform.python_version(),
            "date": datetime.date.today().isoformat(),
            "command": self.record.command,
            "config": self.record.config,
        }
        if unfinished:
            training["unfinished"] = unfinished
        self.last_export = save_pretrained(pl_module, folder, training=training)
        self.record.exports.append(self.last_export)
        if unfinished:
            self.record.skipped.append(f"{unfinished}; {runs_link(trainer)} still names the last finished export")
        elif self.dirpath is None:
            self._link_latest(trainer, self.last_export)

    @staticmethod
    def _link_latest(trainer: pl.Trainer, export: Path) -> None:
        """Point ``<default_root_dir>/pretrained`` at this run's export, once it is complete.

        Each run exports into its own ``version_N/pretrained``; the link keeps ``runs/<name>/pretrained``
        (what ``zoo pin --from`` and two-stage recipes name) at the latest finished run. A run killed
        before its export leaves the link where it was. A real folder in the link's place (the export of a
        run without a logger, e.g. ``--trainer.fast_dev_run``) is moved aside to ``pretrained-<its time>``,
        so that the link never keeps naming a stale export.
        """
        link = runs_link(trainer)
        if link.resolve() == export.resolve():
            return
        if link.exists() and not link.is_symlink():
            stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(link.stat().st_mtime))
            kept = link.with_name(f"pretrained-{stamp}")
            if kept.exists():
                kept = link.with_name(f"pretrained-{stamp}-{os.getpid()}")
            link.rename(kept)
            logger.warning("%s was a folder from an earlier run; moved it to %s and linked %s", link, kept, export)
        temporary = link.with_name(f".pretrained-{os.getpid()}")
        try:
            temporary.unlink(missing_ok=True)
            temporary.symlink_to(os.path.relpath(export, link.parent), target_is_directory=True)
            os.replace(temporary, link)
        except OSError as error:  # e.g. no symlinks on this file system
            logger.warning("could not link %s to %s (%s)", link, export, error)


def runs_link(trainer: pl.Trainer) -> Path:
    """``<default_root_dir>/pretrained``: the link to the latest finished export of a recipe."""
    return Path(trainer.default_root_dir) / "pretrained"
