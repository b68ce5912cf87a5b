"""SOCRATES-mini construction with a scripted generator: selection rule, labels, caching."""

from __future__ import annotations

import random
import zlib
from dataclasses import replace

import numpy as np
import pytest

from zoo._errors import ZooError
from zoo._hub import sha256_file
from zoo.aporia.artifact import PUBLISHED_SEEDS, artifact_name, load_artifact, save_artifact
from zoo.aporia.cache import socrates_mini
from zoo.aporia.dataset import SocratesConfig, SocratesMini
from zoo.aporia.facts import country_facts, extract_answer, is_near_miss, prompt
from zoo.aporia.sampling import balanced, sample_pairs


class ScriptedGenerator:
    """Answers correctly with a probability that depends on the question; otherwise names a wrong capital."""

    def __init__(self) -> None:
        self.by_prompt = {}
        for fact in country_facts():
            for template in range(5):
                self.by_prompt[prompt(fact, template)] = fact
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
        prompts_per_model=5,
        samples=30,
        max_samples=40,
        min_per_class=6,
        probe_samples=10,
        candidates_per_model=400,
        greedy_wrong_share=0.0,  # the scripted generator's greedy answers are always right
        min_near_miss_share=0.0,  # its wrong capitals are random: keep every pair
    )
    pairs, stats = sample_pairs("scripted", ScriptedGenerator(), config, model_index=0)
    assert 0 < len(pairs) <= 5
    for pair in pairs:
        assert pair["attribute"] == "capital"  # other attributes' bare values are malformed, so never mixed
        assert pair["temperature"] in config.temperatures
        assert len(pair["responses"]) == 30
        n_h = sum(pair["labels"])
        assert min(n_h, 30 - n_h) >= 6
        genuine = [r for r, y in zip(pair["responses"], pair["labels"]) if y == 0]
        assert set(genuine) == {f"The capital of {pair['country']} is {pair['value']}."}
    assert stats["pairs_kept"] == len(pairs)
    assert stats["probe_malformed_rate"] == 0.0  # only greedy-right facts (capitals) were probed
    assert 0 < stats["greedy_accuracy"] < 1  # greedy is always right for capitals only


class NearMissGenerator(ScriptedGenerator):
    """Wrong answers name one capital per fact: a near miss of the true one for even facts, a far one for odd."""

    def __init__(self) -> None:
        super().__init__()
        self.wrong, self.near = {}, {}
        for fact in country_facts():
            if fact.attribute != "capital":
                continue
            near = [c for c in self.capitals if c != fact.value and is_near_miss(fact, extract_answer(fact, c) or c)]
            far = [c for c in self.capitals if c != fact.value and c not in near]
            self.near[fact.key] = zlib.crc32(fact.key.encode()) % 2 == 0 and bool(near)
            self.wrong[fact.key] = (near if self.near[fact.key] else far)[0]

    def sample(self, prompts, n=1, *, temperature=1.0, seed=0, **kwargs):
        out = []
        for text, answers in zip(prompts, super().sample(prompts, n, temperature=temperature, seed=seed)):
            fact = self.by_prompt[text]
            right = f"The capital of {fact.country} is {fact.value}."
            wrong = f"The capital of {fact.country} is {self.wrong.get(fact.key)}."
            out.append([a if a == right or fact.attribute != "capital" else wrong for a in answers])
        return out


@pytest.mark.parametrize("min_share", [0.0, 0.5])
def test_pairs_keep_near_miss_hallucinations_one_pair_per_fact(min_share):
    config = SocratesConfig(
        prompts_per_model=12, samples=20, max_samples=24, min_per_class=3, probe_samples=10,
        candidates_per_model=2000, greedy_wrong_share=0.0, min_near_miss_share=min_share,
    )  # fmt: skip
    generator = NearMissGenerator()
    pairs, stats = sample_pairs("scripted", generator, config, model_index=0)
    assert len(pairs) == 12
    facts = [p["fact"] for p in pairs]
    assert len(set(facts)) == len(facts)  # one pair per fact, whatever its phrasings
    near = [generator.near[f] for f in facts]
    if min_share:
        assert all(near) and all(p["near_miss_share"] == 1.0 for p in pairs)
        assert stats["prompts_probed"] > 2 * len(pairs)  # far-miss facts were probed and screened out
    else:
        assert not all(near)  # the first release's rule keeps far misses too
    assert all(p["attribute"] != "region" for p in pairs)
    assert all(p["prompt"] == prompt(country_facts_by_key()[p["fact"]], p["question_template"]) for p in pairs)


