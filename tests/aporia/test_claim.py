"""``zoo eval aporia`` through the harness: settings, claims, and the full protocol (slow)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from zoo._errors import ZooError
from zoo._eval import Run, run_eval
from zoo.aporia import evaluate
from zoo.aporia.dataset import SocratesMini
from zoo.aporia.facts import country_facts


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
            fact.answer(k % 4) if label == 0 else f"The capital of {fact.country} is {fake[k % 5]}."
            for k, label in enumerate(y)
        ]
        labels.append(y)
        embeddings.append(x / np.linalg.norm(x, axis=1, keepdims=True))
    meta = [{"model": "aporia.gen_gpt2_s", "fact": f.key} for f in facts]
    return SocratesMini(responses, np.concatenate(labels), np.repeat(np.arange(pairs), n), np.vstack(embeddings), meta)


@pytest.fixture
def tiny_run(monkeypatch):
    """A Run over the tiny dataset (the real one takes minutes to build), one process, a short permutation test."""
    monkeypatch.setitem(evaluate._DATA, (None, 0), (_tiny_dataset(), {}, {}))

    def make(**overrides):
        settings = evaluate.PROTOCOL.resolve(
            {"workers": 1, "permutations": 50, "bootstrap": 200, "draws": 1, "tune_draws": 1, **overrides}
        )
        return Run({}, evaluate.PROTOCOL, seed=0, settings=settings)

    return make


def test_set_labels_and_budgets_change_what_is_measured(tiny_run):
    default = evaluate.measure("reference_nearest_mean", tiny_run(budgets=[10], labels=10))
    assert set(default) == {"f1_at_10_labels", "f1_at_10_labels_ci_low", "f1_at_10_labels_ci_high", "tuning_trials"}
    assert default["f1_at_10_labels_ci_low"] <= default["f1_at_10_labels"] <= default["f1_at_10_labels_ci_high"]
    assert default["tuning_trials"] == 0
    run = tiny_run(budgets=[10], labels=16)
    scores = evaluate.measure("aporia_lp", run)
    assert {"f1_at_10_labels", "f1_at_16_labels", "tightness_p_value"} <= set(scores)
    assert scores["f1_at_16_labels"] > 0.8  # a clear toy pair
    # the majority vote needs no labels and reads the parsed answers: a made-up city is never the majority
    assert evaluate.measure("reference_majority_vote", run)["f1_at_16_labels"] == pytest.approx(1.0)
    assert evaluate.measure("semantic_entropy", run)["tuning_trials"] == len(evaluate.GRIDS["semantic_entropy"])
    assert evaluate.measure("logreg", run)["tuning_trials"] == 5  # the same budget as APORIA-LP's lambda
    # every tuned arm records its per-fold choice from its grid
    for arm, grid in evaluate.GRIDS.items():
        assert set(run.extras["tuned"][arm]["chosen_per_fold"]) <= set(grid)
    assert len(run.extras["tuned"]["logreg"]["chosen_per_fold"]) == run.settings["folds"]


def test_each_seed_evaluates_its_own_dataset_unless_one_is_fixed(monkeypatch):
    monkeypatch.setitem(evaluate._DATA, (None, 0), (_tiny_dataset(3), {}, {}))
    monkeypatch.setitem(evaluate._DATA, (None, 1), (_tiny_dataset(2), {}, {}))
    quick = {"workers": 1, "permutations": 20, "bootstrap": 50, "budgets": [10], "labels": 10}
    for seed, fixed, pairs in [(0, -1, 3), (1, -1, 2), (1, 0, 3)]:
        run = Run(
            {}, evaluate.PROTOCOL, seed=seed, settings=evaluate.PROTOCOL.resolve({**quick, "dataset_seed": fixed})
        )
        evaluate.measure("aporia_lp", run)
        assert (run.extras["pairs_evaluated"], run.extras["dataset_seed"]) == (pairs, seed if fixed < 0 else fixed)
    assert evaluate.PROTOCOL.resolve({})["grouped"] is True  # answer-grouped folds by default


def test_set_folds_changes_the_folds(tiny_run):
    two = tiny_run(budgets=[10], labels=10, folds=2)
    evaluate.measure("aporia_lp", two)
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
        run_eval("aporia", seeds=[0], overrides=[pair])
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


def test_card_has_the_acceptance_arms_and_passes_the_headroom_gate():
    """The published card (zoo eval aporia --card): every arm and metric issue 18 names, and the headroom gate."""
    import json

    import zoo

    metrics = json.loads((zoo.get_entry("aporia.socrates_mini").mirror_dir / "metrics.json").read_text())
    assert metrics["seeds"] == [0, 1, 2]
    _check_acceptance_keys(metrics["arms"], with_std=True)
    arms, claims = metrics["arms"], {claim["id"]: claim for claim in metrics["claims"]}
    assert claims["headroom_label_free"]["holds"], claims["headroom_label_free"]  # majority vote <= 0.80
    assert claims["headroom_tuned_baseline"]["holds"], claims["headroom_tuned_baseline"]  # best baseline < 0.95
    best = max(evaluate.PROTOCOL.baselines, key=lambda b: arms[b]["f1_at_40_labels"])
    assert claims["headroom_tuned_baseline"]["value"] == pytest.approx(arms[best]["f1_at_40_labels"], abs=1e-6)
    # the claim is recorded from the arms whichever way it goes (this card: +0.014 with overlapping intervals)
    gap = arms["aporia_lp"]["f1_at_40_labels"] - arms[best]["f1_at_40_labels"]
    assert claims["aporia_lp_ahead_of_best_baseline"]["value"] == pytest.approx(gap, abs=1e-5)


@pytest.mark.slow
def test_aporia_protocol_on_socrates_mini():
    """The protocol on the shipped SOCRATES-mini (10 pairs per generator, one seed): every arm and metric."""
    result = run_eval("aporia", seeds=[0], overrides={"max_pairs": 10, "permutations": 500, "bootstrap": 300})
    _check_acceptance_keys(result["arms"], with_std=False)
    assert set(result["arms"]) == set(evaluate.PROTOCOL.arms)
    from zoo.aporia.dataset import published

    per_generator = Counter(pair["model"] for pair in published(0).pairs)
    assert result["extras"]["0"]["pairs_evaluated"] == sum(min(10, n) for n in per_generator.values())
    ids = {claim["id"] for claim in result["claims"]}
    assert {"headroom_label_free", "headroom_tuned_baseline", "aporia_lp_ahead_of_best_baseline"} <= ids
