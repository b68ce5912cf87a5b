"""The small CNN of the scaled FedGR setting (about 0.2 M parameters), in plain torch.

Speed (issue 31): on one CPU thread PyTorch's max-pooling kernel for NCHW tensors is scalar; it took about a
third of a training step. :class:`MaxPool2x2` runs the same pooling through the channels-last kernel
(vectorised over channels), and each ReLU comes after its pooling (``max`` commutes with the monotone ReLU),
on a quarter of the elements. Both are exact: the outputs, the selected argmax positions and so the
gradients are bit-identical to Conv-ReLU-MaxPool2d(2) (``tests/fedgr/test_net.py``); the parameters and
their state-dict keys are unchanged.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

#: Pixel statistics of the Fashion-MNIST training split, applied inside the network so callers pass [0, 1] images.
FASHION_MNIST_MEAN = 0.2860
FASHION_MNIST_STD = 0.3530


class _ChannelsLastMaxPool(torch.autograd.Function):
    """``F.max_pool2d(x, kernel)`` of an NCHW tensor computed by the channels-last kernel; the native backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, kernel: int) -> torch.Tensor:
        out, indices = F.max_pool2d_with_indices(x.contiguous(memory_format=torch.channels_last), kernel)
        ctx.save_for_backward(x, indices.contiguous())  # indices are h * W + w: the same in either layout
        ctx.kernel = kernel
        return out.contiguous()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, indices = ctx.saved_tensors
        size, no_padding, no_dilation = [ctx.kernel, ctx.kernel], [0, 0], [1, 1]
        grad_x = torch.ops.aten.max_pool2d_with_indices_backward(
            grad.contiguous(), x, size, size, no_padding, no_dilation, False, indices
        )
        return grad_x, None


class MaxPool2x2(nn.Module):
    """``nn.MaxPool2d(2)`` with bit-identical outputs and gradients, faster on CPU (see the module docstring).

    The channels-last kernel picks the same argmax as the NCHW one (the first maximum of each window in
    row-major order), so the gradient reaches the same input. Off the CPU this is plain ``F.max_pool2d``.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type != "cpu" or x.dim() != 4:
            return F.max_pool2d(x, 2)
        return _ChannelsLastMaxPool.apply(x, 2)


class SmallCNN(nn.Module):
    """Conv(1→16, 3)–ReLU–MaxPool–Conv(16→32, 3)–ReLU–MaxPool–FC(1568→hidden)–ReLU–FC(hidden→classes).

    Computed as Conv–MaxPool–ReLU, which gives the same numbers faster; the parameters keep their indices
    (``features.0``, ``features.3``, ``features.7``), so checkpoints of either order load into the other.

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
            MaxPool2x2(),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1),
            MaxPool2x2(),
            nn.ReLU(),
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