def country_facts_by_key():
    return {f.key: f for f in country_facts()}


class ConfidentlyWrongGenerator(ScriptedGenerator):
    """Greedy decoding names a wrong capital where the sampled answers are mostly wrong."""

    def sample(self, prompts, n=1, *, temperature=1.0, seed=0, **kwargs):
        if temperature > 0:
            return super().sample(prompts, n, temperature=temperature, seed=seed)
        out = []
        for text in prompts:
            fact = self.by_prompt[text]
            right = (zlib.crc32(fact.key.encode()) % 7) / 6 >= 0.5
            value = fact.value if right else next(c for c in self.capitals if c != fact.value)
            out.append([f"The capital of {fact.country} is {value}." if fact.attribute == "capital" else value])
        return out


def test_pairs_are_stratified_by_greedy_correctness():
    config = SocratesConfig(
        prompts_per_model=6, samples=20, max_samples=24, min_per_class=3, probe_samples=8, candidates_per_model=600,
        greedy_wrong_share=0.5, min_near_miss_share=0.0,
    )  # fmt: skip
    pairs, stats = sample_pairs("scripted", ConfidentlyWrongGenerator(), config, model_index=0)
    assert len(pairs) == 6
    assert sum(not p["greedy_genuine"] for p in pairs) == 3  # half the pairs: the greedy answer is wrong
    assert stats["kept_greedy_accuracy"] == 0.5
    assert 0 < stats["probe_malformed_rate"] < 1  # bare values of other attributes: counted, never labelled


def test_top_up_fills_a_generator_whose_greedy_stratum_runs_out():
    # every pair quota goes to greedy-wrong prompts, but the scripted generator's greedy capitals are all right
    # (its other attributes' bare values are malformed, so never kept): the first sweep keeps nothing
    config = SocratesConfig(
        prompts_per_model=4, samples=20, max_samples=24, min_per_class=3, probe_samples=8, candidates_per_model=600,
        greedy_wrong_share=1.0, min_near_miss_share=0.0, balance_strata=False,
    )  # fmt: skip
    pairs, stats = sample_pairs("scripted", ScriptedGenerator(), config, model_index=0)
    assert len(pairs) == 4 and stats["pairs_topped_up"] == 4
    assert all(p["greedy_genuine"] for p in pairs)
    assert len({p["fact"] for p in pairs}) == 4
    capped, _ = sample_pairs("scripted", ScriptedGenerator(), replace(config, greedy_wrong_share=0.0), 0)
    assert [p["fact"] for p in capped] == [p["fact"] for p in pairs]  # the same candidates, in the same order


def test_balanced_keeps_the_first_pairs_of_each_stratum_in_the_target_ratio():
    kept = [{"id": i, "greedy_genuine": g} for i, g in enumerate([True, True, False, True, False, True, True])]
    assert [p["id"] for p in balanced(kept, 0.5)] == [0, 1, 2, 4]  # 2 wrong: the first 2 right ones
    assert [p["id"] for p in balanced(kept, 0.25)] == [0, 1, 2, 3, 5, 6]  # 5 right allow 6.7 pairs: 1 wrong
    assert balanced(kept, 0.0) == kept and balanced(kept, 1.0) == kept  # one stratum only: nothing to balance
    assert balanced([p for p in kept if p["greedy_genuine"]], 0.5) == []  # no wrong pair: none of either


