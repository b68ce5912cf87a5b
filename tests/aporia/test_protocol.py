"""The evaluation protocol: folds, class-balanced nested label draws, no test-label leakage, the baselines."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from zoo.aporia.baselines import (
    knn_predict,
    logistic_regression,
    majority_vote_predict,
    nearest_mean_predict,
    self_consistency_predict,
    semantic_clusters,
    semantic_entropy,
    semantic_entropy_predict,
)
from zoo.aporia.folds import answer_groups, balanced_labels, grouped_folds, stratified_folds
from zoo.aporia.protocol import (
    SUPERVISED_ARMS,
    ProtocolConfig,
    _supervised_predictions,
    evaluate_pair,
    f1_hallucinated,
    tune_pair,
)


def _pair(seed: int = 0, n: int = 100, n_h: int = 30, d: int = 24):
    rng = np.random.default_rng(seed)
    anchor = rng.normal(size=d)
    genuine = anchor + 0.1 * rng.normal(size=(n - n_h, d))
    hallucinated = anchor + 0.6 * rng.normal(size=(n_h, d)) + 0.5 * rng.normal(size=d)
    x = np.r_[genuine, hallucinated]
    return x / np.linalg.norm(x, axis=1, keepdims=True), np.r_[np.zeros(n - n_h), np.ones(n_h)].astype(int)


def test_folds_are_stratified_and_partition_the_pair():
    _, y = _pair()
    folds = stratified_folds(y, 5, seed=0)
    tests = np.concatenate([test for _, test in folds])
    assert sorted(tests) == list(range(len(y)))
    for train, test in folds:
        assert len(test) == 20 and y[test].sum() == 6 and not set(train) & set(test)


def _texts(y: np.ndarray, seed: int = 0) -> list[str]:
    """Answer strings with repeats: 6 genuine phrasings, 12 hallucinated ones."""
    rng = np.random.default_rng(seed)
    return [f"genuine {rng.integers(6)}" if label == 0 else f"wrong {rng.integers(12)}" for label in y]


def test_grouped_folds_keep_every_answer_string_in_one_test_part():
    _, y = _pair()
    texts = _texts(y)
    folds = grouped_folds(y, texts, 5, seed=3)
    assert sorted(np.concatenate([test for _, test in folds])) == list(range(len(y)))
    for train, test in folds:
        assert not {texts[i] for i in train} & {texts[i] for i in test}  # no test answer has a labelled twin
        assert y[test].sum() > 0 and (y[test] == 0).sum() > 0  # the greedy balance spreads both classes
    again = grouped_folds(y, texts, 5, seed=3)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(folds, again))  # deterministic per seed
    assert answer_groups(["Lima is it.", " lima  IS it", "Lima is it!"]) == ["lima is it"] * 3
    with pytest.raises(ValueError, match="group keys"):
        grouped_folds(y, texts[:-1], 5, seed=0)


def test_grouped_folds_give_one_cross_validated_f1_per_pair():
    x, y = _pair(seed=2, n=40, n_h=10)
    two = ["right"] * 30 + ["wrong"] * 10  # two strings: a part holds all of a class, so no fold has an F1
    assert sum(len(test) == 0 for _, test in grouped_folds(y, two, 5, seed=0)) == 3
    config = ProtocolConfig(budgets=(10,), draws=1)
    arms = ["aporia_lp", "logreg", "self_consistency", "reference_majority_vote"]
    f1 = evaluate_pair(x, y, config, 0, arms=arms, answers=two, groups=two)
    assert all(f1[arm].shape == (1, 1, 1) and np.isnan(f1[arm]).all() for arm in arms)
    texts = _texts(y, seed=1)
    f1 = evaluate_pair(x, y, config, 0, arms=arms, answers=texts, groups=texts)
    assert f1["aporia_lp"].shape == (1, 1, 1) and f1["aporia_lp"][0, 0, 0] > 0.8  # one F1 over all 40 answers
    # every answer counts once: flagging every answer scores the pooled F1 of "all hallucinated"
    everything = evaluate_pair(
        x, y, replace(config, entropy_threshold=2.0), 0, ["semantic_entropy"], texts, None, texts
    )
    assert everything["semantic_entropy"][0, 0, 0] == pytest.approx(f1_hallucinated(y, np.ones_like(y)))
    tuned = tune_pair(x, y, config, 0, {"logreg": (10.0, 1000.0), "self_consistency": (0.9,)}, 10, 1, groups=texts)
    assert tuned["logreg"].shape == (5, 2) and np.isfinite(tuned["logreg"]).any()


def test_label_draws_are_balanced_nested_and_capped():
    y = np.r_[np.zeros(70), np.ones(8)].astype(int)
    draws = balanced_labels(y, [10, 20, 40], np.random.default_rng(0))
    assert [len(d) for d in draws] == [10, 20, 40]
    assert [int(y[d].sum()) for d in draws] == [5, 8, 8]  # the short hallucinated class is capped at 8
    assert set(draws[0]) <= set(draws[1]) <= set(draws[2])
    assert len(balanced_labels(y[:12], [40], np.random.default_rng(0))[0]) == 12


def test_test_labels_never_reach_the_classifiers():
    x, y = _pair(seed=1)
    train, test = stratified_folds(y, 5, seed=0)[0]
    labelled = train[balanced_labels(y[train], [20], np.random.default_rng(0))[0]]
    pool = np.setdiff1d(train, labelled)
    config = ProtocolConfig()
    before = _supervised_predictions(x, y, labelled, pool, test, config, SUPERVISED_ARMS)
    scrambled = y.copy()
    scrambled[test] = 1 - scrambled[test]
    scrambled[pool] = 1 - scrambled[pool]
    after = _supervised_predictions(x, scrambled, labelled, pool, test, config, SUPERVISED_ARMS)
    assert before.keys() == set(SUPERVISED_ARMS)
    for arm in SUPERVISED_ARMS:
        np.testing.assert_array_equal(before[arm], after[arm], err_msg=arm)


def test_evaluate_pair_runs_every_arm_and_aporia_separates_a_clear_pair():
    x, y = _pair(seed=2)
    config = ProtocolConfig(budgets=(10, 40), splits=5, draws=2)
    answers = ["lima" if label == 0 else "quito" for label in y]  # the majority answer is the genuine one
    f1 = evaluate_pair(x, y, config, pair_seed=0, answers=answers)
    assert all(v.shape == (5, 2, 2) for v in f1.values())
    assert f1["aporia_lp"][..., 1].mean() > 0.9
    assert np.all((f1["self_consistency"] >= 0) & (f1["self_consistency"] <= 1))
    np.testing.assert_array_equal(f1["reference_majority_vote"], 1.0)
    with pytest.raises(ValueError, match="unknown arms"):
        evaluate_pair(x, y, config, pair_seed=0, arms=("magic",))
    with pytest.raises(ValueError, match="parsed answers"):
        evaluate_pair(x, y, config, pair_seed=0, arms=("reference_majority_vote",))


def test_tuning_never_sees_the_test_folds():
    """tune_pair's row for fold s uses only fold s's training part: that fold's test points cannot move it."""
    x, y = _pair(seed=3)
    config = ProtocolConfig(splits=5)
    grids = {"aporia_lp": (0.1, 10.0), "logreg": (0.1, 100.0), "knn": (1, 5), "self_consistency": (0.8, 0.95)}
    grids["label_spreading"] = (2.0, 20.0)
    before = tune_pair(x, y, config, 0, grids, budget=20, draws=2)
    assert {arm: v.shape for arm, v in before.items()} == {arm: (5, 2) for arm in grids}
    assert all(np.all((v >= 0) & (v <= 1)) for v in before.values())
    assert before["aporia_lp"].max() > 0.8  # a clear pair: validation F1 is informative
    # the folds follow the labels, so the test points are changed by their embeddings (labels cannot be changed
    # without moving the folds); a row reads a point's label only where it reads its embedding
    _, test = stratified_folds(y, 5, seed=0)[0]
    changed = x.copy()
    changed[test] = -changed[test]
    after = tune_pair(changed, y, config, 0, grids, budget=20, draws=2)
    for arm in grids:
        np.testing.assert_array_equal(after[arm][0], before[arm][0], err_msg=arm)  # fold 0 never saw them
    assert any(not np.array_equal(after[arm][1:], before[arm][1:]) for arm in grids)  # other folds train on them


