"""Networks, replay buffer, SAC/PB-SAC update, certificate and module plumbing (small and fast)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from zoo._distributed import DistributedRefusedError
from zoo.pbsac.networks import TanhGaussianActor, TwinCritic
from zoo.pbsac.sac import ReplayBuffer, SACAgent, SACConfig


def test_posterior_moments_match_sampled_last_layers():
    torch.manual_seed(0)
    critic = TwinCritic(3, 1, hidden=16, bayesian=True, sigma_init=0.2)
    obs, act = torch.randn(5, 3), torch.rand(5, 1) * 2 - 1
    features = critic.features(obs, act)
    mean, var = critic.head_moments(features)
    std_w, std_b = critic.head_std()
    samples = []
    for _ in range(20_000):
        weight = critic.head.weight + std_w * torch.randn_like(std_w)
        bias = critic.head.bias + std_b * torch.randn_like(std_b)
        samples.append(torch.baddbmm(bias, features, weight).squeeze(-1))
    samples = torch.stack(samples).detach()
    assert torch.allclose(mean, samples.mean(0), atol=0.01)
    assert torch.allclose(var, samples.var(0), rtol=0.05)


def test_deterministic_critic_has_no_variance_and_twins_differ():
    critic = TwinCritic(3, 1, hidden=16)
    mean, var = critic(torch.randn(4, 3), torch.zeros(4, 1))
    assert var is None and mean.shape == (2, 4)
    assert not torch.equal(mean[0], mean[1])


def test_actor_log_prob_matches_torch_distributions():
    torch.manual_seed(1)
    actor = TanhGaussianActor(3, 2, hidden=16)
    obs = torch.randn(6, 3)
    torch.manual_seed(2)
    action, log_prob = actor.sample(obs)
    mean, log_std = actor.distribution(obs)
    reference = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean, log_std.exp()), [torch.distributions.TanhTransform(cache_size=1)]
    )
    expected = reference.log_prob(action.clamp(-1 + 1e-6, 1 - 1e-6)).sum(-1)
    assert torch.allclose(log_prob, expected, atol=1e-3)
    assert bool((action.abs() < 1).all())


def test_replay_buffer_layout_order_and_wraparound():
    buffer = ReplayBuffer(4, obs_dim=2, act_dim=1)
    for t in range(6):
        buffer.add(np.array([t, -t]), np.array([0.5]), float(t), t == 5, np.array([t + 1, -t - 1]))
    assert buffer.size == 4
    recent = buffer.recent(4)
    assert recent[:, buffer.slices["reward"]].tolist() == [2.0, 3.0, 4.0, 5.0]
    assert recent[-1, buffer.slices["terminated"]] == 1.0
    assert recent[0, buffer.slices["next_obs"]].tolist() == [3.0, -3.0]
    assert recent[0, buffer.slices["obs_act"]].tolist() == [2.0, -2.0, 0.5]
    assert buffer.sample(7).shape == (7, 2 * 2 + 1 + 2)
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(0, 2, 1)


def _filled_buffer(n: int = 256) -> ReplayBuffer:
    generator = np.random.default_rng(0)
    buffer = ReplayBuffer(n, obs_dim=3, act_dim=1)
    for _ in range(n):
        obs = generator.standard_normal(3)
        act = generator.uniform(-1, 1, 1)
        buffer.add(obs, act, float(-(obs[0] ** 2) - act[0] ** 2), False, generator.standard_normal(3))
    return buffer


@pytest.mark.parametrize("bayesian", [False, True])
def test_updates_reduce_td_error_and_track_targets(bayesian):
    torch.manual_seed(0)
    agent = SACAgent(
        3, 1, SACConfig(hidden=32, batch_size=64, bayesian=bayesian, bound_weight=1.0 if bayesian else 0.0)
    )
    buffer = _filled_buffer()
    optimizers = agent.make_optimizers()
    batch = buffer.recent(256)
    before = float(agent.normalised_td_losses(batch, buffer.slices).mean())
    target_before = agent.target.head.weight.clone()
    for _ in range(80):
        stats = agent.update(buffer.sample(64), buffer.slices, optimizers, kappa=0.5)
    assert float(agent.normalised_td_losses(batch, buffer.slices).mean()) < before
    assert not torch.equal(agent.target.head.weight, target_before)  # Polyak moved the target
    assert ("complexity" in stats) == bayesian
    assert int(agent.prior_age) == 80


def test_complexity_term_widens_a_too_narrow_posterior():
    agent = SACAgent(3, 1, SACConfig(hidden=8, sigma_init=1e-3, prior_std=0.1))
    agent.refresh_prior()
    agent.complexity(1000).backward()
    assert bool((agent.critic.head_rho_weight.grad < 0).all())  # descent increases sigma toward prior_std
    assert float(agent.posterior_kl().detach()) == pytest.approx(2 * 9 * (math.log(100) + 0.5 * 1e-4 - 0.5), rel=1e-3)


def _pendulum_certificate_setup():
    """A small seeded Bayesian agent on Pendulum's spaces, its buffer layout, action scaler and reward range."""
    from zoo.pbsac.certificate import REWARD_RANGES
    from zoo.pbsac.rollout import ActionScaler

    torch.manual_seed(0)
    agent = SACAgent(3, 1, SACConfig(hidden=16, sigma_init=0.05))
    scaler = ActionScaler(np.array([-2.0], dtype=np.float32), np.array([2.0], dtype=np.float32))
    return agent, ReplayBuffer(1, 3, 1).slices, scaler, REWARD_RANGES["Pendulum-v1"]


