"""The teacher CNN, the ConvNet-3 student and the soft-label student protocol (RDED / SRe2L style), plain torch.

The teacher (Conv 32-64-128 with batch norm, global average pooling, FC) is trained on the real training pool;
it gives the selector its confidence and penultimate features and gives the students their soft labels. A
student (ConvNet-3 with instance norm) is trained only on a distilled set: fixed steps, batch 64, random shift
and horizontal flip (torchvision transforms, drawn per image), loss KL(teacher || student) at temperature T on
the teacher's logits of each augmented batch.

Augmentation draws, per image of a batch, one of the (2 shift + 1)^2 x 2 variants of a ``RandomCrop(28,
padding=shift)`` + ``RandomHorizontalFlip`` (a crop offset and a flip, uniformly, from the seeded generator). For a
small distilled set (at most ``TABLE_LIMIT`` variants in all) the variants and the teacher's logits of each are
computed once (:func:`variant_table`) and a batch is looked up; for a large set (``full_data``) the same draws
are cropped and relabelled on the fly. Both paths give the same batches and targets (tested), so the table only
saves the teacher's forward pass of every step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from zoo._errors import ZooError

MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST pixel statistics in [0, 1]


def to_unit(images) -> torch.Tensor:
    """uint8 [N, 28, 28] or floats in [0, 1] -> float [N, 1, 28, 28] in [0, 1]; other shapes raise."""
    x = torch.as_tensor(np.asarray(images)) if not isinstance(images, torch.Tensor) else images
    if x.dim() == 4 and x.shape[1] == 1:
        x = x[:, 0]
    if x.dim() != 3 or tuple(x.shape[-2:]) != (28, 28):
        raise ZooError(f"images must be 28x28 Fashion-MNIST-like arrays [N, 28, 28], got shape {tuple(x.shape)}")
    x = x.float() / 255.0 if x.dtype == torch.uint8 else x.float()
    return x[:, None]


class ConvNet(nn.Module):
    """Three conv blocks (conv 3x3, norm, ReLU, 2x2 pool), global average pooling, FC.

    Args:
        widths: Channels of the three blocks.
        norm: ``"batch"`` (teacher) or ``"instance"`` (student, as in the dataset-distillation ConvNet).
        num_classes: Outputs.
    """

    def __init__(self, widths=(32, 64, 128), norm: str = "batch", num_classes: int = 10) -> None:
        super().__init__()
        if norm not in ("batch", "instance"):
            raise ZooError(f"norm must be 'batch' or 'instance', not {norm!r}")
        layers, channels = [], 1
        for width in widths:
            layer_norm = nn.BatchNorm2d(width) if norm == "batch" else nn.GroupNorm(width, width, affine=True)
            layers += [nn.Conv2d(channels, width, 3, padding=1), layer_norm, nn.ReLU(), nn.MaxPool2d(2)]
            channels = width
        self.features = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(channels, num_classes)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Penultimate features of images in [0, 1] [N, 1, 28, 28]."""
        return self.features((x - MEAN) / STD)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.embed(x))


@torch.no_grad()
def predict_batches(net: nn.Module, images, batch: int = 1000, features: bool = False) -> torch.Tensor:
    """Logits (or penultimate features) of uint8 images in batches, in eval mode."""
    was_training = net.training
    net.eval()
    x = to_unit(images)
    outs = [(net.embed if features else net)(x[i : i + batch]) for i in range(0, len(x), batch)]
    net.train(was_training)
    return torch.cat(outs)


def accuracy(net: nn.Module, images, labels) -> float:
    """Top-1 accuracy in [0, 1]."""
    return float((predict_batches(net, images).argmax(-1) == torch.as_tensor(np.asarray(labels))).float().mean())


@dataclass(frozen=True)
class StudentProtocol:
    """The fixed student protocol every arm is scored with (chosen once on validation).

    Args:
        widths: ConvNet-3 widths.
        steps: Optimiser steps.
        batch_size: Images per step (drawn with replacement from the distilled set).
        lr: Adam learning rate (cosine decay to 0).
        temperature: Soft-label temperature T.
        soft: KL to the teacher's soft labels (True) or hard-label CE (False, the ablation).
        shift: Random translation in pixels (torchvision RandomCrop with zero padding).
    """

    widths: tuple[int, ...] = (16, 32, 64)
    steps: int = 300
    batch_size: int = 64
    lr: float = 3e-3
    temperature: float = 4.0
    soft: bool = True
    shift: int = 2


#: Distilled sets with at most this many augmented variants (images x (2 shift + 1)^2 x 2) get a teacher table.
TABLE_LIMIT = 25_000


