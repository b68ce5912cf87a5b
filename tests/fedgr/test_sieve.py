"""Server-side sieving: the 2-component GMM on per-sample losses, detection F1, noise estimates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from zoo.fedgr.sieve import LossGMM, detection_f1, fit_loss_gmm, noise_estimate


def test_gmm_sieving_recovers_the_noisy_set_of_a_synthetic_loss_mixture():
    rng = np.random.default_rng(0)
    clean = rng.gamma(shape=2.0, scale=0.15, size=700)  # small losses: labels the model agrees with
    noisy = rng.normal(2.3, 0.5, size=300).clip(0.5)  # large losses: wrong labels
    values = np.concatenate([clean, noisy])
    is_noisy = np.arange(1000) >= 700
    order = rng.permutation(1000)
    gmm = fit_loss_gmm(values[order], seed=0)
    flagged = gmm.clean_probability(values[order]) < 0.5
    assert gmm.means[0] < gmm.means[1]
    assert detection_f1(flagged, is_noisy[order]) > 0.97
    assert noise_estimate(gmm.clean_probability(values)) == pytest.approx(0.3, abs=0.02)


def test_posterior_is_that_of_the_lower_mean_component_hand_computed():
    gmm = LossGMM(means=np.array([0.0, 2.0]), variances=np.array([1.0, 1.0]), weights=np.array([0.5, 0.5]))
    # log N(x;0,1) - log N(x;2,1) = 2 - 2x, so c(x) = sigmoid(2 - 2x)
    expected = [1 / (1 + math.exp(-(2 - 2 * x))) for x in (0.0, 1.0, 3.0)]
    np.testing.assert_allclose(gmm.clean_probability(np.array([0.0, 1.0, 3.0])), expected, rtol=1e-12)
    assert expected[0] == pytest.approx(0.880797, abs=1e-6) and expected[1] == 0.5


def test_posterior_matches_scikit_learn():
    from sklearn.mixture import GaussianMixture

    values = np.random.default_rng(1).normal([0.2, 1.5], 0.3, size=(200, 2)).reshape(-1)
    ours = fit_loss_gmm(values, seed=3)
    theirs = GaussianMixture(2, max_iter=50, tol=1e-2, reg_covar=5e-4, random_state=3).fit(values[:, None])
    low = int(np.argmin(theirs.means_[:, 0]))
    np.testing.assert_allclose(ours.clean_probability(values), theirs.predict_proba(values[:, None])[:, low], atol=1e-9)


def test_detection_f1_and_noise_estimate_hand_computed():
    assert detection_f1(np.array([1, 1, 0, 0]), np.array([1, 0, 1, 0])) == pytest.approx(0.5)  # tp=1, 2*1/(2+2)
    assert detection_f1(np.array([1, 0]), np.array([1, 0])) == 1.0
    assert detection_f1(np.zeros(3), np.zeros(3)) == 1.0  # nothing noisy, nothing flagged
    assert noise_estimate(np.array([0.1, 0.49, 0.5, 0.9])) == 0.5


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="at least two finite"):
        fit_loss_gmm(np.array([1.0]))
    with pytest.raises(ValueError, match="at least two finite"):
        fit_loss_gmm(np.array([1.0, np.nan, 2.0]))
    with pytest.raises(ValueError, match="same shape"):
        detection_f1(np.zeros(3), np.zeros(4))


def test_separation_is_ashmans_d_hand_computed():
    gmm = LossGMM(means=np.array([0.0, 2.0]), variances=np.array([1.0, 1.0]), weights=np.array([0.5, 0.5]))
    assert gmm.separation == pytest.approx(2.0)  # sqrt(2) * 2 / sqrt(2)
    assert gmm.is_separated(2.0) and not gmm.is_separated(2.01) and gmm.is_separated(0.0)
    tiny = LossGMM(means=np.array([0.0, 9.0]), variances=np.array([1.0, 1.0]), weights=np.array([0.99, 0.01]))
    assert tiny.is_separated(2.0) and not tiny.is_separated(2.0, min_noisy_weight=0.05)
