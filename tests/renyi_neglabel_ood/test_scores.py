"""The scores' math against hand-computed and reference values, and their bad-input errors."""

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from zoo._errors import ZooError
from zoo.renyi_neglabel_ood.scores import (
    ScoreConfig,
    ZeroShotOODScorer,
    kl_energy_score,
    mcm_score,
    neglabel_score,
    objective,
    penalty,
    renyi_score,
    similarities,
    solve_beta,
)


def _sims(n=6, k=5, m=200, seed=0):
    rng = np.random.default_rng(seed)
    s_id = rng.normal(0.15, 0.05, (n, k))
    s_id[np.arange(n), rng.integers(k, size=n)] += 0.2  # one clearly top ID label per image
    return s_id, rng.normal(0.1, 0.05, (n, m))


def test_beta_from_descent_matches_minimize_scalar():
    s_id, s_neg = _sims()
    s = np.concatenate([s_id, s_neg], axis=1)
    tau, r, eta = 0.01, 1.05, 1.2
    descent = solve_beta(s, tau, r, eta, beta0=-0.1, steps=4000, lr=0.05)
    bisection = solve_beta(s, tau, r, eta, solver="bisection")
    reference = [
        minimize_scalar(
            lambda b, row=row: objective(row[None], np.array([b]), tau, r, eta)[0],
            bounds=(-3, 1),
            method="bounded",
            options={"xatol": 1e-10},
        ).x
        for row in s
    ]
    np.testing.assert_allclose(descent, reference, atol=1e-3)
    np.testing.assert_allclose(bisection, reference, atol=1e-5)


def test_descent_with_the_papers_budget_moves_towards_the_minimum():
    s_id, s_neg = _sims()
    s = np.concatenate([s_id, s_neg], axis=1)
    start = np.full(len(s), -0.1)
    after = solve_beta(s, 0.01, 1.05, 1.2, beta0=-0.1, steps=15, lr=0.01)
    assert (objective(s, after, 0.01, 1.05, 1.2) < objective(s, start, 0.01, 1.05, 1.2)).all()


def test_penalty_hand_computed():
    s = np.array([[0.3, 0.1, -0.2]])
    beta, tau, r = np.array([0.0]), 0.1, 2.0  # r* = 2: root mean square of (3, 1, 0)
    assert penalty(s, beta, tau, r)[0] == pytest.approx(np.sqrt((9 + 1 + 0) / 3))


@pytest.mark.parametrize("solver", ["bisection", "descent"])
def test_score_rises_with_a_common_rise_of_the_id_similarities(solver):
    s_id, s_neg = _sims(n=20, seed=1)
    base = renyi_score(s_id, s_neg, solver=solver)
    for delta in (1e-4, 1e-3, 0.01, 0.05, 0.2):
        assert (renyi_score(s_id + delta, s_neg, solver=solver) >= base - 1e-9).all()


@pytest.mark.parametrize("solver", ["bisection", "descent"])
def test_score_rises_with_the_top_id_similarity_and_falls_with_any_negative(solver):
    s_id, s_neg = _sims(n=20, seed=2)
    base = renyi_score(s_id, s_neg, solver=solver)
    rows = np.arange(len(s_id))
    top = s_id.argmax(axis=1)
    for delta in (1e-4, 1e-3, 0.01, 0.05):
        raised = s_id.copy()
        raised[rows, top] += delta
        assert (renyi_score(raised, s_neg, solver=solver) > base).all()
        for j in (0, 17, 199):
            neg = s_neg.copy()
            neg[:, j] += delta
            assert (renyi_score(s_id, neg, solver=solver) <= base + 1e-9).all()


def test_score_can_fall_when_a_non_top_id_similarity_rises():
    """A property of the paper's formula (the penalty also runs over the ID labels), recorded, not hidden."""
    s_id, s_neg = _sims(n=20, seed=3)
    rows = np.arange(len(s_id))
    second = np.argsort(s_id, axis=1)[:, -2]
    raised = s_id.copy()
    raised[rows, second] += 1e-3
    diff = renyi_score(raised, s_neg, solver="bisection") - renyi_score(s_id, s_neg, solver="bisection")
    assert (diff < 0).any()


