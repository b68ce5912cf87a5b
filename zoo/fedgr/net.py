"""The small CNN of the scaled FedGR setting (about 0.2 M parameters), in plain torch."""

from __future__ import annotations

import torch
from torch import nn

#: Pixel statistics of the Fashion-MNIST training split, applied inside the network so callers pass [0, 1] images.
FASHION_MNIST_MEAN = 0.2860
FASHION_MNIST_STD = 0.3530


class SmallCNN(nn.Module):
    """Conv(1→16, 3)–ReLU–MaxPool–Conv(16→32, 3)–ReLU–MaxPool–FC(1568→hidden)–ReLU–FC(hidden→classes).

    The ``hidden``-wide layer after the ReLU is the embedding that FedGR's representation regulariser
    compares between the global and the local model.

    Args:
        num_classes: Number of classes.
        hidden: Width of the embedding layer.
        in_channels: Image channels.
        image_size: Side of the square input image (must be divisible by 4).
    """

    def __init__(self, num_classes: int = 10, hidden: int = 128, in_channels: int = 1, image_size: int = 28) -> None:
        super().__init__()
        if image_size % 4:
            raise ValueError(f"SmallCNN needs an image side divisible by 4 (two 2x2 poolings), got {image_size}")
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(32 * (image_size // 4) ** 2, hidden),
            nn.ReLU(),
        )
        self.head = nn.Linear(hidden, num_classes)

    @staticmethod
    def normalise(images: torch.Tensor) -> torch.Tensor:
        """uint8 or [0, 1] float images ``[B, 1, H, W]`` (or ``[B, H, W]``) → standardised float."""
        if images.dtype == torch.uint8:
            images = images.float() / 255.0
        if images.dim() == 3:
            images = images.unsqueeze(1)
        return (images - FASHION_MNIST_MEAN) / FASHION_MNIST_STD

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """The ``hidden``-dimensional embedding (after the ReLU)."""
        return self.features(self.normalise(images))

    def forward(self, images: torch.Tensor, return_embedding: bool = False):
        """Class logits ``[B, classes]``; with ``return_embedding`` also the embedding ``[B, hidden]``."""
        embedding = self.embed(images)
        logits = self.head(embedding)
        return (logits, embedding) if return_embedding else logits


def seeded_model(seed: int, num_classes: int = 10, hidden: int = 128) -> SmallCNN:
    """A :class:`SmallCNN` initialised from ``seed`` only (the global RNG is left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return SmallCNN(num_classes=num_classes, hidden=hidden)