def test_certificate_phase_on_a_few_episodes():
    from zoo.pbsac.certificate import certify, loss_scale

    agent, slices, scaler, rewards = _pendulum_certificate_setup()
    prior = [p.clone() for p in agent.critic.head_posterior()]
    certificate, (mean, std) = certify(
        agent, "Pendulum-v1", scaler, slices, rewards, 200, episodes=4, posterior_steps=20, check_episodes=2
    )
    assert certificate.episodes == 4 and certificate.n == 800
    assert certificate.scale == pytest.approx(loss_scale(rewards))
    assert certificate.kl > 0.0 and not torch.equal(mean, prior[0])  # the posterior moved and pays for it
    assert certificate.empirical_risk <= certificate.prior_risk  # ... because moving lowered the bound's risk term
    assert certificate.value > certificate.iid_value > certificate.empirical_risk >= 0.0  # 4 blocks vs 800 rows
    assert 0.0 <= certificate.fresh_loss <= 1.0 and certificate.covered == (certificate.value >= certificate.fresh_loss)
    assert certificate.return_bound <= certificate.return_mean <= 0.0
    assert torch.equal(agent.critic.head_posterior()[0], prior[0])  # certify leaves the agent as it was
    frozen, _ = certify(agent, "Pendulum-v1", scaler, slices, rewards, 200, episodes=2, posterior_steps=0,
                        check_episodes=0)  # fmt: skip
    assert frozen.kl == 0.0 and math.isnan(frozen.fresh_loss) and frozen.empirical_risk == frozen.prior_risk
    with pytest.raises(ValueError, match="bayesian=True"):
        certify(SACAgent(3, 1, SACConfig(hidden=16, bayesian=False)), "Pendulum-v1", scaler, slices, rewards, 200)


def test_certificate_over_prior_widths_is_the_union_bound_of_its_fits():
    """Four priors N(mu_f, (c sigma_f)^2): the certificate is the smallest per-width bound, each at delta / 4."""
    from zoo.pbsac.bound import pac_bayes_bound
    from zoo.pbsac.certificate import PRIOR_WIDTHS, certify

    agent, slices, scaler, rewards = _pendulum_certificate_setup()
    prior = [p.clone() for p in agent.critic.head_posterior()]
    torch.manual_seed(1)  # the same certificate episodes for both calls
    one, _ = certify(agent, "Pendulum-v1", scaler, slices, rewards, 200, episodes=4, posterior_steps=10,
                     check_episodes=0)  # fmt: skip
    torch.manual_seed(1)
    grid, (mean, std) = certify(agent, "Pendulum-v1", scaler, slices, rewards, 200, episodes=4, posterior_steps=10,
                                check_episodes=0, prior_widths=PRIOR_WIDTHS)  # fmt: skip
    assert grid.prior_widths == PRIOR_WIDTHS and len(grid.width_values) == 4 and grid.value == min(grid.width_values)
    assert grid.prior_width == PRIOR_WIDTHS[grid.width_values.index(grid.value)]
    # The chosen width's bound, recomputed from its risk and KL at delta / 4 (ln 4 nats more than one prior).
    again = pac_bayes_bound(grid.empirical_risk, grid.kl, 4, 1.0, 0.05 / 4)
    assert grid.value == pytest.approx(again.value, rel=1e-9)
    assert grid.width_values[0] > one.value - 1e-9  # width 1 alone at delta, cheaper than at delta / 4
    assert grid.prior_risk == pytest.approx(one.prior_risk)  # prior_risk: the posterior at the freeze
    assert torch.equal(agent.critic.head_posterior()[0], prior[0])
    assert bool((std <= prior[1] * grid.prior_width * 1e3).all()) and mean.shape == prior[0].shape
    with pytest.raises(ValueError, match="prior_widths must be distinct positive"):
        certify(agent, "Pendulum-v1", scaler, slices, rewards, 200, episodes=1, prior_widths=(1.0, 0.0))
    with pytest.raises(ValueError, match="prior_widths must be distinct positive"):
        certify(agent, "Pendulum-v1", scaler, slices, rewards, 200, episodes=1, prior_widths=())