def num_variants(shift: int) -> int:
    """Crop offsets x flips of the augmentation: (2 shift + 1)^2 x 2."""
    return (2 * shift + 1) ** 2 * 2


def crop_flip(padded: torch.Tensor, variant: int, shift: int) -> torch.Tensor:
    """Variant ``variant`` of zero-padded images [..., 28 + 2 shift, 28 + 2 shift]: what torchvision's
    ``RandomCrop(28, padding=shift)`` + ``RandomHorizontalFlip`` makes for crop offset (top, left) =
    divmod(variant // 2, 2 shift + 1) and a flip when ``variant`` is odd (the reference is in the tests)."""
    from torchvision.transforms.v2 import functional as TF

    top, left = divmod(variant // 2, 2 * shift + 1)
    out = TF.crop(padded, top, left, 28, 28)
    return TF.horizontal_flip(out) if variant % 2 else out


def _pad(x: torch.Tensor, shift: int) -> torch.Tensor:
    from torchvision.transforms.v2 import functional as TF

    return TF.pad(x, [shift] * 4, fill=0)


@torch.no_grad()
def variant_table(x: torch.Tensor, teacher: nn.Module | None, shift: int, batch: int = 1000):
    """Every augmented variant of images [M, 1, 28, 28] ([M, V, 1, 28, 28]) and the teacher's logits of each
    ([M, V, classes], None without a teacher)."""
    padded = _pad(x, shift)
    variants = torch.stack([crop_flip(padded, v, shift) for v in range(num_variants(shift))], 1)
    if teacher is None:
        return variants, None
    flat = variants.flatten(0, 1)
    logits = torch.cat([teacher(flat[i : i + batch]) for i in range(0, len(flat), batch)])
    return variants, logits.view(*variants.shape[:2], -1)


def augmented_batches(x: torch.Tensor, teacher: nn.Module | None, protocol: StudentProtocol, seed: int, table=None):
    """The ``protocol.steps`` training batches of a student: (picked rows, augmented images, teacher logits or None).

    ``table``: True / False forces the precomputed path or the on-the-fly one (None: by ``TABLE_LIMIT``); both
    draw the same rows and variants from the seeded generator.
    """
    shift, count = protocol.shift, num_variants(protocol.shift)
    if table is None:
        table = len(x) * count <= TABLE_LIMIT
    generator = torch.Generator().manual_seed(seed)
    variants, logits = variant_table(x, teacher, shift) if table else (None, None)
    padded = None if table else _pad(x, shift)
    for _ in range(protocol.steps):
        pick = torch.randint(0, len(x), (protocol.batch_size,), generator=generator)
        which = torch.randint(0, count, (protocol.batch_size,), generator=generator)
        if table:
            yield pick, variants[pick, which], None if logits is None else logits[pick, which]
            continue
        batch = torch.stack([crop_flip(padded[i], int(v), shift) for i, v in zip(pick, which, strict=True)])
        if teacher is None:
            yield pick, batch, None
            continue
        with torch.no_grad():
            logits = teacher(batch)
        yield pick, batch, logits


def train_student(
    images,
    labels,
    teacher: nn.Module | None,
    protocol: StudentProtocol,
    seed: int,
    table: bool | None = None,
) -> ConvNet:
    """Train a fresh student on a distilled set with the protocol; ``seed`` fixes init, batches and augmentation.

    Args:
        images: uint8 [M, 28, 28], the distilled set.
        labels: [M] class ids (used only when ``protocol.soft`` is False).
        teacher: Gives the soft labels of every augmented batch (required when ``protocol.soft``).
        protocol: The student protocol.
        seed: Seed of this student.
        table: Precompute the teacher's logits of every augmented variant (None: when the set is small).
    """
    x = to_unit(images)
    y = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    if len(x) == 0:
        raise ZooError("the distilled set is empty")
    if len(y) != len(x):
        raise ZooError(f"{len(x)} images but {len(y)} labels")
    if protocol.soft and teacher is None:
        raise ZooError("soft-label training needs a teacher")
    torch.manual_seed(seed)
    student = ConvNet(protocol.widths, norm="instance")
    optimizer = torch.optim.Adam(student.parameters(), lr=protocol.lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, protocol.steps)
    if teacher is not None:
        teacher.eval()
    temperature = protocol.temperature
    for pick, batch, teacher_logits in augmented_batches(x, teacher if protocol.soft else None, protocol, seed, table):
        logits = student(batch)
        if protocol.soft:
            target = F.log_softmax(teacher_logits / temperature, -1)
            loss = F.kl_div(F.log_softmax(logits / temperature, -1), target, log_target=True, reduction="batchmean")
            loss = loss * temperature**2
        else:
            loss = F.cross_entropy(logits, y[pick])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
    return student.eval()
