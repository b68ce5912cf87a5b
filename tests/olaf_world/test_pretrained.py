"""The published checkpoints reproduce their card's cross-context probe on the held-out test worlds."""

from __future__ import annotations

import json

import pytest

import zoo
from zoo.eval.engine import evaluation

ENTRIES = (
    {arm: entry.name for arm, entry in evaluation("olaf_world").entries.items()}
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


def test_random_encoder_reference_draws_fresh_weights_per_seed(monkeypatch):
    """The reference's weights follow the run's seed (the module seeds its own weights, so the seed is passed)."""
    import torch

    from zoo.eval import Run
    from zoo.olaf_world import evaluate

    scored = []
    monkeypatch.setattr(evaluate, "score", lambda arm, model, run: scored.append((arm, model)) or {})

    def weights(seed):
        run = Run(evaluate.PROTOCOL, "olaf_world", seed, evaluate.PROTOCOL.resolve(), evaluation("olaf_world").entries)
        evaluate.PROTOCOL.arm("random_encoder").measure(run)
        arm, model = scored[-1]
        assert arm == "random_encoder" and not model.training
        return torch.cat([p.flatten() for p in model.parameters()])

    assert torch.equal(weights(1), weights(1))
    assert not torch.equal(weights(0), weights(1))
