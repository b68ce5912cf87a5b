"""p-means and p-means regret against hand-computed values."""

import numpy as np
import pytest

from zoo.fair_lin_bandit.regret import p_means_regret, power_mean, regret_table

REWARDS = np.array([0.2, 0.5, 0.9, 0.4])


def test_power_mean_special_cases_by_hand():
    assert power_mean(REWARDS, 1.0) == pytest.approx(0.5)
    assert power_mean(REWARDS, 0.0) == pytest.approx((0.2 * 0.5 * 0.9 * 0.4) ** 0.25)
    assert power_mean(REWARDS, -1.0) == pytest.approx(4 / (5 + 2 + 1 / 0.9 + 2.5))
    assert power_mean(REWARDS, 0.5) == pytest.approx(np.mean(np.sqrt(REWARDS)) ** 2)
    assert power_mean(REWARDS, -np.inf) == pytest.approx(0.2)


@pytest.mark.parametrize("p", [1e-6, -1e-6])
def test_power_mean_is_continuous_at_zero(p):
    assert power_mean(REWARDS, p) == pytest.approx(power_mean(REWARDS, 0.0), rel=1e-5)


def test_power_means_are_ordered_and_tend_to_the_minimum():
    means = [power_mean(REWARDS, p) for p in (1, 0.5, 0, -1, -5, -200)]
    assert all(a > b for a, b in zip(means, means[1:]))
    assert means[-1] == pytest.approx(0.2, rel=0.01)


def test_negative_p_does_not_overflow_on_tiny_rewards():
    rewards = np.full(20_000, 0.9)
    rewards[0] = 0.01
    value = power_mean(rewards, -5.0)
    assert np.isfinite(value) and value == pytest.approx((rewards**-5.0).mean() ** -0.2)


def test_regret_puts_the_expectation_inside_the_mean():
    # two runs, one bad in round 0 and one in round 1: E[mu_t] = 0.5 in both rounds, while each run alone
    # has geometric mean sqrt(0.9 * 0.1) = 0.3
    expected = np.array([[0.1, 0.9], [0.9, 0.1]])
    table = regret_table(expected, expected, best=0.9, ps=(0.0,))
    assert table["rp_0"] == pytest.approx(0.4)
    assert table["rp_0_realised"] == pytest.approx(0.9 - 0.3)
    assert p_means_regret(np.array([0.9, 0.9]), 0.9, 0.0) == pytest.approx(0.0)


@pytest.mark.parametrize("p", [1.5, 2.0, float("nan")])
def test_p_above_one_is_rejected(p):
    with pytest.raises(ValueError, match="p"):
        power_mean(REWARDS, p)


def test_zero_reward_with_nonpositive_p_is_rejected():
    with pytest.raises(ValueError, match="> 0"):
        power_mean(np.array([0.0, 0.5]), 0.0)
