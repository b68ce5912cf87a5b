"""Lightning callbacks shared by the recipes."""

from __future__ import annotations

import datetime
import os
import platform
import time
from pathlib import Path

import lightning.pytorch as pl
import torch

from zoo._run import RUN_INFO


class ExportPretrained(pl.Callback):
    """At the end of ``fit``, write the module as a Hub folder (config.json + model.safetensors).

    The folder records how it was made under ``config.json["metadata"]["training"]``: the recipe,
    the seed, the wall time of the whole ``zoo fit`` command (from process start, so data
    preparation counts), the step count and the library versions. Copy it into ``hub_cards/<name>``
    with ``zoo pin <name> --from <dirpath>``.

    Args:
        dirpath: Destination; relative paths are under ``trainer.default_root_dir``.
            Default: ``<default_root_dir>/pretrained``.
    """

    def __init__(self, dirpath: str | None = None) -> None:
        self.dirpath = dirpath
        self._fit_start: float | None = None

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._fit_start = time.perf_counter()

    def export_dir(self, trainer: pl.Trainer) -> Path:
        path = Path(self.dirpath or "pretrained")
        return path if path.is_absolute() else Path(trainer.default_root_dir) / path

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        from zoo import save_pretrained

        now = time.perf_counter()
        start = RUN_INFO["start"] if RUN_INFO["start"] is not None else self._fit_start
        training = {
            "recipe": RUN_INFO["configs"][0] if RUN_INFO["configs"] else None,
            "seed": int(os.environ["PL_GLOBAL_SEED"]) if "PL_GLOBAL_SEED" in os.environ else None,
            "wall_time_s": round(now - start, 1) if start is not None else None,
            "fit_time_s": round(now - self._fit_start, 1) if self._fit_start is not None else None,
            "global_step": trainer.global_step,
            "epochs": trainer.current_epoch,
            "accelerator": type(trainer.accelerator).__name__.replace("Accelerator", "").lower(),
            "cpu_threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "lightning": pl.__version__,
            "python": platform.python_version(),
            "date": datetime.date.today().isoformat(),
        }
        save_pretrained(pl_module, self.export_dir(trainer), training=training)
