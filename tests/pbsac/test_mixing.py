"""Mixing-time estimation: integrated autocorrelation time with Sokal's window."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.pbsac.mixing import (
    ar1_autocorrelation_time,
    ar1_chains,
    autocovariance,
    estimate_mixing_time,
    integrated_autocorrelation_time,
)


def test_autocovariance_by_hand():
    x = np.array([1.0, 3.0, 2.0, 6.0])
    centred = x - x.mean()
    by_hand = [np.dot(centred[: 4 - k], centred[k:]) / 4 for k in range(4)]
    assert np.allclose(autocovariance(x), by_hand)


def test_iid_noise_has_tau_one():
    rng = np.random.default_rng(0)
    assert integrated_autocorrelation_time(rng.standard_normal(100_000)) == pytest.approx(1.0, abs=0.1)


@pytest.mark.parametrize("phi", [0.5, 0.9, 0.99])
def test_recovers_ar1_autocorrelation_time_within_15_percent(phi):
    chains = ar1_chains(phi, 200_000, num_chains=4, seed=int(phi * 100))
    truth = ar1_autocorrelation_time(phi)
    assert integrated_autocorrelation_time(chains) == pytest.approx(truth, rel=0.15)


def test_pooled_chains_agree_with_one_long_chain():
    long = integrated_autocorrelation_time(ar1_chains(0.8, 400_000, 1, seed=5))
    pooled = integrated_autocorrelation_time(ar1_chains(0.8, 20_000, 20, seed=6))
    assert pooled == pytest.approx(long, rel=0.1)
    assert long == pytest.approx(9.0, rel=0.1)


def test_mixing_time_is_at_least_one_and_constant_series_is_one():
    anti = ar1_chains(-0.9, 50_000, 1, seed=7)  # tau_int < 1 for anti-correlated chains
    assert integrated_autocorrelation_time(anti) < 0.2
    assert estimate_mixing_time(anti) == 1.0
    assert estimate_mixing_time(np.ones(100)) == 1.0


def test_bad_inputs():
    with pytest.raises(ValueError, match="T >= 2"):
        integrated_autocorrelation_time(np.ones(1))
    with pytest.raises(ValueError, match="window_factor"):
        integrated_autocorrelation_time(np.ones(10), window_factor=0)
    with pytest.raises(ValueError, match="stationary only for"):
        ar1_chains(1.0, 10)
