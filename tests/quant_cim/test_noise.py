"""Statistics of the CIM noise models against their formulas (fixed seeds), and against aihwkit when installed."""

from __future__ import annotations

import math

import pytest
import torch

from zoo.quant.cim import PCMNoise
from zoo.quant.cim.noise import (
    apply_drift,
    apply_programming_noise,
    conductances_to_weights,
    drift_exponent_params,
    drift_factor,
    mismatch_noise,
    programming_noise_std,
    read_noise_std,
    sample_drift_exponents,
    weights_to_conductances,
)

N = 200_000


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_additive_mismatch_is_max_scaled_gaussian():
    weight = torch.zeros(N)
    weight[0] = -4.0  # max |W| = 4
    delta = mismatch_noise(weight, 0.3, "additive", _gen())
    assert delta.mean().item() == pytest.approx(0.0, abs=4 * 1.2 / math.sqrt(N))
    assert delta.std().item() == pytest.approx(0.3 * 4.0, rel=0.01)


def test_multiplicative_mismatch_scales_with_weight():
    weight = torch.full((N,), 2.0)
    perturbed = weight + mismatch_noise(weight, 0.7, "multiplicative", _gen())
    assert perturbed.mean().item() == pytest.approx(2.0, abs=0.01)
    assert perturbed.std().item() == pytest.approx(0.7 * 2.0, rel=0.01)


def test_mismatch_gradient_reaches_clean_weight():
    weight = torch.randn(50, requires_grad=True)
    (weight + mismatch_noise(weight, 0.5, "additive", _gen())).sum().backward()
    assert torch.equal(weight.grad, torch.ones(50))  # additive: the detached noise passes the gradient unchanged


def test_mismatch_rejects_unknown_form():
    with pytest.raises(ValueError, match="additive"):
        mismatch_noise(torch.ones(3), 0.1, "uniform")


def test_conductance_mapping_round_trip():
    weight = torch.randn(64, 32)
    g_plus, g_minus, scale = weights_to_conductances(weight, 25.0)
    assert g_plus.max().item() <= 25.0 and g_minus.min().item() >= 0.0
    assert max(g_plus.max().item(), g_minus.max().item()) == pytest.approx(25.0)
    assert torch.allclose(conductances_to_weights(g_plus, g_minus, scale), weight, atol=1e-6)


def test_programming_noise_mean_and_variance_match_polynomial():
    noise = PCMNoise()
    for g in (10.0, 25.0):
        target = torch.full((N,), g)
        programmed = apply_programming_noise(target, noise, _gen(1))
        ratio = g / noise.g_max
        expected_std = 0.26348 + 1.9650 * ratio - 1.1731 * ratio**2
        assert programming_noise_std(target, noise)[0].item() == pytest.approx(expected_std, rel=1e-6)
        assert programmed.mean().item() == pytest.approx(g, abs=4 * expected_std / math.sqrt(N))
        assert programmed.std().item() == pytest.approx(expected_std, rel=0.01)


def test_drift_exponent_distribution_is_folded_normal():
    noise = PCMNoise()
    target = torch.full((N,), 2.5)  # g / g_max = 0.1
    mean, std = drift_exponent_params(target, noise)
    log_ratio = math.log(0.1)
    mu = min(max(-0.0155 * log_ratio + 0.0244, 0.049), 0.1)
    sd = min(max(-0.0125 * log_ratio - 0.0059, 0.008), 0.045)
    assert mean[0].item() == pytest.approx(mu, rel=1e-5) and std[0].item() == pytest.approx(sd, rel=1e-5)
    nu = sample_drift_exponents(target, noise, _gen(2))
    # Folded normal |N(mu, sd)|: E = sd sqrt(2/pi) exp(-mu^2 / 2 sd^2) + mu (1 - 2 Phi(-mu / sd)).
    phi = 0.5 * (1 + math.erf(-mu / sd / math.sqrt(2)))
    folded_mean = sd * math.sqrt(2 / math.pi) * math.exp(-(mu**2) / (2 * sd**2)) + mu * (1 - 2 * phi)
    folded_var = mu**2 + sd**2 - folded_mean**2
    assert nu.mean().item() == pytest.approx(folded_mean, rel=0.005)
    assert nu.var().item() == pytest.approx(folded_var, rel=0.02)
    assert (nu >= 0).all()


