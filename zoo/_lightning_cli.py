"""The zoo's LightningCLI, in a module of its own so that the harness and papers need not import ``zoo.cli``.

``ZooCLI`` runs in subclass mode for both model and data, so a recipe names any LightningModule /
LightningDataModule by class path. Lightning is imported on first use only.
"""

from __future__ import annotations


def _lightning_cli_class():
    from lightning.pytorch import LightningDataModule, LightningModule
    from lightning.pytorch.cli import LightningCLI

    class ZooCLI(LightningCLI):
        """LightningCLI with subclass mode for model and data, and one-line errors for bad recipes."""

        def __init__(self, args=None, run: bool = True, **kwargs) -> None:
            kwargs.setdefault("save_config_kwargs", {"overwrite": True})
            kwargs.setdefault("parser_kwargs", {"exit_on_error": False})
            super().__init__(
                LightningModule,
                LightningDataModule,
                subclass_mode_model=True,
                subclass_mode_data=True,
                args=args,
                run=run,
                **kwargs,
            )

    return ZooCLI


def ZooCLI(*args, **kwargs):  # noqa: N802 - a factory that reads like the class it builds
    """Build the zoo's LightningCLI (imports Lightning on first use). Arguments as for ``LightningCLI``."""
    return _lightning_cli_class()(*args, **kwargs)
