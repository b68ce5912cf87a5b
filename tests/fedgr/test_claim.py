"""The published checkpoints are the evaluation's seed-0 runs, and the card's trained runs reproduce (slow: minutes)."""

from __future__ import annotations

import json

import pytest

import zoo
from zoo._eval import fit_recipe, paper_arms, run_eval
from zoo.fedgr.evaluate import PROTOCOL, score_pretrained

TOLERANCE = 0.005  # half a point of accuracy: the card's runs and these runs are the same deterministic recipes


@pytest.mark.slow
@pytest.mark.parametrize("arm", ["fedgr", "fedavg"])
def test_retraining_the_recipe_reproduces_the_published_checkpoint(arm, hf_offline):
    """Seed 0 scores the published weights in place of this fit, so the two must agree.

    Not bit for bit: on this machine a fit of the recipe (and the pre-harness hand-built Trainer alike) ends
    up to 0.05 away in some weights from the published ones (floating-point order over 30 rounds), so the test
    compares what the evaluation measures: test accuracy within one point (measured gaps: 0.0048 for fedgr,
    0.0019 for fedavg).
    """
    entry = paper_arms("fedgr")[arm]
    module = fit_recipe(entry.pretrained_cfg.recipe, PROTOCOL.published_seed, (), PROTOCOL.seed_args)
    retrained = score_pretrained(module)["accuracy"]
    published = score_pretrained(zoo.load(entry.name, pretrained=True))["accuracy"]
    assert retrained == pytest.approx(published, abs=2 * TOLERANCE)


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
