"""Cosine schedule, Min-SNR weight, posterior-variance residual likelihood and the DDPM sampler."""

from __future__ import annotations

import math

import pytest
import torch

from zoo.repa_p.diffusion import (
    cosine_betas,
    ddpm_sample,
    physics_weight_scale,
    q_sample,
    residual_nll,
    sampling_timesteps,
    schedule,
    snr_weighted_mse,
)


def test_cosine_schedule_matches_its_closed_form():
    T, s = 100, 0.008
    sched = schedule(T)
    f = lambda t: math.cos((t / T + s) / (1 + s) * math.pi / 2) ** 2  # noqa: E731
    for t in (0, 10, 50, 98):
        assert sched["alphas_cumprod"][t].item() == pytest.approx(f(t + 1) / f(0), rel=1e-5)
    assert cosine_betas(T).max().item() == pytest.approx(0.999)  # last beta is clipped


def test_posterior_variance_at_zero_is_replaced_by_step_one():
    sched = schedule(100)
    assert sched["posterior_variance"][0].item() == 0.0
    assert sched["residual_variance"][0].item() == sched["posterior_variance"][1].item() > 0
    assert torch.equal(sched["residual_variance"][1:], sched["posterior_variance"][1:])
    # Hand-computed: beta_tilde_1 = beta_1 (1 - abar_0) / (1 - abar_1).
    b, a = sched["betas"], sched["alphas_cumprod"]
    assert sched["posterior_variance"][1].item() == pytest.approx((b[1] * (1 - a[0]) / (1 - a[1])).item(), rel=1e-6)
    residual = torch.ones(3, 5)
    loss = residual_nll(residual, torch.zeros(3, dtype=torch.long), sched)
    assert torch.isfinite(loss) and loss.item() == pytest.approx(
        1 / (2 * sched["posterior_variance"][1].item()), rel=1e-5
    )


def test_snr_weight_is_clipped_at_five_and_weights_per_sample():
    sched = schedule(100)
    snr = sched["alphas_cumprod"] / (1 - sched["alphas_cumprod"])
    assert torch.allclose(sched["snr_weight"], snr.clamp(max=5.0))
    assert sched["snr_weight"][0].item() == 5.0 and sched["snr_weight"][-1].item() < 1e-3
    pred, target = torch.zeros(2, 1, 4, 4), torch.ones(2, 1, 4, 4)
    pred[1] = 1.0  # second sample perfect
    t = torch.tensor([0, 99])
    assert snr_weighted_mse(pred, target, t, sched).item() == pytest.approx(5.0 / 2)


def test_q_sample_endpoints():
    sched = schedule(100)
    x0, noise = torch.ones(1, 1, 4, 4), torch.full((1, 1, 4, 4), 2.0)
    xt = q_sample(x0, torch.tensor([0]), noise, sched)
    a = sched["alphas_cumprod"][0]
    assert torch.allclose(xt, a.sqrt() * x0 + (1 - a).sqrt() * noise)


def test_sampler_with_an_oracle_denoiser_returns_the_target():
    sched = schedule(100)
    target = torch.randn(3, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    calls = []

    def oracle(x, t):
        calls.append(int(t[0]))
        return target

    out = ddpm_sample(oracle, target.shape, sched, generator=torch.Generator().manual_seed(1))
    assert torch.equal(out, target)
    assert calls == list(range(99, -1, -1))
    calls.clear()
    ddpm_sample(oracle, target.shape, sched, steps=10, generator=torch.Generator().manual_seed(1))
    assert len(calls) == 10 and calls[0] == 99 and calls[-1] == 0


def test_one_ancestral_step_is_the_posterior_mean_plus_beta_noise():
    """With x0_hat fixed, one step t -> t-1 matches q(x_{t-1} | x_t, x0) with variance beta_t (hand formula)."""
    sched = schedule(10)
    x0 = torch.full((1, 1, 2, 2), 0.5)
    seen = {}

    def denoise(x, t):
        seen.setdefault(int(t[0]), x.clone())
        return x0

    gen = torch.Generator().manual_seed(0)
    ddpm_sample(denoise, x0.shape, sched, generator=gen)
    gen = torch.Generator().manual_seed(0)
    x9 = torch.randn(x0.shape, generator=gen)
    z = torch.randn(x0.shape, generator=gen)
    b, a, ap = sched["betas"][9], sched["alphas_cumprod"][9], sched["alphas_cumprod"][8]
    mean = ap.sqrt() * b / (1 - a) * x0 + (1 - b).sqrt() * (1 - ap) / (1 - a) * x9
    assert torch.allclose(seen[8], mean + b.sqrt() * z, atol=1e-6)


def test_sampling_timesteps_and_errors():
    assert sampling_timesteps(100, None) == list(range(99, -1, -1))
    assert sampling_timesteps(100, 4) == [99, 66, 33, 0]
    with pytest.raises(ValueError, match="sampling steps must be >= 1"):
        sampling_timesteps(100, 0)
    with pytest.raises(ValueError, match="at least 2 diffusion steps"):
        cosine_betas(1)


def test_physics_weight_schedule_values_by_hand():
    """The published step, and the smooth ramps from step 0 (issue 75), at hand-computed steps."""
    step = [physics_weight_scale(s, 5000, 100.0, 0.8) for s in (0, 3999, 4000, 4999)]
    assert step == [1.0, 1.0, 100.0, 100.0]  # the recipes: x100 from step 4,000 of 5,000
    # linear, factor 100 reached at the end of 4 steps: 1 + 99 s / 4
    assert [physics_weight_scale(s, 4, 100.0, 1.0, "linear") for s in (0, 1, 2, 4)] == [1.0, 25.75, 50.5, 100.0]
    # geometric, factor 100 reached at 0.5 of 10 steps, flat after: 100 ** (s / 5)
    geometric = [physics_weight_scale(s, 10, 100.0, 0.5, "geometric") for s in (0, 1, 5, 9)]
    assert geometric == pytest.approx([1.0, 2.511886, 100.0, 100.0], rel=1e-6)
    assert physics_weight_scale(7, 10, 100.0, 1.0, "geometric") == pytest.approx(100**0.7)
    # A ramp ending at 0 is the full factor from the start; factor 1 is constant for every shape.
    assert physics_weight_scale(0, 10, 5.0, 0.0, "linear") == 5.0
    assert {physics_weight_scale(s, 10, 1.0, 0.3, r) for s in range(10) for r in ("step", "linear", "geometric")} == {
        1.0
    }
    with pytest.raises(ValueError, match="late_physics_ramp must be one of"):
        physics_weight_scale(0, 10, 100.0, 0.8, "cosine")
    with pytest.raises(ValueError, match="late_physics_from in \\[0, 1\\], got 0.0 and 0.8"):
        physics_weight_scale(0, 10, 0.0, 0.8, "geometric")
    with pytest.raises(ValueError, match="max_steps must be >= 1"):
        physics_weight_scale(0, 0, 100.0, 0.8)
