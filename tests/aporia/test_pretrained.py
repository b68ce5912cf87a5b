"""Golden checks: the published checkpoints reproduce their cards' metrics on a small slice."""

from __future__ import annotations

import json

import pytest

import zoo
from zoo.aporia.evaluate import score_pretrained

#: Detector: F1 of the published fit (fold 0, draw 0) on the held-out folds of 60 pairs evenly spaced over all
#: generators, against the card's mean over 5 folds x 3 draws x all pairs and 3 protocol seeds. Per-pair F1
#: spreads by about 0.2 on 10 held-out answers, so 60 pairs give a 1-sigma error near 0.03; 0.08 is about 3 sigma.
DETECTOR_PAIRS, DETECTOR_TOLERANCE = 60, 0.08
#: Generators: greedy accuracy on the first 200 of the card's 600 seeded facts; the prefix differs from
#: the full set by sqrt(p(1-p)(1/200 - 1/600)) <= 0.03 (1 sigma), so 3 sigma is 0.09.
GENERATOR_FACTS, GENERATOR_TOLERANCE = 200, 0.09


def _card_arm(name: str) -> dict:
    entry = zoo.get_entry(name)
    return json.loads((entry.mirror_dir / "metrics.json").read_text())["arms"][entry.eval_arm]


def test_detector_reproduces_its_card(hf_offline):
    detector = zoo.load("aporia", pretrained=True)
    assert len(detector.pairs) == detector.num_pairs
    score = score_pretrained(detector, limit=DETECTOR_PAIRS)["f1_at_40_labels"]
    assert score == pytest.approx(_card_arm("aporia.socrates_mini")["f1_at_40_labels"], abs=DETECTOR_TOLERANCE)


@pytest.mark.parametrize("name", ["aporia.gen_gpt2_s", "aporia.gen_qwen2_xs"])
def test_generator_reproduces_its_card(name, hf_offline):
    generator = zoo.load(name, pretrained=True)
    score = score_pretrained(generator, limit=GENERATOR_FACTS)["greedy_accuracy"]
    assert score == pytest.approx(_card_arm(name)["greedy_accuracy"], abs=GENERATOR_TOLERANCE)


def test_published_detector_classifies_its_own_prompts(hf_offline):
    detector = zoo.load("aporia", pretrained=True)
    pair = detector.pairs[0]
    labels = detector.classify(pair["heldout"], prompt=pair["prompt"], model=pair["model"])
    agreement = sum((label == "hallucinated") == bool(y) for label, y in zip(labels, pair["heldout_labels"]))
    assert agreement >= 0.8 * len(labels)
