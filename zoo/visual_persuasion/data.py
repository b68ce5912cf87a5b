"""The DataModule of visual persuasion: base items, validation items and the heads' random-edit training set."""

from __future__ import annotations

import lightning.pytorch as pl
import numpy as np
from torch.utils.data import DataLoader

from zoo.visual_persuasion.editor import ParametricEditor
from zoo.visual_persuasion.heads import training_edits
from zoo.visual_persuasion.images import base_items


class PersuasionDataModule(pl.LightningDataModule):
    """32 test items (8 scikit-image photos x 4 crops), 16 validation items (x 2) and random training edits.

    ``train_dataloader`` yields one item (the fit is one closed-form step); the arrays are attributes.

    Args:
        num_train_edits: Random plausible edits the utility heads are fit on.
        train_crops_per_photo: Training crops per photo (disjoint from the test and validation crops).
        image_size: Side of the square items.
        num_items: Test items used (the first ``num_items``; 32 in the paper's setting).
        ssim_floor: The editor's plausibility floor.
        seed: Seed of the training crops and edits (the test and validation items are fixed).
    """

    def __init__(
        self,
        num_train_edits: int = 2000,
        train_crops_per_photo: int = 12,
        image_size: int = 112,
        num_items: int = 32,
        ssim_floor: float = 0.5,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if num_train_edits < 10:
            raise ValueError(f"num_train_edits must be >= 10, got {num_train_edits}")
        if not 0 <= num_items <= 32:
            raise ValueError(f"num_items must be in [0, 32], got {num_items}")
        self.save_hyperparameters()
        self.train_images: np.ndarray | None = None
        self.train_measurements: np.ndarray | None = None
        self.test_items: np.ndarray | None = None
        self.validation_items: np.ndarray | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.train_images is not None:
            return
        hp = self.hparams
        self.test_items = base_items("test", size=hp.image_size)[: hp.num_items]
        self.validation_items = base_items("validation", size=hp.image_size)
        editor = ParametricEditor(ssim_floor=hp.ssim_floor)
        self.train_images, self.train_measurements = training_edits(
            editor, hp.num_train_edits, hp.train_crops_per_photo, hp.seed, hp.image_size
        )

    def train_dataloader(self) -> DataLoader:
        return DataLoader([0], batch_size=None)

    def val_dataloader(self) -> DataLoader:
        return DataLoader([0], batch_size=None)
