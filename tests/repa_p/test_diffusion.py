"""Cosine schedule, Min-SNR weight, posterior-variance residual likelihood and the DDPM sampler."""

from __future__ import annotations

import math

import pytest
import torch

from zoo.repa_p.diffusion import (
    cosine_betas,
    ddpm_sample,
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
