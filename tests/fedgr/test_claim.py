"""The paper's claim at the zoo's scale, and the reproducibility of the published checkpoints (slow: minutes)."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.fedgr.evaluate import CLAIM_MARGIN, CLEAN_TOLERANCE, ENTRY_OF_ARM, F1_FLOOR, PUBLISHED_SEED, evaluate, train


@pytest.mark.slow
@pytest.mark.parametrize("arm", ["fedgr", "fedavg"])
def test_retraining_the_recipe_reproduces_the_published_weights(arm, hf_offline):
    module, _ = train(arm, PUBLISHED_SEED)
    published = zoo.load(ENTRY_OF_ARM[arm], pretrained=True)
    for key, value in published.state_dict().items():
        torch.testing.assert_close(module.state_dict()[key], value, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_fedgr_beats_fedavg_under_heavy_noise_and_matches_it_without_noise():
    """The issue's thresholds on seed 0 (the card reports seeds 0 1 2): retrains 6 runs, ~10 min on 2 cores."""
    result = evaluate("fedgr", seeds=[0], retrain=True)
    arms = result["arms"]
    assert arms["fedgr"]["accuracy"] >= arms["fedavg"]["accuracy"] + CLAIM_MARGIN
    assert arms["fedgr"]["noise_f1"] >= F1_FLOOR
    assert abs(arms["fedgr"]["accuracy_clean"] - arms["fedavg"]["accuracy_clean"]) <= CLEAN_TOLERANCE