def test_drift_exponent_is_recovered_from_drifted_conductance():
    noise = PCMNoise(read_noise_scale=0.0)
    g_prog = torch.full((1000,), 12.0)
    nu = sample_drift_exponents(g_prog, noise, _gen(3))
    for t in (1.0, 3600.0, 3.15e7):
        g_t = apply_drift(g_prog, nu, t, noise, _gen(4))
        measured_nu = -torch.log(g_t / g_prog) / math.log((t + noise.t0) / noise.t0)
        assert torch.allclose(measured_nu, nu, rtol=1e-4, atol=1e-6)


def test_read_noise_relative_std_matches_formula():
    noise = PCMNoise(drift_scale=0.0)  # no drift: g(t) = g_prog + |g_prog| sigma_read eps
    g_prog = torch.full((N,), 5.0)
    t = 86400.0
    g_t = apply_drift(g_prog, torch.zeros(N), t, noise, _gen(5))
    q_s = min(0.0088 / (5.0 / 25.0) ** 0.65, 0.2)
    expected = q_s * math.sqrt(math.log((t + 20.0 + 250e-9) / (2 * 250e-9)))
    assert read_noise_std(g_prog, t, noise)[0].item() == pytest.approx(expected, rel=1e-5)
    relative = g_t / g_prog - 1
    assert relative.mean().item() == pytest.approx(0.0, abs=4 * expected / math.sqrt(N))
    assert relative.std().item() == pytest.approx(expected, rel=0.01)


def test_drift_at_time_zero_is_programming_noise_only():
    noise = PCMNoise()
    g_target = torch.rand(500) * 25
    g_prog = apply_programming_noise(g_target, noise, _gen(6))
    nu = sample_drift_exponents(g_target, noise, _gen(7))
    assert torch.equal(apply_drift(g_prog, nu, 0.0, noise, _gen(8)), g_prog)
    assert torch.equal(drift_factor(nu, 0.0, noise), torch.ones(500))
    with pytest.raises(ValueError, match=">= 0"):
        apply_drift(g_prog, nu, -1.0, noise)


def test_matches_aihwkit_pcm_like_noise_model():
    """Our PCM statistics against aihwkit's PCMLikeNoiseModel on the same targets (same model, other RNG)."""
    try:
        from aihwkit.inference.noise.pcm import PCMLikeNoiseModel
    except Exception as error:  # aihwkit is optional: pip install --no-deps aihwkit==1.1.0
        pytest.skip(f"aihwkit is not importable ({type(error).__name__}: {error})")
    ours = PCMNoise()
    theirs = PCMLikeNoiseModel(g_max=25.0)
    g_target = torch.rand(N, generator=_gen(9)) * 25.0
    torch.manual_seed(10)
    their_prog = theirs.apply_programming_noise_to_conductance(g_target.clone())
    their_nu = theirs.generate_drift_coefficients(g_target.clone())
    our_prog = apply_programming_noise(g_target, ours, _gen(11))
    our_nu = sample_drift_exponents(g_target, ours, _gen(12))
    assert (our_prog - g_target).std().item() == pytest.approx((their_prog - g_target).std().item(), rel=0.02)
    assert our_nu.mean().item() == pytest.approx(their_nu.mean().item(), rel=0.01)
    assert our_nu.std().item() == pytest.approx(their_nu.std().item(), rel=0.02)
    for t in (3600.0, 3.15e7):
        torch.manual_seed(13)
        their_g = theirs.apply_drift_noise_to_conductance(their_prog, their_nu, t)
        our_g = apply_drift(our_prog, our_nu, t, ours, _gen(14))
        assert our_g.mean().item() == pytest.approx(their_g.mean().item(), rel=0.01)
        assert our_g.std().item() == pytest.approx(their_g.std().item(), rel=0.02)
        # Same device, no randomness: the drift factor itself is identical.
        noiseless = PCMLikeNoiseModel(g_max=25.0, read_noise_scale=0.0)
        expected = noiseless.apply_drift_noise_to_conductance(our_prog, our_nu, t)
        assert torch.allclose(apply_drift(our_prog, our_nu, t, PCMNoise(read_noise_scale=0.0)), expected)
