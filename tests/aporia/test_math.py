"""APORIA's math: the Fisher direction, the 1-D Wasserstein distance, the LP rule and the tightness test."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from zoo.aporia.fisher import biased_covariance, fisher_direction
from zoo.aporia.geometry import class_spreads, cosine_distances, tightness_test
from zoo.aporia.lp import AporiaLP, lp_predict, lp_scores, pairwise_gaps, wasserstein_1d


def test_biased_covariance_matches_numpy():
    x = np.random.default_rng(0).normal(size=(13, 4))
    np.testing.assert_allclose(biased_covariance(x), np.cov(x, rowvar=False, bias=True), atol=1e-12)


def test_fisher_without_regulariser_is_parallel_to_sklearn_lda():
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    rng = np.random.default_rng(1)
    d = 10
    mixing = rng.normal(size=(d, d))
    covariance = mixing @ mixing.T / d + 0.1 * np.eye(d)
    x_g = rng.multivariate_normal(np.zeros(d), covariance, size=4000)
    x_h = rng.multivariate_normal(rng.normal(size=d), covariance, size=3000)
    v = fisher_direction(x_g, x_h, reg=0.0)
    lda = LinearDiscriminantAnalysis(solver="eigen").fit(np.r_[x_g, x_h], np.r_[np.zeros(4000), np.ones(3000)])
    w = lda.coef_[0] / np.linalg.norm(lda.coef_[0])
    assert abs(v @ w) > 0.99
    assert v @ w > 0, "v must point from genuine towards hallucinated, like LDA's class-1 coefficient"
    # with the paper's lambda = 1.2 the direction is shrunk towards the mean difference, no longer LDA's
    v_reg = fisher_direction(x_g, x_h, reg=1.2)
    gap = x_h.mean(0) - x_g.mean(0)
    assert abs(v_reg @ gap / np.linalg.norm(gap)) > abs(v @ gap / np.linalg.norm(gap))


def test_fisher_woodbury_path_equals_the_dense_formula():
    rng = np.random.default_rng(2)
    x_g, x_h = rng.normal(size=(20, 384)), rng.normal(size=(20, 384)) + 0.05
    scatter = biased_covariance(x_g) + biased_covariance(x_h)
    ridge = 1.2 * np.trace(scatter) / 384
    dense = np.linalg.solve(scatter + ridge * np.eye(384), x_h.mean(0) - x_g.mean(0))
    np.testing.assert_allclose(fisher_direction(x_g, x_h, reg=1.2), dense / np.linalg.norm(dense), atol=1e-10)


@pytest.mark.parametrize(
    ("x_g", "x_h", "message"),
    [(np.zeros((0, 3)), np.ones((2, 3)), "at least one"), (np.zeros((2, 3)), np.ones((2, 4)), "same width")],
)
def test_fisher_bad_inputs(x_g, x_h, message):
    with pytest.raises(ValueError, match=message):
        fisher_direction(x_g, x_h)


def test_wasserstein_matches_scipy_and_point_masses():
    rng = np.random.default_rng(3)
    u, v = rng.normal(size=(6, 7)), rng.exponential(size=11)
    expected = [scipy.stats.wasserstein_distance(row, v) for row in u]
    np.testing.assert_allclose(wasserstein_1d(u, v[None, :]), expected, atol=1e-12)
    assert wasserstein_1d(np.array([2.0]), np.array([5.5])) == pytest.approx(3.5)  # two point masses: |a - b|
    with pytest.raises(ValueError, match="at least one value"):
        wasserstein_1d(np.zeros(0), np.ones(2))


def test_lp_rule_on_hand_built_sets():
    # genuine labelled points sit tightly at 0; hallucinated ones are spread over [4, 10]
    z_g = np.array([0.0, 0.1, -0.1])
    z_h = np.array([4.0, 7.0, 10.0])
    np.testing.assert_allclose(pairwise_gaps(z_g), [0.1, 0.1, 0.2])
    np.testing.assert_allclose(pairwise_gaps(z_h), [3.0, 6.0, 3.0])
    # z = 0.05: D_G = {0.05, 0.05, 0.15} vs R_G = {0.1, 0.1, 0.2}: W_G = 0.05 by hand
    w_g, w_h = lp_scores(np.array([0.05]), z_g, z_h)
    assert w_g[0] == pytest.approx(0.05)
    # D_H = {3.95, 6.95, 9.95} vs R_H = {3, 3, 6}: sorted pairs differ by 0.95, 3.95, 3.95 -> W_H = 8.85 / 3
    assert w_h[0] == pytest.approx(8.85 / 3)
    # z = 7 sits among the hallucinated points as they sit among each other: D_H = {3, 0, 3} -> W_H = 2
    w_g, w_h = lp_scores(np.array([7.0]), z_g, z_h)
    assert w_h[0] == pytest.approx(2.0)
    assert w_g[0] > w_h[0]
    np.testing.assert_array_equal(lp_predict(np.array([0.05, 7.0, 5.5, -0.2]), z_g, z_h), [0, 1, 1, 0])


def test_lp_rule_is_not_nearest_centroid():
    # A point between the classes but nearer the genuine mean: the centroid rule says G, while its
    # distances to the hallucinated points look like the hallucinated spread, so APORIA-LP says H.
    z_g = np.array([0.0, 0.01, 0.02])
    z_h = np.array([3.0, 5.0, 7.0, 9.0])
    z = np.array([2.0])
    assert abs(z[0] - z_g.mean()) < abs(z[0] - z_h.mean())
    assert lp_predict(z, z_g, z_h)[0] == 1


def test_aporia_lp_separates_tight_and_spread_classes():
    rng = np.random.default_rng(4)
    d = 32
    centre = rng.normal(size=d)
    genuine = centre + 0.05 * rng.normal(size=(60, d))
    hallucinated = centre + 0.3 * rng.normal(size=(60, d)) + 0.4 * rng.normal(size=d)
    x, y = np.r_[genuine, hallucinated], np.r_[np.zeros(60), np.ones(60)].astype(int)
    labelled = np.r_[0:10, 60:70]
    lp = AporiaLP().fit(x[labelled], y[labelled])
    rest = np.setdiff1d(np.arange(120), labelled)
    assert np.mean(lp.predict(x[rest]) == y[rest]) > 0.9
    with pytest.raises(ValueError, match="both classes"):
        AporiaLP().fit(x[:5], y[:5])
    with pytest.raises(ValueError, match="not fitted"):
        AporiaLP().predict(x)


def test_tightness_statistics():
    rng = np.random.default_rng(5)
    distances = cosine_distances(rng.normal(size=(6, 3)))
    y = np.array([0, 0, 0, 1, 1, 1])
    spreads = class_spreads(distances, y)
    assert spreads[0] == pytest.approx(distances[:3, :3][np.triu_indices(3, 1)].mean())
    assert spreads[1] == pytest.approx(distances[3:, 3:][np.triu_indices(3, 1)].mean())
    # genuine = near copies of one answer, hallucinated = scattered: tight G, tiny p
    pairs_x, pairs_y = [], []
    for _ in range(4):
        anchor = rng.normal(size=16)
        genuine = anchor + 0.05 * rng.normal(size=(12, 16))
        pairs_x.append(np.r_[genuine, rng.normal(size=(8, 16))])
        pairs_y.append(np.r_[np.zeros(12), np.ones(8)].astype(int))
    result = tightness_test(pairs_x, pairs_y, permutations=999, seed=0)
    assert result["tightness_gap"] > 0.5
    assert result["tightness_frac_pairs"] == 1.0
    assert result["tightness_p_value"] == pytest.approx(1 / 1000)
    # exchangeable labels: no evidence
    null = tightness_test([rng.normal(size=(20, 16))], [np.r_[np.zeros(10), np.ones(10)].astype(int)], 999, seed=0)
    assert null["tightness_p_value"] > 0.01