def test_penalty_tends_to_the_max_as_r_star_grows():
    rng = np.random.default_rng(4)
    s = rng.normal(0.1, 0.1, (5, 300))
    beta, tau = np.full(5, 0.05), 0.01
    limit = np.maximum(s - beta[:, None], 0).max(axis=1) / tau
    gaps = [np.abs(penalty(s, beta, tau, r) - limit).max() for r in (2.0, 1.1, 1.01, 1.001, 1.0001)]
    assert all(a > b for a, b in zip(gaps, gaps[1:]))  # r -> 1 is r* -> infinity
    np.testing.assert_allclose(penalty(s, beta, tau, 1.0001), limit, rtol=1e-3)


def test_kl_energy_is_the_log_softmax_id_mass():
    s_id, s_neg = _sims(seed=5)
    tau = 0.02
    logits = np.concatenate([s_id, s_neg], axis=1) / tau
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    expected = np.log(probabilities[:, : s_id.shape[1]].sum(axis=1))
    np.testing.assert_allclose(kl_energy_score(s_id, s_neg, tau), expected, rtol=1e-10)


def test_mcm_and_neglabel_hand_computed():
    s_id = np.array([[0.2, 0.1]])
    s_neg = np.array([[0.0, 0.3]])
    tau = 0.1
    e = np.exp(np.array([2.0, 1.0, 0.0, 3.0]))
    assert mcm_score(s_id, tau)[0] == pytest.approx(e[0] / (e[0] + e[1]))
    one_group = (e[0] + e[1]) / e.sum()
    two_groups = 0.5 * ((e[0] + e[1]) / (e[0] + e[1] + e[2]) + (e[0] + e[1]) / (e[0] + e[1] + e[3]))
    assert neglabel_score(s_id, s_neg, tau, groups=1)[0] == pytest.approx(one_group)
    assert neglabel_score(s_id, s_neg, tau, groups=2)[0] == pytest.approx(two_groups)


@pytest.mark.parametrize("method", ["mcm", "neglabel", "kl_energy", "renyi"])
def test_scores_are_invariant_to_label_order(method):
    rng = np.random.default_rng(6)
    id_labels, neg_labels = rng.standard_normal((8, 16)), rng.standard_normal((120, 16))
    images = rng.standard_normal((30, 16))
    config = ScoreConfig(method, tau=0.05, groups=10)
    before = ZeroShotOODScorer(id_labels, neg_labels, config)(images)
    after = ZeroShotOODScorer(id_labels[rng.permutation(8)], neg_labels[rng.permutation(120)], config)(images)
    np.testing.assert_allclose(before, after, rtol=1e-9, atol=1e-12)


def test_bad_inputs_raise_clear_errors():
    s_id, s_neg = _sims()
    with pytest.raises(ZooError, match="r must be > 1"):
        renyi_score(s_id, s_neg, r=1.0)
    with pytest.raises(ZooError, match="tau must be a positive"):
        renyi_score(s_id, s_neg, tau=0.0)
    with pytest.raises(ZooError, match="tau must be a positive"):
        kl_energy_score(s_id, s_neg, tau=-1)
    with pytest.raises(ZooError, match="negative-label bank is empty"):
        renyi_score(s_id, s_neg[:, :0])
    with pytest.raises(ZooError, match="negative-label bank is empty"):
        ZeroShotOODScorer(np.ones((2, 4)), np.zeros((0, 4)), ScoreConfig("neglabel"))
    with pytest.raises(ZooError, match="-d but image features are"):
        similarities(np.ones((3, 8)), np.ones((2, 4)), np.ones((5, 4)))
    bad = s_id.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ZooError, match="NaN"):
        renyi_score(bad, s_neg)
    with pytest.raises(ZooError, match="NaN"):
        similarities(np.full((2, 4), np.nan), np.ones((2, 4)))
    with pytest.raises(ZooError, match="bisection needs eta > 1"):
        solve_beta(np.concatenate([s_id, s_neg], axis=1), 0.01, 1.05, 0.9, solver="bisection")


def test_eta_zero_needs_no_negatives():
    s_id, _ = _sims()
    assert np.isfinite(renyi_score(s_id, None, eta=0.0)).all()
