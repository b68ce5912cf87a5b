"""The published checkpoints reproduce their card's PutNextLocal success on 50 fixed-seed test episodes."""

from __future__ import annotations

import json

import pytest

import zoo
from zoo.eval.engine import evaluation

ENTRIES = (
    {arm: entry.name for arm, entry in evaluation("deepha").entries.items()}
    if "deepha.babyai" in zoo.list_models()
    else {}
)
pytestmark = pytest.mark.skipif(not ENTRIES, reason="deepha has no published entry yet")


def test_every_published_arm_has_its_entry():
    assert ENTRIES == {"coa_compressed": "deepha.babyai", "flat": "deepha.flat"}
    assert zoo.get_entry("deepha").name == "deepha.babyai"


@pytest.mark.parametrize("arm", sorted(ENTRIES))
def test_checkpoint_reproduces_its_card_putnextlocal_success(arm, hf_cache, hf_offline):
    from zoo.deepha.evaluate import score_pretrained

    entry = zoo.get_entry(ENTRIES[arm])
    card = json.loads((entry.mirror_dir / "metrics.json").read_text())
    seed0 = card["per_seed"][arm]["0"]  # the published weights are the card's seed-0 run (the same 50 episodes)
    scores = score_pretrained(zoo.load(entry.name, pretrained=True), limit=50)
    assert scores["success_putnextlocal"] == pytest.approx(seed0["success_putnextlocal"], abs=0.02)