def test_balanced_strata_cut_the_first_sweep_instead_of_topping_up():
    config = SocratesConfig(
        prompts_per_model=40, samples=20, max_samples=24, min_per_class=3, probe_samples=8, candidates_per_model=300,
        greedy_wrong_share=0.5, min_near_miss_share=0.0,
    )  # fmt: skip
    assert config.balance_strata  # the default
    pairs, stats = sample_pairs("scripted", ConfidentlyWrongGenerator(), config, model_index=0)
    unbalanced, old = sample_pairs("scripted", ConfidentlyWrongGenerator(), replace(config, balance_strata=False), 0)
    first_sweep = unbalanced[: len(unbalanced) - old["pairs_topped_up"]]
    wrong = sum(not p["greedy_genuine"] for p in first_sweep)
    assert 0 < wrong < len(first_sweep) - wrong  # the strata differ: the cut has work to do
    assert [p["fact"] for p in pairs] == [p["fact"] for p in balanced(first_sweep, 0.5)]
    assert sum(not p["greedy_genuine"] for p in pairs) == wrong == len(pairs) // 2
    assert stats["pairs_cut_to_balance"] == len(first_sweep) - len(pairs) and stats["pairs_topped_up"] == 0
    assert stats["pairs_kept"] == len(pairs) and stats["kept_greedy_accuracy"] == 0.5


def test_socrates_mini_round_trip(tmp_path):
    config = SocratesConfig(
        generators=("scripted",), prompts_per_model=2, samples=12, max_samples=16, min_per_class=3, probe_samples=8,
        candidates_per_model=300, greedy_wrong_share=0.0, min_near_miss_share=0.0,
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


def test_the_dataset_cache_is_the_zoos_data_cache(monkeypatch, tmp_path):
    from zoo.aporia.cache import cache_root

    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path))
    assert cache_root() == tmp_path / "aporia"  # zoo._paths.cache_dir("aporia"), no default of its own


def _toy_dataset(seed: int) -> SocratesMini:
    values = [("Lima", "Lima", "Quito"), ("Lima", "Cusco", "Bogota")][seed]
    responses = [f"The capital of Peru is {v}." for v in values * 2]
    x = np.stack([np.random.default_rng(zlib.crc32(r.encode())).normal(size=384) for r in responses])  # per text
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    labels = np.array([v != "Lima" for v in values * 2], np.int8)
    return SocratesMini(
        responses,
        labels,
        np.repeat([0, 1], 3).astype(np.int32),
        x,
        [{"model": "m", "fact": "capital:Peru"}] * 2,
        {"m": {"pairs_kept": 2}},
        {"seed": seed},
    )


def test_artifact_round_trip_and_hash_check(tmp_path):
    path = tmp_path / "socrates_mini.npz"
    digest = save_artifact({0: _toy_dataset(0), 1: _toy_dataset(1)}, path)
    assert digest == sha256_file(path)
    loaded = load_artifact(path, digest)
    assert sorted(loaded) == [0, 1]
    for seed in (0, 1):
        original = _toy_dataset(seed)
        assert loaded[seed].responses == original.responses and loaded[seed].pairs == original.pairs
        np.testing.assert_array_equal(loaded[seed].labels, original.labels)
        np.testing.assert_allclose(loaded[seed].embeddings, original.embeddings, atol=2e-3)  # float16 on disk
    with pytest.raises(ZooError, match="sha256 .* the pin is"):
        load_artifact(path, "0" * 64)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte
    path.write_bytes(bytes(data))
    with pytest.raises(ZooError, match="corrupted or was rebuilt"):
        load_artifact(path, digest)
    with pytest.raises(ZooError, match="is missing"):
        load_artifact(tmp_path / "nothing.npz", digest)


def test_published_artifact_is_checked_against_the_registry_pin(monkeypatch):
    from zoo._registry import get_entry
    from zoo.aporia import artifact

    pins = get_entry("aporia.socrates_mini").pretrained_cfg.sha256
    for seed in PUBLISHED_SEEDS:
        name = artifact_name(seed)
        assert name in pins, "every shipped dataset must be pinned"
        assert sha256_file(artifact.artifact_path(seed)) == pins[name]
        assert artifact.artifact_path(seed).stat().st_size < 10_000_000, "each shipped file stays under 10 MB"
    monkeypatch.setattr(artifact, "_PUBLISHED", {})
    monkeypatch.setitem(pins, artifact_name(1), "f" * 64)  # a pin the shipped file does not match
    assert artifact.published(0).pairs  # each seed's file is checked on its own
    with pytest.raises(ZooError, match="corrupted or was rebuilt"):
        artifact.published(1)
    with pytest.raises(ZooError, match="published for dataset seeds"):
        artifact.published(7)
