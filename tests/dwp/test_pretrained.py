"""The published DWP checkpoint reproduces its card metrics on a slice of the test set."""

from __future__ import annotations

import pytest

import zoo
from zoo._cards import load_metrics
from zoo.dwp.evaluate import score_pretrained

# The card's seed 0 is the published checkpoint, scored on the card's own first `eval_images` test images with
# the same additive draws of seed 0 as here (the eval's default `draws`), so it is reproduced up to float noise;
# the tolerance (about 3 binomial standard errors at 2,000 images) also covers a card measured on other images.
TOLERANCE = 0.03


@pytest.mark.parametrize("name", ["dwp.fashion_mnist"])
def test_pretrained_reproduces_card_metric_on_a_slice(name, hf_offline):
    entry = zoo.get_entry(name)
    if not entry.pretrained_cfg.has_weights:
        pytest.fail(f"{name} has no pinned weights; train it with `zoo fit -c {entry.pretrained_cfg.recipe}`")
    card = load_metrics(entry.mirror_dir)
    published = card["per_seed"][entry.eval_arm]["0"]
    images = card["settings"]["eval_images"]
    scores = score_pretrained(zoo.load(name, pretrained=True), limit=images)
    for key in ("acc_sigma_0", "acc_sigma_0.3"):
        assert scores[key] == pytest.approx(published[key], abs=TOLERANCE), f"{name}: {key} on {images} images"
