"""Learning-rate schedules shared by the papers' modules."""

from __future__ import annotations

import math

import torch


def warmup_cosine(optimizer: torch.optim.Optimizer, warmup: int, total: int, floor: float = 0.1):
    """Linear warm-up, then a cosine decay to ``floor`` x the base learning rate; step it every optimiser step.

    The factor is ``(step + 1) / warmup`` for ``step < warmup``, then ``floor + (1 - floor) (1 + cos(pi p)) / 2``
    with ``p = (step - warmup) / (total - warmup)``, held at ``floor`` after ``total``.

    Args:
        optimizer: The optimiser whose learning rates are scaled.
        warmup: Warm-up steps (0: none).
        total: Steps of the whole schedule.
        floor: Final fraction of the base learning rate.
    """

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
