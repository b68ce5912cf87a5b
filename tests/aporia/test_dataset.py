"""SOCRATES-mini construction with a scripted generator: selection rule, labels, caching."""

from __future__ import annotations

import random
import zlib

import numpy as np

from zoo.aporia.dataset import SocratesConfig, SocratesMini, sample_pairs, socrates_mini
from zoo.aporia.facts import country_facts


class ScriptedGenerator:
    """Answers correctly with a probability that depends on the question; otherwise names a wrong capital."""

    def __init__(self) -> None:
        self.by_prompt = {}
        for fact in country_facts():
            for template in range(5):
                self.by_prompt[f"Q: {fact.question(template)} A:"] = fact
        self.capitals = sorted({f.value for f in country_facts() if f.attribute == "capital"})

    def sample(self, prompts, n=1, *, temperature=1.0, seed=0, **kwargs):
        out = []
        for text in prompts:
            fact = self.by_prompt[text]
            rng = random.Random(f"{seed}{text}")
            p_correct = 1.0 if temperature == 0 else (zlib.crc32(fact.key.encode()) % 7) / 6  # 0, 1/6, ..., 1
            answers = []
            for _ in range(n):
                value = fact.value if rng.random() < p_correct else rng.choice(self.capitals)
                answers.append(f"The capital of {fact.country} is {value}." if fact.attribute == "capital" else value)
            out.append(answers)
        return out

    def state_dict(self):  # the dataset cache is keyed on the generators' weights; this one has none
        return {}


def test_sample_pairs_keeps_mixed_pairs_with_enough_of_each_class():
    config = SocratesConfig(
        prompts_per_model=5, samples=30, min_per_class=6, probe_samples=10, candidates_per_model=400
    )
    pairs, stats = sample_pairs("scripted", ScriptedGenerator(), config, model_index=0)
    assert 0 < len(pairs) <= 5
    for pair in pairs:
        assert pair["attribute"] == "capital"  # other attributes never match a template, so never mixed
        assert len(pair["responses"]) == 30
        n_h = sum(pair["labels"])
        assert min(n_h, 30 - n_h) >= 6
        genuine = [r for r, y in zip(pair["responses"], pair["labels"]) if y == 0]
        assert set(genuine) == {f"The capital of {pair['country']} is {pair['value']}."}
    assert stats["pairs_kept"] == len(pairs)
    assert 0 < stats["greedy_accuracy"] < 1  # greedy is always right for capitals only


def test_socrates_mini_round_trip(tmp_path):
    config = SocratesConfig(
        generators=("scripted",), prompts_per_model=2, samples=12, min_per_class=3, probe_samples=8,
        candidates_per_model=300,
    )  # fmt: skip
    dataset = socrates_mini(config, generators={"scripted": ScriptedGenerator()}, cache_dir=tmp_path)
    assert len(dataset) == 2 and dataset.embeddings.shape == (24, 384)
    np.testing.assert_allclose(np.linalg.norm(dataset.embeddings, axis=1), 1.0, atol=1e-5)
    x, y = dataset.pair_arrays(1)
    assert x.shape == (12, 384) and set(np.unique(y)) == {0, 1}
    (folder,) = list(tmp_path.iterdir())
    again = SocratesMini.load(folder)
    np.testing.assert_array_equal(again.embeddings, dataset.embeddings)
    assert again.responses == dataset.responses and again.pairs == dataset.pairs
    cached = socrates_mini(config, generators={"scripted": ScriptedGenerator()}, cache_dir=tmp_path)
    assert cached.responses == dataset.responses
