"""The published checkpoint reproduces its card's EM on the first 50 single-domain test questions (within 2 points)."""

import json

import pytest

import zoo

NAME = "prefetch_rag.countries"
pytestmark = pytest.mark.skipif(NAME not in zoo.list_models(), reason="registered once pinned with a 3-seed card")


@pytest.mark.slow  # MiniLM over the knowledge base on a clean cache (~1 min), then 50 answers
def test_checkpoint_reproduces_its_card_em():
    from zoo.prefetch_rag.evaluate import GOLDEN, score_pretrained

    entry = zoo.get_entry(NAME)
    result = json.loads((entry.mirror_dir / "metrics.json").read_text())
    card = result["per_seed"]["prefetch"]["0"][f"em_first{GOLDEN}"]
    model = zoo.load(NAME, pretrained=True)
    assert score_pretrained(model, limit=GOLDEN)["em"] == pytest.approx(card, abs=0.02)


def test_checkpoint_ships_its_tokenizer_and_theta():
    model = zoo.load(NAME, pretrained=True)
    assert model.tokens is not None and model.tokens.tokenizer.get_vocab_size() <= model.lm_cfg.vocab_size
    assert float(model.theta) in model.hparams.theta_grid
