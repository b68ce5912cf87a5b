"""The published checkpoints are the evaluation's seed-0 runs, and the card's trained runs reproduce (slow: minutes)."""

from __future__ import annotations

import json

import pytest
import torch

import zoo
from zoo._eval import fit_recipe, paper_arms, run_eval
from zoo.fedgr.evaluate import PROTOCOL

TOLERANCE = 0.005  # half a point of accuracy: the card's runs and these runs are the same deterministic recipes


@pytest.mark.slow
@pytest.mark.parametrize("arm", ["fedgr", "fedavg"])
def test_retraining_the_recipe_reproduces_the_published_weights(arm, hf_offline):
    entry = paper_arms("fedgr")[arm]
    module = fit_recipe(entry.pretrained_cfg.recipe, PROTOCOL.published_seed, (), PROTOCOL.seed_args)
    published = zoo.load(entry.name, pretrained=True)
    for key, value in published.state_dict().items():
        torch.testing.assert_close(module.state_dict()[key], value, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_the_card_clean_label_runs_reproduce_on_seed_0(hf_offline):
    """The clean arms are trained by the evaluation even for seed 0 (~2 min on 2 cores): retrain and compare."""
    arms = ["fedgr", "fedgr_clean", "fedavg_clean", "reference_untrained"]
    result = run_eval("fedgr", seeds=[0], arms=arms)
    card = json.loads((zoo.get_entry("fedgr").mirror_dir / "metrics.json").read_text())
    for arm in arms:
        expected, measured = card["per_seed"][arm]["0"], result["per_seed"][arm]["0"]
        assert measured.keys() == expected.keys()
        for metric, value in expected.items():
            assert measured[metric] == pytest.approx(value, abs=TOLERANCE), (arm, metric)