def test_reward_ranges_give_m_and_the_return_range():
    from zoo.pbsac.certificate import loss_scale, return_range, reward_range

    low, high = reward_range("Pendulum-v1")
    assert low == pytest.approx(-(math.pi**2 + 6.4 + 0.004)) and high == 0.0
    assert loss_scale((low, high)) == pytest.approx(low**2)
    assert return_range((-1.0, 2.0), 0.5, 3) == pytest.approx((-1.75, 3.5))  # (1 + 0.5 + 0.25) r
    assert reward_range("HalfCheetah-v5", [-5, 5]) == (-5.0, 5.0)
    with pytest.raises(ValueError, match="give reward_range"):
        reward_range("HalfCheetah-v5")
    with pytest.raises(ValueError, match="r_min < r_max"):
        reward_range("Pendulum-v1", [1.0, 1.0])


def test_module_refuses_ddp_because_its_replay_buffer_would_diverge():
    from types import SimpleNamespace

    from zoo.pbsac.module import PBSACModule

    module = PBSACModule()
    module._trainer = SimpleNamespace(world_size=2)
    module._trainer.strategy = SimpleNamespace()
    with pytest.raises(DistributedRefusedError, match="cannot fit in 2 processes.*replay buffer") as error:
        module.setup("fit")
    assert "\n" not in str(error.value)


def test_module_rejects_bad_settings_with_clear_messages():
    from zoo.pbsac.data import PBSACDataModule
    from zoo.pbsac.module import PBSACModule

    with pytest.raises(ValueError, match="cannot make gymnasium environment 'NoSuchEnv-v0'"):
        PBSACModule(env_id="NoSuchEnv-v0")
    with pytest.raises(ValueError, match="Box observation and action space"):
        PBSACModule(env_id="CartPole-v1")
    with pytest.raises(ValueError, match="certificate_episodes=0"):
        PBSACModule(bayesian=False)
    with pytest.raises(ValueError, match="r_min < r_max"):
        PBSACModule(reward_range=[0.0, 0.0])
    with pytest.raises(
        ValueError, match=r"prior_widths must be distinct positive numbers, at least one; got \[1.0, 1.0\]"
    ):
        PBSACModule(certificate_prior_widths=[1.0, 1.0])
    assert PBSACModule().prior_widths == (1.0, 0.3, 0.1, 0.03)
    if _has_mujoco():  # rewards without known bounds: certificates need them given
        with pytest.raises(ValueError, match="give reward_range"):
            PBSACModule(env_id="HalfCheetah-v5")
    with pytest.raises(ValueError, match="learning_starts"):
        PBSACModule(learning_starts=0)
    with pytest.raises(ValueError, match="total_steps and steps_per_batch"):
        PBSACDataModule(total_steps=0)


def _has_mujoco() -> bool:
    try:
        import mujoco  # noqa: F401
    except ImportError:
        return False
    return True


def test_forward_rescales_to_the_action_box_and_kappa_anneals():
    from zoo.pbsac.module import PBSACModule

    module = PBSACModule()
    action = module(torch.randn(32, 3) * 5)
    assert action.shape == (32, 1) and bool((action.abs() <= 2.0).all())
    module.env_steps.fill_(7500)
    assert module.kappa_now() == pytest.approx(0.25)
    module.env_steps.fill_(20_000)
    assert module.kappa_now() == 0.0
