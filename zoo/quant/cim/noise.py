"""Noise models of compute-in-memory weights, as plain tensor functions with explicit random generators.

Two families:

* **Mismatch** (training-time perturbation and the mismatch sweeps): additive max-scaled
  ``w + sigma * max|W| * eps`` and multiplicative ``w * (1 + sigma * eps)``.
* **PCM devices** (inference simulation), following aihwkit's ``PCMLikeNoiseModel`` with its published fits
  (Nandakumar et al., "Phase-change memory models for deep learning training and inference", ICECS 2019;
  Joshi et al., "Accurate deep neural network inference using computational phase-change memory",
  Nature Communications 2020): programming noise, per-device drift exponents, 1/f read noise.

Every random function takes a ``torch.Generator`` (or None for the global one), so a simulation is
reproducible from its seed.
"""

from __future__ import annotations

import math

import torch

from zoo.quant.cim.config import PCMNoise

_ZERO_CLIP = 1e-7  # as aihwkit: keeps log(g / g_max) finite for zero conductances


def _randn_like(tensor: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    return torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype, device=tensor.device)


# ------------------------------------------------------------------------------------------------ mismatch


def mismatch_noise(
    weight: torch.Tensor, sigma: float, form: str, generator: torch.Generator | None = None
) -> torch.Tensor:
    """The perturbation ``delta`` such that the perturbed weight is ``weight + delta``.

    ``delta`` is built from a detached scale, so ``weight + delta`` passes gradients to ``weight`` unchanged
    (additive) or scaled by ``1 + sigma * eps`` (multiplicative).

    Args:
        weight: The clean weight tensor of one layer.
        sigma: Mismatch level.
        form: ``"additive"`` (max-scaled per layer), ``"multiplicative"`` or ``"none"``.
        generator: Random generator (None: the global one).
    """
    if form == "none" or sigma == 0:
        return torch.zeros_like(weight)
    eps = _randn_like(weight, generator)
    if form == "additive":
        return sigma * weight.detach().abs().max() * eps
    if form == "multiplicative":
        return sigma * eps * weight
    raise ValueError(f"mismatch form must be 'additive', 'multiplicative' or 'none', not {form!r}")


def perturb(weight: torch.Tensor, sigma: float, form: str, generator: torch.Generator | None = None) -> torch.Tensor:
    """``weight`` with one mismatch draw applied (see :func:`mismatch_noise`)."""
    return weight + mismatch_noise(weight, sigma, form, generator)


# ------------------------------------------------------------------------------------------ conductances


def weights_to_conductances(weight: torch.Tensor, g_max: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Map weights onto a differential pair of devices, the largest ``|w|`` at ``g_max``.

    Returns:
        ``(g_plus, g_minus, scale)`` with ``weight = (g_plus - g_minus) / scale``; ``scale`` in uS per weight unit.
    """
    scale = g_max / weight.abs().max().clamp(min=_ZERO_CLIP)
    scaled = weight * scale
    return scaled.clamp(min=0.0, max=g_max), (-scaled).clamp(min=0.0, max=g_max), scale


def conductances_to_weights(g_plus: torch.Tensor, g_minus: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`weights_to_conductances`."""
    return (g_plus - g_minus) / scale


# --------------------------------------------------------------------------------------------------- PCM


def programming_noise_std(g_target: torch.Tensor, noise: PCMNoise) -> torch.Tensor:
    """Standard deviation (uS) of the programming noise at target conductance ``g_target``."""
    ratio = g_target / noise.g_max
    std = torch.zeros_like(g_target)
    for power, coeff in enumerate(noise.prog_coeff):
        std = std + coeff * ratio**power
    return std * (noise.g_max / noise.prog_coeff_g_max_reference)


def apply_programming_noise(
    g_target: torch.Tensor, noise: PCMNoise, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Programmed conductances: target plus Gaussian programming noise, clipped at 0 (no negative conductance)."""
    std = noise.prog_noise_scale * programming_noise_std(g_target, noise)
    return (g_target + std * _randn_like(g_target, generator)).clamp(min=0.0)


def drift_exponent_params(g_target: torch.Tensor, noise: PCMNoise) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and standard deviation of the drift exponent ``nu`` before folding, per device."""
    log_ratio = torch.log((g_target / noise.g_max).abs().clamp(min=_ZERO_CLIP))
    mean = (noise.nu_mean_coeff[0] * log_ratio + noise.nu_mean_coeff[1]).clamp(*noise.nu_mean_clip)
    std = (noise.nu_std_coeff[0] * log_ratio + noise.nu_std_coeff[1]).clamp(*noise.nu_std_clip)
    return mean, std


def sample_drift_exponents(
    g_target: torch.Tensor, noise: PCMNoise, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Per-device drift exponents ``nu = drift_scale * |N(mu_nu(g), sigma_nu(g))|``."""
    mean, std = drift_exponent_params(g_target, noise)
    return (mean + std * _randn_like(g_target, generator)).abs() * noise.drift_scale


def drift_factor(nu: torch.Tensor, t_seconds: float, noise: PCMNoise) -> torch.Tensor:
    """``((t + t0) / t0)^(-nu)``: the conductance ratio ``g(t) / g_prog`` from drift alone."""
    return ((t_seconds + noise.t0) / noise.t0) ** (-nu)


def read_noise_std(g_prog: torch.Tensor, t_seconds: float, noise: PCMNoise) -> torch.Tensor:
    """Relative standard deviation of the 1/f read noise accumulated ``t_seconds`` after programming."""
    ratio_power = ((g_prog.abs() / noise.g_max) ** noise.read_q_exponent).clamp(min=1e-3)
    q_s = (noise.read_q_coeff / ratio_power).clamp(max=noise.read_q_max)
    t = t_seconds + noise.t0
    return noise.read_noise_scale * q_s * math.sqrt(math.log((t + noise.t_read) / (2 * noise.t_read)))


def apply_drift(
    g_prog: torch.Tensor,
    nu: torch.Tensor,
    t_seconds: float,
    noise: PCMNoise,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Conductances ``t_seconds`` after programming: drift then accumulated read noise, clipped at 0.

    At ``t_seconds == 0`` (the instant programming completed) this returns ``g_prog`` unchanged: no drift and
    no read noise yet. aihwkit's ``drift_weights(0)`` differs here: it already adds the 1/f noise of the first
    ``t0`` seconds.

    Raises:
        ValueError: If ``t_seconds`` is negative.
    """
    if t_seconds < 0:
        raise ValueError(f"t_seconds must be >= 0 (time since programming), not {t_seconds!r}")
    if t_seconds == 0:
        return g_prog.clone()
    g_drift = g_prog * drift_factor(nu, t_seconds, noise)
    std = read_noise_std(g_prog, t_seconds, noise)
    return (g_drift + g_drift.abs() * std * _randn_like(g_prog, generator)).clamp(min=0.0)
