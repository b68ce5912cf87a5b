"""The published DWP checkpoint reproduces its card metrics on a slice of the test set."""

from __future__ import annotations

import pytest

import zoo
from zoo.dwp.evaluate import score_pretrained

SLICE = 2000
# The slice is the default eval's own 2,000 images and noise draws, so the card is reproduced up to float noise;
# the tolerance (about 3 binomial standard errors at 2,000 images) also covers a card measured on the full
# test split (ZOO_DWP_EVAL_IMAGES=10000).
TOLERANCE = 0.03


@pytest.mark.parametrize("name", ["dwp.fashion_mnist"])
def test_pretrained_reproduces_card_metric_on_a_slice(name, hf_offline):
    cfg = zoo.get_entry(name).pretrained_cfg
    if not cfg.has_weights:
        pytest.fail(f"{name} has no pinned weights; train it with `zoo fit -c {cfg.recipe}` and `zoo pin {name}`")
    scores = score_pretrained(zoo.load(name, pretrained=True), limit=SLICE)
    for key in ("acc_sigma_0", "acc_sigma_0.3"):
        assert scores[key] == pytest.approx(cfg.metrics[key], abs=TOLERANCE), f"{name}: {key} on {SLICE} test images"
