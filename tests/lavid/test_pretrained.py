"""The published LaViD students reproduce their card's accuracy on 2,000 test images and carry their S."""

from __future__ import annotations

import math

import pytest
import torch

import zoo
from zoo._cards import load_metrics
from zoo.lavid.evaluate import score_pretrained

# `zoo eval lavid` scores the published checkpoint (the recipe's run of seed 0) on the first 2,000 test images and
# records it in the card's extras; loading it again must give that number (one point is the tolerance).
TOLERANCE = 0.01


@pytest.mark.parametrize("name", ["lavid.fmnist_10shot", "lavid.ce"])
def test_pretrained_reproduces_card_accuracy_on_2000_test_images(name, hf_offline):
    entry = zoo.get_entry(name)
    if not entry.pretrained_cfg.has_weights:
        pytest.fail(f"{name} has no pinned weights; train it with `zoo fit -c {entry.pretrained_cfg.recipe}`")
    card = load_metrics(entry.mirror_dir)
    published = card["extras"]["0"][f"{entry.eval_arm}_published_acc_test2000"]
    score = score_pretrained(zoo.load(name, pretrained=True), limit=2000)["acc_10shot"]
    assert score == pytest.approx(published, abs=TOLERANCE)


@pytest.mark.parametrize("name", ["lavid.fmnist_10shot", "lavid.ce"])
def test_published_weights_are_the_evaluations_seed_0_student(name):
    """The recipe's Lightning run of seed 0 and the evaluation's plain-loop student of seed 0 see the same draw, init,
    batches and augmentation: the card records the same test accuracy for both (on the first 2,000 images and on
    all ``test_limit`` images)."""
    entry = zoo.get_entry(name)
    card = load_metrics(entry.mirror_dir)
    arm, extras = entry.eval_arm, card["extras"]["0"]
    assert extras[f"{arm}_published_acc_test2000"] == extras[f"{arm}_seed0_10shot_acc_test2000"]
    assert extras[f"{arm}_published_acc_10shot"] == pytest.approx(card["per_seed"][arm]["0"]["acc_10shot"], abs=1e-4)


def test_published_lavid_carries_its_signatures_and_questions(hf_offline):
    model = zoo.load("lavid", pretrained=True)
    rows = model.signatures.double().sum(1)
    assert torch.allclose(rows, torch.full_like(rows, 30.0), atol=1e-3)
    info = model.signature_info
    assert "MiniLM" in info["teacher"] and info["num_questions"] == 30 and info["num_options"] == 5
    entropy = -(model.signatures.view(10, 30, 5).double().clamp_min(1e-300).log() * model.signatures.view(10, 30, 5))
    assert float(entropy.sum(-1).mean()) == pytest.approx(0.6 * math.log(5), abs=0.01)
