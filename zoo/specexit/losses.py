"""SpecExit's training losses: the draft stage's loss weights, masked token metrics, the unrolled-step mask.

Plain torch, no Lightning: :class:`zoo.specexit.module.SpecExitModule` combines them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class LossWeights:
    """Weights of the draft-stage losses (the spec marks them as guesses).

    Args:
        unrolled: CE of the second, self-feature draft step (the first step has weight 1).
        confidence: BCE of the confidence signal.
        progress: MSE of the progress signal.
        remain: SmoothL1 of the log-remaining-length signal.
        probe: BCE of the probing baseline's linear probe (separate parameters).
    """

    unrolled: float = 1.0
    confidence: float = 1.0
    progress: float = 1.0
    remain: float = 0.5
    probe: float = 1.0


def masked_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean token cross-entropy over positions where ``mask`` is 1."""
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
    mask = mask.reshape(-1)
    return (loss * mask).sum() / mask.sum().clamp_min(1.0)


def masked_accuracy(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Top-1 accuracy over positions where ``mask`` is 1."""
    hits = (logits.argmax(-1) == targets).float() * mask
    return hits.sum() / mask.sum().clamp_min(1.0)


def unrolled_mask(steps: int, device=None) -> torch.Tensor:
    """Attention mask of the second draft step (EAGLE-3's training-time test).

    Query ``a`` (position ``a + 1``, fed the draft's own output of position ``a``) attends the first step's
    keys at positions ``0..a`` (real target features) and only its own key in the new block, exactly as a
    chained draft token attends the draft cache during decoding.
    """
    first = torch.ones(steps, steps + 1, dtype=torch.bool, device=device).tril()
    return torch.cat((first, torch.eye(steps, dtype=torch.bool, device=device)), dim=1)[None, None]
