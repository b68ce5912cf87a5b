"""Reference critics of issue 61 (zoo.pbsac.references) against hand-computed values (fast)."""

from __future__ import annotations

import math

import pytest
import torch

from zoo.pbsac.bound import pac_bayes_bound
from zoo.pbsac.references import (
    LinearLoss,
    bellman_design,
    certify_linear,
    choose_width,
    constant_design,
    fit_and_bound,
    head_as_rows,
)
from zoo.pbsac.sac import ReplayBuffer

SLICES = ReplayBuffer(1, 1, 1).slices  # obs 1, act 1: rows [obs, act, reward, terminated, next_obs]


def _rows(rewards, done=None):
    n = len(rewards)
    rows = torch.zeros(n, 5)
    rows[:, SLICES["reward"]] = torch.tensor(rewards, dtype=torch.float32)
    if done is not None:
        rows[:, SLICES["terminated"]] = torch.tensor(done, dtype=torch.float32)
    return rows


def test_constant_critic_least_squares_is_mean_reward_over_one_minus_gamma():
    design, target = constant_design(_rows([1.0, 3.0]), SLICES, gamma=0.5)
    assert design.shape == (1, 2, 1) and torch.allclose(design.flatten(), torch.tensor([0.5, 0.5]))
    loss = LinearLoss(design, target, scale=4.0)
    assert float(loss.least_squares()) == pytest.approx(2.0 / 0.5, rel=1e-5)
    # c = 4: TD errors 0.5 * 4 - r = +1, -1, so min(1, 1 / 4) each
    values = loss(torch.tensor([4.0]), torch.tensor([0.0]))
    assert torch.allclose(values, torch.tensor([0.25, 0.25], dtype=torch.float64))


def test_a_terminal_step_does_not_bootstrap():
    design, target = constant_design(_rows([1.0, 3.0], done=[0.0, 1.0]), SLICES, gamma=0.5)
    assert torch.allclose(design.flatten(), torch.tensor([0.5, 1.0]))
    # argmin (0.5 c - 1)^2 + (c - 3)^2 = (0.5 + 3) / (0.25 + 1)
    assert float(LinearLoss(design, target, 4.0).least_squares()) == pytest.approx(2.8, rel=1e-5)


def test_posterior_spread_adds_its_variance_to_the_loss():
    design, target = constant_design(_rows([1.0, 3.0]), SLICES, gamma=0.5)
    loss = LinearLoss(design, target, scale=100.0)  # no clipping within 20 standard deviations
    # TD error ~ N(+-1, (0.5 * 1)^2): E err^2 / M = (1 + 0.25) / 100
    values = loss(torch.tensor([4.0]), torch.tensor([1.0]))
    assert torch.allclose(values, torch.full((2,), 0.0125, dtype=torch.float64), atol=1e-9)


def test_certificate_is_the_card_bound_of_the_fitted_posterior_and_its_parts_add_up():
    torch.manual_seed(0)
    rewards = (-1.0 - torch.rand(40)).tolist()  # 4 episodes of 10 steps
    design, target = constant_design(_rows(rewards), SLICES, gamma=0.9)
    lengths = torch.tensor([10, 10, 10, 10])
    loss = LinearLoss(design, target, scale=4.0)
    certificate, (mean, std) = fit_and_bound(loss, lengths, torch.zeros(1, dtype=torch.float64), 30.0, steps=50)
    again = pac_bayes_bound(certificate.empirical_risk, certificate.kl, 4, 1.0, 0.05, 20)
    assert certificate.value == pytest.approx(again.value)
    assert certificate.value == pytest.approx(certificate.empirical_risk + certificate.complexity)
    assert certificate.complexity >= certificate.complexity_floor >= math.sqrt(math.log(20 / 0.05) / (2 * 4))
    assert certificate.kl > 0 and certificate.episodes == 4 and std.item() > 0
    assert float(mean) == pytest.approx(float(loss.least_squares()), rel=0.2)  # near c = mean r / (1 - gamma)


def test_width_chosen_on_validation_avoids_a_prior_too_narrow_for_the_value():
    design, target = constant_design(_rows([-10.0] * 20), SLICES, gamma=0.5)  # c = -20
    loss, lengths = LinearLoss(design, target, scale=400.0), torch.tensor([10, 10])
    width, values = choose_width(loss, lengths, torch.zeros(1, dtype=torch.float64), (0.01, 100.0), steps=50)
    assert width == 100.0 and values[1] < values[0]


def test_certify_linear_reports_both_priors_and_refuses_one_validation_episode():
    design, target = constant_design(_rows([-1.0, -2.0] * 10), SLICES, gamma=0.5)
    lengths = torch.tensor([5, 5, 5, 5])
    data = (design, target, lengths)
    out = certify_linear(data, data, 16.0, grid=(0.3, 3.0), steps=20)
    for prefix in ("", "free_"):
        for part in ("certificate", "empirical_risk", "complexity", "complexity_floor", "kl", "prior_width"):
            assert f"{prefix}{part}" in out
        assert out[f"{prefix}certificate"] == pytest.approx(out[f"{prefix}empirical_risk"] + out[f"{prefix}complexity"])
    with pytest.raises(ValueError, match="at least 2"):
        certify_linear((design[:, :5], target[:5], lengths[:1]), data, 16.0, grid=(1.0,), steps=1)


def test_bellman_design_of_a_constant_feature_is_the_constant_critic():
    class Ones:
        def features(self, obs, act):
            return torch.ones(2, len(obs), 1)

    class Still:
        def sample(self, obs):
            return torch.zeros(len(obs), 1), torch.zeros(len(obs))

    rows = _rows([1.0, 3.0], done=[0.0, 1.0])
    design, target = bellman_design(Ones(), Still(), rows, SLICES, gamma=0.5)
    expected = torch.tensor([0.5, 1.0]).view(1, 2, 1).expand(2, 2, 2)  # feature and bias: 1 - gamma (1 - d)
    assert design.shape == (2, 2, 2) and torch.allclose(design, expected)
    assert torch.equal(target, torch.tensor([1.0, 3.0]))


def test_head_layout_and_bad_inputs():
    flat = torch.tensor([1.0, 2.0, 3.0, 4.0, 10.0, 20.0])  # two critics' weights, then their biases
    assert torch.equal(head_as_rows(flat, 2), torch.tensor([1.0, 2.0, 10.0, 3.0, 4.0, 20.0]))
    with pytest.raises(ValueError, match="critics, transitions, parameters"):
        LinearLoss(torch.ones(3, 1), torch.ones(3), 1.0)
    with pytest.raises(ValueError, match="M must be > 0"):
        LinearLoss(torch.ones(1, 3, 1), torch.ones(3), 0.0)
