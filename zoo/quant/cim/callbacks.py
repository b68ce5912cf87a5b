"""Lightning callbacks for CIM training (the only part of ``zoo.quant.cim`` that imports Lightning)."""

from __future__ import annotations

import lightning.pytorch as pl

from zoo.quant.cim.clipping import clip_weights_
from zoo.quant.cim.config import WeightClip


class CIMWeightClipping(pl.Callback):
    """Clip CIM layer weights after every optimizer step, so any optimizer from a recipe can be used.

    Args:
        clip: Clipping for every CIM layer; None uses each layer's ``CIMConfig.clip``.
    """

    def __init__(self, clip: WeightClip | None = None) -> None:
        self.clip = clip

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs, batch, batch_idx) -> None:
        clip_weights_(pl_module, self.clip)