def test_small_baselines_by_hand():
    assert f1_hallucinated(np.array([1, 1, 0, 0]), np.array([1, 0, 1, 0])) == pytest.approx(0.5)
    assert f1_hallucinated(np.array([0, 0]), np.array([0, 0])) == 0.0
    x_lab = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    y_lab = np.array([0, 0, 1])
    np.testing.assert_array_equal(knn_predict(x_lab, y_lab, np.array([[1.0, 0.05], [0.1, 1.0]]), k=1), [0, 1])
    # four near-identical answers and two outliers: the outliers are flagged, no labels needed
    x = np.array([[1.0, 0.0], [0.99, 0.01], [0.98, 0.02], [1.0, 0.01], [0.0, 1.0], [-1.0, 0.0]])
    np.testing.assert_array_equal(self_consistency_predict(x, 0.8), [0, 0, 0, 0, 1, 1])
    # the label-free reference: the most common parsed answer is genuine, others and unparsed answers are not
    np.testing.assert_array_equal(majority_vote_predict(["lima", "lima", None, "quito", "lima"]), [0, 0, 1, 1, 0])
    np.testing.assert_array_equal(majority_vote_predict([None, None]), [1, 1])
    np.testing.assert_array_equal(nearest_mean_predict(x_lab, y_lab, np.array([[0.8, 0.2], [0.2, 0.9]])), [0, 1])


