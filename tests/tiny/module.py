"""A tiny test-only classifier and data module (not registered in the public zoo).

The tests register it as ``tinytest.blobs`` to exercise the registry, the Hub round trip, the CLI
and the cards without depending on any paper.
"""

from __future__ import annotations

from dataclasses import dataclass

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


@dataclass
class TinyOptim:
    """Optimiser settings (a dataclass init argument, to test config.json round trips).

    Args:
        lr: Learning rate.
        momentum: SGD momentum.
    """

    lr: float = 0.1
    momentum: float = 0.9


class TinyClassifier(pl.LightningModule):
    """A two-layer MLP on Gaussian blobs.

    Args:
        in_features: Input size.
        hidden: Hidden width.
        num_classes: Number of classes.
        optim: Optimiser settings.
    """

    def __init__(self, in_features: int = 8, hidden: int = 16, num_classes: int = 3, optim: TinyOptim | None = None):
        super().__init__()
        self.save_hyperparameters()
        self.optim = optim or TinyOptim()
        self.net = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))
        self.example_input_array = torch.zeros(2, in_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val/acc", (self(x).argmax(-1) == y).float().mean(), prog_bar=True)

    test_step = validation_step

    def predict_step(self, batch, batch_idx):
        return self(batch[0]).argmax(-1)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.optim.lr, momentum=self.optim.momentum)

    def export_metadata(self) -> dict:
        return {"note": "tiny test model"}


def blobs(n: int, in_features: int, num_classes: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian blobs: class c is centred at 2 * e_c."""
    generator = torch.Generator().manual_seed(seed)
    y = torch.randint(num_classes, (n,), generator=generator)
    x = torch.randn(n, in_features, generator=generator) * 0.5
    x[torch.arange(n), y] += 2.0
    return x, y


class TinyDataModule(pl.LightningDataModule):
    """Train/val/test splits of :func:`blobs`.

    Args:
        n: Training examples (validation and test get n // 4 each).
        in_features: Input size.
        num_classes: Number of classes.
        batch_size: Batch size.
        seed: Seed of the data.
    """

    def __init__(self, n: int = 256, in_features: int = 8, num_classes: int = 3, batch_size: int = 32, seed: int = 0):
        super().__init__()
        self.save_hyperparameters()

    def setup(self, stage: str | None = None) -> None:
        h = self.hparams
        self.splits = {
            name: TensorDataset(*blobs(size, h.in_features, h.num_classes, h.seed + i))
            for i, (name, size) in enumerate((("train", h.n), ("val", h.n // 4), ("test", h.n // 4)))
        }

    def train_dataloader(self):
        return DataLoader(self.splits["train"], batch_size=self.hparams.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.splits["val"], batch_size=self.hparams.batch_size)

    def test_dataloader(self):
        return DataLoader(self.splits["test"], batch_size=self.hparams.batch_size)

    def predict_dataloader(self):
        return self.test_dataloader()
