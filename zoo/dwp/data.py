"""Fashion-MNIST as a LightningDataModule: 55k train / 5k validation (held out of the training set) / 10k test."""

from __future__ import annotations

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from zoo.common.datasets import fashion_mnist

MEAN, STD = 0.2860, 0.3530  # of the Fashion-MNIST training images, pixels in [0, 1]


def load_split(split: str, limit: int | None = None, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalised images ``[N, 1, 28, 28]`` (float32) and labels ``[N]`` of a Fashion-MNIST split.

    Args:
        split: ``"train"`` or ``"test"``.
        limit: Keep only ``limit`` items (from ``offset``).
        offset: First item kept.
    """
    images, labels = fashion_mnist(split)
    end = None if limit is None else offset + limit
    x = torch.from_numpy(images[offset:end].astype(np.float32) / 255.0).sub_(MEAN).div_(STD).unsqueeze(1)
    return x, torch.from_numpy(labels[offset:end].copy())


class TensorBatches(Dataset):
    """Tensors served a whole batch at a time (``__getitems__``), without per-item collation."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[index], self.y[index]

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        index = torch.as_tensor(indices)
        return self.x[index], self.y[index]


def _as_batch(batch):
    return batch


class FMNISTDataModule(pl.LightningDataModule):
    """Fashion-MNIST from the Debian package ``dataset-fashion-mnist`` (no downloads).

    The validation split is a fixed random ``val_size`` of the 60k training images (seed ``split_seed``),
    used for model selection; the 10k test images are used only by ``zoo eval``.

    Args:
        batch_size: Training batch size.
        eval_batch_size: Validation/test batch size.
        val_size: Training images held out for validation.
        train_limit: Use only this many training images (smoke tests).
        split_seed: Seed of the train/validation split.
    """

    def __init__(
        self,
        batch_size: int = 128,
        eval_batch_size: int = 1000,
        val_size: int = 5000,
        train_limit: int | None = None,
        split_seed: int = 0,
    ) -> None:
        super().__init__()
        if batch_size < 1 or eval_batch_size < 1:
            raise ValueError("batch_size and eval_batch_size must be >= 1")
        if not 0 < val_size < 60000:
            raise ValueError(f"val_size must be between 1 and 59999 training images, not {val_size}")
        self.save_hyperparameters()

    def setup(self, stage: str | None = None) -> None:
        h = self.hparams
        x, y = load_split("train")
        order = torch.randperm(len(y), generator=torch.Generator().manual_seed(h.split_seed))
        val_idx, train_idx = order[: h.val_size], order[h.val_size :]
        if h.train_limit is not None:
            train_idx = train_idx[: h.train_limit]
        self.train_set = TensorBatches(x[train_idx], y[train_idx])
        self.val_set = TensorBatches(x[val_idx], y[val_idx])
        if stage in (None, "test", "predict"):
            self.test_set = TensorBatches(*load_split("test"))

    def _loader(self, dataset: Dataset, batch_size: int, shuffle: bool = False) -> DataLoader:
        return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, collate_fn=_as_batch)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, self.hparams.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_set, self.hparams.eval_batch_size)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.test_set, self.hparams.eval_batch_size)

    def predict_dataloader(self) -> DataLoader:
        return self.test_dataloader()