@pytest.mark.parametrize("n, d", [(40, 384), (60, 8)])
def test_logistic_regression_matches_sklearn(n, d):
    """The row-space Newton solver reaches sklearn's optimum, both with L < d (separable) and L > d."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(n + d)
    x = rng.normal(size=(n, d))
    y = (rng.random(n) < 0.4).astype(int)
    x[y == 1] += 0.3
    reference = LogisticRegression(C=0.7, tol=1e-12, max_iter=100_000).fit(x, y)
    weights, bias = logistic_regression(x, y, c=0.7)
    np.testing.assert_allclose(weights, reference.coef_[0], atol=1e-5)
    assert bias == pytest.approx(reference.intercept_[0], abs=1e-5)


def test_semantic_entropy_by_hand():
    answers = ["lima", "lima", "lima", "lima", "quito", "quito", "cusco", None]
    cluster, share = semantic_clusters(answers)
    assert cluster.tolist() == [0, 0, 0, 0, 1, 1, 2, 3]  # an unparsed answer is a cluster of its own
    np.testing.assert_allclose(share, [0.5, 0.25, 0.125, 0.125])
    assert semantic_entropy(answers) == pytest.approx(-(0.5 * np.log(0.5) + 0.25 * np.log(0.25) + 0.25 * np.log(0.125)))
    # threshold 1: every cluster smaller than the largest is flagged (the majority vote)
    assert semantic_entropy_predict(answers, 1.0).tolist() == majority_vote_predict(answers).tolist()
    # threshold 0.4: clusters with under 0.4 x 0.5 = 0.2 of the answers are flagged; "quito" (0.25) is kept
    assert semantic_entropy_predict(answers, 0.4).tolist() == [0, 0, 0, 0, 0, 0, 1, 1]
    assert semantic_entropy(["a"] * 5) == 0.0


def test_bootstrap_interval():
    from zoo.aporia.evaluate import bootstrap_interval

    values = np.random.default_rng(0).normal(0.8, 0.1, size=400)
    low, high = bootstrap_interval(values, 2000, seed=0)
    assert low < values.mean() < high
    assert high - low == pytest.approx(2 * 1.96 * values.std() / np.sqrt(400), rel=0.15)  # the normal width
    assert bootstrap_interval(np.full(10, 0.7), 100, seed=0) == pytest.approx((0.7, 0.7))
