"""Retrain a generator LM from its recipe inside the current process (``zoo eval aporia --retrain``)."""

from __future__ import annotations

import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def train_generator(name: str, extra_args: tuple[str, ...] = ()):
    """Train the generator entry ``name`` exactly as its recipe does and return the fitted module.

    Args:
        name: Registry name of a generator entry, e.g. ``"aporia.gen_gpt2_s"``.
        extra_args: Further LightningCLI overrides.
    """
    from zoo._errors import ZooError
    from zoo._registry import get_entry
    from zoo._lightning_cli import ZooCLI

    entry = get_entry(name)
    recipe = ROOT / (entry.pretrained_cfg.recipe or "")
    if not recipe.is_file():
        raise ZooError(f"{name}: recipe {recipe} not found; retraining needs a source checkout with recipes/")
    with tempfile.TemporaryDirectory(prefix="aporia-retrain-") as folder:
        cli = ZooCLI(
            args=[
                "-c", str(recipe), *extra_args, f"--trainer.default_root_dir={folder}", "--trainer.logger=false",
                "--trainer.enable_checkpointing=false", "--trainer.enable_progress_bar=false",
            ],
            run=False,
        )  # fmt: skip
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    return cli.model.eval()
