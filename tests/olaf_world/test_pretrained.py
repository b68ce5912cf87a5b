"""The published checkpoints reproduce their card's cross-context probe on the held-out test worlds."""

from __future__ import annotations

import json

import pytest

import zoo
from zoo._eval import paper_arms

ENTRIES = (
    {arm: entry.name for arm, entry in paper_arms("olaf_world").items()}
    if "olaf_world.align" in zoo.list_models()
    else {}
)
pytestmark = pytest.mark.skipif(not ENTRIES, reason="olaf_world has no published entry yet")


def test_every_learned_arm_has_its_published_entry():
    assert ENTRIES == {"lam_align": "olaf_world.align", "lam_vae": "olaf_world.vae"}


@pytest.mark.parametrize("arm", sorted(ENTRIES))
def test_checkpoint_reproduces_its_card_cross_context_probe(arm, hf_cache, hf_offline):
    from zoo.olaf_world.evaluate import score_pretrained

    entry = zoo.get_entry(ENTRIES[arm])
    card = json.loads((entry.mirror_dir / "metrics.json").read_text())
    seed0 = card["per_seed"][arm]["0"]  # the published weights are the card's seed-0 run
    scores = score_pretrained(zoo.load(entry.name, pretrained=True))
    assert scores["probe_acc_cross"] == pytest.approx(seed0["probe_acc_cross"], abs=0.02)
    assert scores["pixel_mse"] == pytest.approx(seed0["pixel_mse"], rel=0.05)


def test_random_encoder_reference_draws_fresh_weights_per_seed():
    """The reference's weights follow the run's seed (the module seeds its own weights, so the seed is passed)."""
    import torch

    from zoo._eval import Run
    from zoo.olaf_world.evaluate import PROTOCOL, _model

    def weights(seed):
        run = Run(paper_arms("olaf_world"), PROTOCOL, seed, PROTOCOL.resolve([]))
        return torch.cat([p.flatten() for p in _model("random_encoder", run).parameters()])

    assert torch.equal(weights(1), weights(1))
    assert not torch.equal(weights(0), weights(1))
