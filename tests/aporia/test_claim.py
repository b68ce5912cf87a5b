"""``zoo eval aporia`` through the harness: settings, claims, and the full protocol (slow)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from zoo._errors import ZooError
from zoo.aporia import evaluate
from zoo.aporia.dataset import SocratesMini
from zoo.aporia.facts import answer_text, country_facts
from zoo.eval import Run


def _tiny_dataset(pairs: int = 3, n: int = 30, d: int = 8) -> SocratesMini:
    """Pairs of capital questions: genuine answers tight around one point, hallucinated ones shifted and spread."""
    rng = np.random.default_rng(0)
    facts = [f for f in country_facts() if f.attribute == "capital"][:pairs]
    responses, labels, embeddings = [], [], []
    for fact in facts:
        y = (np.arange(n) % 3 == 0).astype(np.int8)  # a third hallucinated
        anchor, shift = rng.normal(size=d), rng.normal(size=d)
        x = anchor + y[:, None] * shift + np.where(y[:, None] == 1, 0.5, 0.1) * rng.normal(size=(n, d))
        fake = ("Atlantis", "Lemuria", "Avalon", "Camelot", "Utopia")  # several phrasings and values per class,
        responses += [  # so that the answer-grouped folds have both classes in every part
            answer_text(fact, k % 4) if label == 0 else f"The capital of {fact.country} is {fake[k % 5]}."
            for k, label in enumerate(y)
        ]
        labels.append(y)
        embeddings.append(x / np.linalg.norm(x, axis=1, keepdims=True))
    meta = [{"model": "aporia.gen_gpt2_s", "fact": f.key} for f in facts]
    return SocratesMini(responses, np.concatenate(labels), np.repeat(np.arange(pairs), n), np.vstack(embeddings), meta)


def _run(seed: int = 0, **overrides) -> Run:
    settings = evaluate.PROTOCOL.resolve(
        {"permutations": 50, "bootstrap": 200, "draws": 1, "tune_draws": 1, **overrides}
    )
    return Run(evaluate.PROTOCOL, "aporia", seed, settings, {})


@pytest.fixture
def tiny_run(monkeypatch):
    """A Run over the tiny dataset (the real one takes minutes to build), a short permutation test."""
    monkeypatch.setattr(evaluate, "dataset_of", lambda run: _tiny_dataset())
    return _run


def test_classifier_arms_are_one_shared_pass_and_generators_are_measured():
    (group,) = evaluate.PROTOCOL.shared
    assert group.arms == evaluate.CLASSIFIERS and not group.timed
    assert set(evaluate.PROTOCOL.arms) == {*evaluate.CLASSIFIERS, *evaluate.GENERATORS}
    assert all(evaluate.PROTOCOL.arm(arm).measure is not None for arm in evaluate.GENERATORS)
    assert [step.stage for step in evaluate.PROTOCOL.steps if step.name == "build"] == ["prepare"]


def test_set_labels_and_budgets_change_what_is_measured(tiny_run):
    from zoo.eval.engine import measure_task

    default = measure_task(evaluate.PROTOCOL, tiny_run(budgets=[10], labels=10), ("reference_nearest_mean",))
    default = default["reference_nearest_mean"]
    assert set(default) == {"f1_at_10_labels", "f1_at_10_labels_ci_low", "f1_at_10_labels_ci_high", "tuning_trials"}
    assert default["f1_at_10_labels_ci_low"] <= default["f1_at_10_labels"] <= default["f1_at_10_labels_ci_high"]
    assert default["tuning_trials"] == 0
    run = tiny_run(budgets=[10], labels=16)
    scores = evaluate.classifiers(run)
    assert set(scores) == set(evaluate.CLASSIFIERS)
    assert {"f1_at_10_labels", "f1_at_16_labels", "tightness_p_value"} <= set(scores["aporia_lp"])
    assert scores["aporia_lp"]["f1_at_16_labels"] > 0.8  # a clear toy pair
    # the majority vote needs no labels and reads the parsed answers: a made-up city is never the majority
    assert scores["reference_majority_vote"]["f1_at_16_labels"] == pytest.approx(1.0)
    assert scores["semantic_entropy"]["tuning_trials"] == len(evaluate.GRIDS["semantic_entropy"])
    assert scores["logreg"]["tuning_trials"] == 5  # the same budget as APORIA-LP's lambda
    # every tuned arm records its per-fold choice from its grid
    for arm, grid in evaluate.GRIDS.items():
        assert set(run.extras["tuned"][arm]["chosen_per_fold"]) <= set(grid)
    assert len(run.extras["tuned"]["logreg"]["chosen_per_fold"]) == run.settings["folds"]


def test_each_seed_evaluates_its_own_dataset_unless_one_is_fixed(monkeypatch):
    import zoo.aporia.artifact as artifact

    monkeypatch.setattr(artifact, "published", lambda seed: _tiny_dataset(3 if seed == 0 else 2))
    quick = {"permutations": 20, "bootstrap": 50, "budgets": [10], "labels": 10}
    for seed, fixed, pairs in [(0, -1, 3), (1, -1, 2), (1, 0, 3)]:
        run = _run(seed, **quick, dataset_seed=fixed)
        evaluate.classifiers(run)
        assert (run.extras["pairs_evaluated"], run.extras["dataset_seed"]) == (pairs, seed if fixed < 0 else fixed)
    assert evaluate.PROTOCOL.resolve({})["grouped"] is True  # answer-grouped folds by default


def test_generator_arms_read_the_dataset_and_the_published_generator(monkeypatch):
    from zoo.eval.engine import measure_task

    stats = {"probe_accuracy": 0.5, "malformed_rate": 0.3, "probe_malformed_rate": 0.35, "pairs_kept": 12}
    stats |= {"kept_greedy_accuracy": 0.5, "kept_hallucination_rate": 0.4, "kept_near_miss_share": 0.9}
    data = _tiny_dataset()
    data.models = {f"aporia.{arm}": dict(stats, prompts_probed=40) for arm in evaluate.GENERATORS}
    monkeypatch.setattr(evaluate, "dataset_of", lambda run: data)
    loaded = []

    class Generator:
        def greedy_accuracy(self):
            return 0.75

    run = _run(1)
    monkeypatch.setattr(run, "published", lambda arm: loaded.append(arm) or Generator())
    scores = measure_task(evaluate.PROTOCOL, run, ("gen_neox_s",))["gen_neox_s"]
    assert loaded == ["gen_neox_s"]  # the published generator, whatever the seed
    assert scores["greedy_accuracy"] == 0.75 and scores["pairs_kept"] == 12 and scores["prompts_probed"] == 40
    assert scores["kept_pairs_near_miss_share"] == 0.9 and scores["sampled_accuracy"] == 0.5


def test_set_folds_changes_the_folds(tiny_run):
    two = tiny_run(budgets=[10], labels=10, folds=2)
    evaluate.classifiers(two)
    assert len(two.extras["tuned"]["aporia_lp"]["validation_f1"]) == 2


@pytest.mark.parametrize(
    "pair, message",
    [
        ("nope=1", "unknown setting 'nope'; valid keys: labels, budgets, folds, draws"),
        ("folds=many", "--set folds=many: expected an integer"),
        ("folds=1", "--set folds=1: must be at least 2"),
        ("budgets=10,x", "--set budgets=10,x: expected a comma-separated list of int"),
    ],
)
def test_bad_settings_are_one_line_errors(pair, message):
    with pytest.raises(ZooError) as error:
        evaluate.PROTOCOL.parse_overrides([pair])
    assert message in str(error.value) and "\n" not in str(error.value)


def _result(per_seed: dict[str, list[float]], labels: int = 40, half_width: float = 0.01) -> dict:
    key = f"f1_at_{labels}_labels"
    lp = {"tightness_p_value": 1e-4, "tightness_frac_pairs": 0.9}

    def arm(name, values):
        mean = float(np.mean(values))
        ci = {f"{key}_ci_low": mean - half_width, f"{key}_ci_high": mean + half_width}
        return {key: mean, **ci, **(lp if name == "aporia_lp" else {})}

    return {
        "settings": {"labels": labels},
        "arms": {name: arm(name, v) for name, v in per_seed.items()},
        "per_seed": {name: {str(s): {key: value} for s, value in enumerate(v)} for name, v in per_seed.items()},
    }


def test_claims_compare_with_the_references_and_the_best_baseline():
    scores = {"aporia_lp": [0.95, 0.96, 0.97], "reference_majority_vote": [0.90, 0.91, 0.92]}
    scores |= {"reference_nearest_mean": [0.94, 0.95, 0.96], "logreg": [0.80, 0.81, 0.79], "knn": [0.94, 0.97, 0.96]}
    claims = {claim.id: claim for claim in evaluate.claims(_result(scores))}
    assert claims["aporia_lp_beats_reference_majority_vote_f1_at_40_labels"].holds  # +0.05
    assert not claims["aporia_lp_beats_reference_nearest_mean_f1_at_40_labels"].holds  # +0.01 < 0.02
    best = claims["aporia_lp_ahead_of_best_baseline"]
    assert best.versus == "knn" and not best.holds  # the best baseline, not logreg
    assert not claims["headroom_label_free"].holds  # the majority vote scores 0.91 > 0.80: data too easy
    assert not claims["headroom_tuned_baseline"].holds  # knn 0.957 is not below 0.95
    assert claims["f1_at_labels"].holds and claims["tightness_p_value"].holds and claims["tightness_frac_pairs"].holds
    assert "f1_at_20_labels" in evaluate.claims(_result(scores, labels=20))[0].id


def test_claim_needs_the_gap_and_separate_intervals():
    scores = {"aporia_lp": [0.86, 0.86, 0.86], "reference_majority_vote": [0.70, 0.71, 0.72]}
    scores |= {"reference_nearest_mean": [0.7, 0.7, 0.7], "logreg": [0.83, 0.83, 0.83]}
    claims = {c.id: c for c in evaluate.claims(_result(scores, half_width=0.005))}
    assert claims["aporia_lp_ahead_of_best_baseline"].holds  # +0.03, intervals 0.855-0.865 vs 0.825-0.835
    assert claims["aporia_lp_ahead_of_best_baseline"].value == pytest.approx(0.03)
    assert claims["headroom_label_free"].holds and claims["headroom_tuned_baseline"].holds
    overlapping = {c.id: c for c in evaluate.claims(_result(scores, half_width=0.02))}
    assert not overlapping["aporia_lp_ahead_of_best_baseline"].holds  # the gap alone is not enough
    # the headroom gates hold only if every seed's dataset holds them, not only their mean
    one_easy = {c.id: c for c in evaluate.claims(_result(scores | {"reference_majority_vote": [0.78, 0.81, 0.77]}))}
    assert not one_easy["headroom_label_free"].holds and one_easy["headroom_label_free"].value == pytest.approx(0.81)
    assert one_easy["headroom_label_free"].kind == "headroom"


ACCEPTANCE_ARMS = (
    "aporia_lp", "centroid", "label_spreading", "logreg", "knn", "self_consistency", "semantic_entropy",
    "reference_majority_vote",
)  # fmt: skip


def _check_acceptance_keys(arms: dict, with_std: bool) -> None:
    for arm in ACCEPTANCE_ARMS:
        for budget in (10, 20, 40):
            key = f"f1_at_{budget}_labels"
            wanted = [key, f"{key}_ci_low", f"{key}_ci_high"] + ([f"{key}_std"] if with_std else [])
            assert set(wanted) <= set(arms[arm]), (arm, key)
            assert arms[arm][f"{key}_ci_low"] <= arms[arm][key] + 1e-9 <= arms[arm][f"{key}_ci_high"] + 2e-9
        assert "tuning_trials" in arms[arm]
    trials = {arm: arms[arm]["tuning_trials"] for arm in ("aporia_lp", "logreg", "label_spreading", "self_consistency")}
    assert set(trials.values()) == {5}, trials  # the same tuning budget as APORIA-LP's


def test_card_has_the_acceptance_arms_and_its_headroom_gates_are_per_dataset():
    """The published card: every arm and metric the spec names; each headroom gate reads its worst dataset."""
    import json

    import zoo

    metrics = json.loads((zoo.get_entry("aporia.socrates_mini").mirror_dir / "metrics.json").read_text())
    assert metrics["seeds"] == [0, 1, 2]
    _check_acceptance_keys(metrics["arms"], with_std=True)
    arms, claims = metrics["arms"], {claim["id"]: claim for claim in metrics["claims"]}
    per_seed, key = metrics["per_seed"], "f1_at_40_labels"
    vote = [per_seed["reference_majority_vote"][seed][key] for seed in "012"]
    assert claims["headroom_label_free"]["value"] == pytest.approx(max(vote), abs=1e-6)
    assert claims["headroom_label_free"]["holds"] == (max(vote) <= 0.80)  # majority vote <= 0.80 on every dataset
    best = [max(per_seed[b][seed][key] for b in evaluate.BASELINES) for seed in "012"]
    assert claims["headroom_tuned_baseline"]["value"] == pytest.approx(max(best), abs=1e-6)
    assert claims["headroom_tuned_baseline"]["holds"] == (max(best) < 0.95)  # best baseline < 0.95 on every dataset
    # the claim is recorded from the arms whichever way it goes (this card: +0.014 with overlapping intervals)
    best_arm = max(evaluate.BASELINES, key=lambda b: arms[b][key])
    gap = arms["aporia_lp"][key] - arms[best_arm][key]
    assert claims["aporia_lp_ahead_of_best_baseline"]["value"] == pytest.approx(gap, abs=1e-5)
    assert claims["aporia_lp_ahead_of_best_baseline"]["kind"] == "paper"


@pytest.mark.slow
def test_aporia_protocol_on_socrates_mini(monkeypatch):
    """The protocol on the shipped SOCRATES-mini (10 pairs per generator, one seed): every arm and metric."""
    from zoo.eval.engine import Request, measure
    from zoo.eval.result import assemble

    monkeypatch.setenv("ZOO_EVAL_CACHE", "off")
    overrides = {"max_pairs": 10, "permutations": 500, "bootstrap": 300}
    pieces = measure("aporia", Request(seeds=(0,), overrides=overrides))
    result = assemble(evaluate.PROTOCOL, "aporia", pieces, evaluate.PROTOCOL.resolve(overrides), seeds=[0])
    _check_acceptance_keys(result["arms"], with_std=False)
    assert set(result["arms"]) == set(evaluate.PROTOCOL.arms)
    from zoo.aporia.artifact import published

    per_generator = Counter(pair["model"] for pair in published(0).pairs)
    assert result["extras"]["0"]["pairs_evaluated"] == sum(min(10, n) for n in per_generator.values())
    ids = {claim["id"] for claim in result["claims"]}
    assert {"headroom_label_free", "headroom_tuned_baseline", "aporia_lp_ahead_of_best_baseline"} <= ids
