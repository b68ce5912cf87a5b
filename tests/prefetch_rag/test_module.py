"""The LM loss with slot weighting, against a hand-written weighted cross-entropy."""

import pytest
import torch
import torch.nn.functional as F

from zoo.prefetch_rag.lm import collate
from zoo.prefetch_rag.module import PrefetchRAGModule


def _batch():
    pairs = [
        ([5, 6, 7, 8, 9, 10], [-100, -100, 7, 8, 9, 10], [0, 0, 0, 1, 1, 0]),
        ([11, 12, 13, 14], [-100, 12, 13, 14], [0, 0, 1, 1]),
    ]
    return collate(pairs, pad=1)


@pytest.mark.parametrize("slot_weight", [1.0, 3.0])
def test_slot_weighted_loss_matches_hand_computation(slot_weight):
    torch.manual_seed(0)
    module = PrefetchRAGModule(slot_weight=slot_weight).eval()
    batch = _batch()
    with torch.no_grad():
        logits = module(batch["input_ids"])[:, :-1]
        labels = batch["labels"][:, 1:]
        ce = F.cross_entropy(logits.transpose(1, 2), labels.clamp_min(0), reduction="none")
        weights = torch.where(batch["slot_mask"][:, 1:] > 0, slot_weight, 1.0) * (labels != -100)
        expected = (ce * weights).sum() / weights.sum()
        assert module._loss(batch).item() == pytest.approx(expected.item(), rel=1e-5)


def test_bad_slot_weight_names_the_argument():
    with pytest.raises(ValueError, match="^slot_weight"):
        PrefetchRAGModule(slot_weight=0.0)
