"""FMNISTDataModule: real Fashion-MNIST (Debian package) split into train pool / validation / test.

The 60,000 training images are split once (a fixed permutation, seed 0): 5,000 validation images, 55,000 in the
training pool. The tokenizer and the VAR train on the first ``subset`` images of the pool (20,000), the teacher
on all of it. The 10,000 test images are used only for the final numbers.
"""

from __future__ import annotations

from functools import lru_cache

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from zoo._errors import ZooError

VAL_SIZE = 5000


@lru_cache(maxsize=1)
def fmnist_splits() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{"train", "val", "test"}`` -> (uint8 images [N, 28, 28], int64 labels [N])."""
    from zoo.common.datasets import fashion_mnist

    images, labels = fashion_mnist("train")
    order = np.random.default_rng(0).permutation(len(images))
    val, train = order[:VAL_SIZE], order[VAL_SIZE:]
    test_images, test_labels = fashion_mnist("test")
    return {
        "train": (images[train], labels[train]),
        "val": (images[val], labels[val]),
        "test": (np.asarray(test_images), np.asarray(test_labels)),
    }


def _tensors(images: np.ndarray, labels: np.ndarray) -> TensorDataset:
    return TensorDataset(torch.from_numpy(images.copy()).float()[:, None] / 255.0, torch.from_numpy(labels.copy()))


class FMNISTDataModule(pl.LightningDataModule):
    """Fashion-MNIST batches of (images in [0, 1] [B, 1, 28, 28], labels).

    Args:
        subset: Train on the first ``subset`` images of the 55,000-image pool (None: all).
        val_limit: Validate on the first ``val_limit`` validation images (None: all 5,000).
        batch_size: Training batch size.
        seed: Seed of the training order.
    """

    def __init__(self, subset: int | None = None, val_limit: int | None = 2000, batch_size: int = 128, seed: int = 0):
        super().__init__()
        if subset is not None and subset < 1:
            raise ZooError(f"subset={subset} must be at least 1")
        self.save_hyperparameters()
        self.train_set = self.val_set = self.test_set = None

    def setup(self, stage: str | None = None) -> None:
        splits = fmnist_splits()
        images, labels = splits["train"]
        self.train_images, self.train_labels = images[: self.hparams.subset], labels[: self.hparams.subset]
        self.train_set = _tensors(self.train_images, self.train_labels)
        val_images, val_labels = splits["val"]
        self.val_set = _tensors(val_images[: self.hparams.val_limit], val_labels[: self.hparams.val_limit])
        self.test_set = _tensors(*splits["test"])

    def train_dataloader(self) -> DataLoader:
        generator = torch.Generator().manual_seed(self.hparams.seed)
        return DataLoader(self.train_set, self.hparams.batch_size, shuffle=True, generator=generator, drop_last=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, 1000)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.test_set, 1000)
