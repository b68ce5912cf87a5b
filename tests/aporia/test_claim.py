"""``zoo eval aporia`` through the harness: settings, claims, and the full protocol (slow)."""

from __future__ import annotations

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
        responses += [fact.answer(0) if label == 0 else f"The capital of {fact.country} is Atlantis." for label in y]
        labels.append(y)
        embeddings.append(x / np.linalg.norm(x, axis=1, keepdims=True))
    meta = [{"model": "aporia.gen_gpt2_s", "fact": f.key} for f in facts]
    return SocratesMini(responses, np.concatenate(labels), np.repeat(np.arange(pairs), n), np.vstack(embeddings), meta)


@pytest.fixture
def tiny_run(monkeypatch):
    """A Run over the tiny dataset (the real one takes minutes to build), one process, a short permutation test."""
    monkeypatch.setitem(evaluate._DATA, None, (_tiny_dataset(), {}, {}))

    def make(**overrides):
        settings = evaluate.PROTOCOL.resolve(
            {"workers": 1, "permutations": 50, "draws": 1, "tune_draws": 1, **overrides}
        )
        return Run({}, evaluate.PROTOCOL, seed=0, settings=settings)

    return make


def test_set_labels_and_budgets_change_what_is_measured(tiny_run):
    default = evaluate.measure("reference_nearest_mean", tiny_run(budgets=[10], labels=10))
    assert set(default) == {"f1_at_10_labels"}
    run = tiny_run(budgets=[10], labels=16)
    scores = evaluate.measure("aporia_lp", run)
    assert {"f1_at_10_labels", "f1_at_16_labels", "tightness_p_value"} <= set(scores)
    assert scores["f1_at_16_labels"] > 0.8  # a clear toy pair
    # the majority vote needs no labels and reads the parsed answers: "Atlantis" is never the majority
    assert evaluate.measure("reference_majority_vote", run)["f1_at_16_labels"] == pytest.approx(1.0)
    # every tuned arm records its per-fold choice from its grid
    for arm, grid in evaluate.GRIDS.items():
        assert set(run.extras["tuned"][arm]["chosen_per_fold"]) <= set(grid)
    assert len(run.extras["tuned"]["logreg"]["chosen_per_fold"]) == run.settings["folds"]


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


def _result(per_seed: dict[str, list[float]], labels: int = 40) -> dict:
    key = f"f1_at_{labels}_labels"
    lp = {"tightness_p_value": 1e-4, "tightness_frac_pairs": 0.9}
    return {
        "settings": {"labels": labels},
        "arms": {arm: {key: float(np.mean(v)), **(lp if arm == "aporia_lp" else {})} for arm, v in per_seed.items()},
        "per_seed": {arm: {str(s): {key: value} for s, value in enumerate(v)} for arm, v in per_seed.items()},
    }


def test_claims_compare_with_the_references_and_the_best_baseline():
    scores = {"aporia_lp": [0.95, 0.96, 0.97], "reference_majority_vote": [0.90, 0.91, 0.92]}
    scores |= {"reference_nearest_mean": [0.94, 0.95, 0.96], "logreg": [0.80, 0.81, 0.79], "knn": [0.94, 0.97, 0.96]}
    claims = {claim.id: claim for claim in evaluate.claims(_result(scores))}
    assert claims["aporia_lp_beats_reference_majority_vote_f1_at_40_labels"].holds  # +0.05
    assert not claims["aporia_lp_beats_reference_nearest_mean_f1_at_40_labels"].holds  # +0.01 < 0.02
    assert not claims["aporia_lp_beats_knn_f1_at_40_labels"].holds  # the best baseline, not logreg
    assert claims["f1_at_labels"].holds and claims["tightness_p_value"].holds and claims["tightness_frac_pairs"].holds
    assert "aporia_lp_beats_knn_f1_at_20_labels" in {c.id for c in evaluate.claims(_result(scores, labels=20))}


@pytest.mark.slow
def test_aporia_claims_on_socrates_mini():
    """The default protocol on SOCRATES-mini (builds the dataset if it is not cached): the paper's claims."""
    result = run_eval("aporia", seeds=[0])
    claims = {claim["id"]: claim for claim in result["claims"]}
    assert claims["f1_at_labels"]["holds"]  # few-label detection: F1 >= 0.90 at 40 labels
    assert claims["tightness_p_value"]["holds"] and claims["tightness_frac_pairs"]["holds"]  # geometry
    assert set(result["arms"]) == set(evaluate.PROTOCOL.arms)
