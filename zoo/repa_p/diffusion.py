"""Diffusion schedule, losses and the DDPM sampler of PIDM / REPA-P (x0-parameterisation).

* Cosine beta schedule (Nichol & Dhariwal), ``T`` steps, betas clipped at 0.999.
* Data loss: per-sample MSE between ``x0_hat`` and ``x0``, weighted by ``min(SNR_t, 5)`` (Min-SNR).
* Physics loss: the negative Gaussian log-likelihood of a zero residual, ``mean(R^2 / (2 var_t))`` with
  ``var_t`` the posterior variance ``beta_tilde_t``; ``beta_tilde_0 = 0`` is replaced by ``beta_tilde_1``.
* Physics weight schedule (ours): :func:`physics_weight_scale`, the multiplier of ``c_res`` and ``c_proj`` per
  optimizer step (the published late step, or a smooth ramp from step 0).
* Sampler: ancestral steps through ``q(x_s | x_t, x0_hat)`` with the "large" fixed variance ``beta_t``
  (as the authors' sampler), optionally on an evenly respaced subset of the ``T`` steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

__all__ = [
    "PHYSICS_RAMPS",
    "SCHEDULE_KEYS",
    "check_physics_schedule",
    "cosine_betas",
    "ddpm_sample",
    "physics_weight_scale",
    "residual_nll",
    "schedule",
    "snr_weighted_mse",
]


SCHEDULE_KEYS = (
    "betas",
    "alphas_cumprod",
    "alphas_cumprod_prev",
    "sqrt_alphas_cumprod",
    "sqrt_one_minus_alphas_cumprod",
    "posterior_variance",
    "residual_variance",
    "snr_weight",
)


def cosine_betas(timesteps: int, offset: float = 0.008) -> torch.Tensor:
    """The cosine schedule's ``beta_t`` for ``t = 0 .. T-1`` (float64)."""
    if timesteps < 2:
        raise ValueError(f"need at least 2 diffusion steps, got {timesteps}")
    x = torch.linspace(0, timesteps, timesteps + 1, dtype=torch.float64)
    alphas_cumprod = torch.cos((x / timesteps + offset) / (1 + offset) * math.pi * 0.5) ** 2
    alphas_cumprod = alphas_cumprod / alphas_cumprod[0]
    return (1 - alphas_cumprod[1:] / alphas_cumprod[:-1]).clamp(0, 0.999)


def schedule(timesteps: int, snr_clip: float = 5.0) -> dict[str, torch.Tensor]:
    """Every per-step quantity the losses and the sampler need, as float32 tensors of length ``T``.

    Keys: ``betas``, ``alphas_cumprod``, ``alphas_cumprod_prev``, ``sqrt_alphas_cumprod``,
    ``sqrt_one_minus_alphas_cumprod``, ``posterior_variance`` (``beta_tilde_t``, 0 at ``t = 0``),
    ``residual_variance`` (``beta_tilde_t`` with ``t = 0`` replaced by ``t = 1``) and ``snr_weight``
    (``min(SNR_t, snr_clip)``).
    """
    betas = cosine_betas(timesteps)
    alphas_cumprod = torch.cumprod(1 - betas, 0)
    prev = torch.cat([torch.ones(1, dtype=torch.float64), alphas_cumprod[:-1]])
    posterior_variance = betas * (1 - prev) / (1 - alphas_cumprod)
    residual_variance = posterior_variance.clone()
    residual_variance[0] = posterior_variance[1]  # beta_tilde_0 is 0: the residual likelihood needs a floor
    snr = alphas_cumprod / (1 - alphas_cumprod)
    out = {
        "betas": betas,
        "alphas_cumprod": alphas_cumprod,
        "alphas_cumprod_prev": prev,
        "sqrt_alphas_cumprod": alphas_cumprod.sqrt(),
        "sqrt_one_minus_alphas_cumprod": (1 - alphas_cumprod).sqrt(),
        "posterior_variance": posterior_variance,
        "residual_variance": residual_variance,
        "snr_weight": snr.clamp(max=snr_clip),
    }
    return {k: v.float() for k, v in out.items()}


def _per_sample(values: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return values[t].view(-1, *([1] * 3))


def q_sample(x0: torch.Tensor, t: torch.Tensor, noise: torch.Tensor, sched: dict[str, torch.Tensor]) -> torch.Tensor:
    """``x_t = sqrt(alpha_bar_t) x0 + sqrt(1 - alpha_bar_t) eps``."""
    return (
        _per_sample(sched["sqrt_alphas_cumprod"], t) * x0
        + _per_sample(sched["sqrt_one_minus_alphas_cumprod"], t) * noise
    )


def snr_weighted_mse(
    pred: torch.Tensor, target: torch.Tensor, t: torch.Tensor, sched: dict[str, torch.Tensor]
) -> torch.Tensor:
    """``mean_b [ min(SNR_t, 5) * mean_pixels (pred - target)^2 ]``."""
    per_sample = (pred - target).square().flatten(1).mean(1)
    return (per_sample * sched["snr_weight"][t]).mean()


def residual_nll(residual: torch.Tensor, t: torch.Tensor, sched: dict[str, torch.Tensor]) -> torch.Tensor:
    """``mean(R^2 / (2 beta_tilde_t))`` over the batch and every residual entry.

    Args:
        residual: ``(B, ...)`` residual entries of each sample (interior and boundary, flattened together).
        t: ``(B,)`` time steps.
        sched: Output of :func:`schedule`.
    """
    var = sched["residual_variance"][t].view(-1, *([1] * (residual.ndim - 1)))
    return (residual.square() / (2 * var)).mean()


PHYSICS_RAMPS = ("step", "linear", "geometric")


def check_physics_schedule(factor: float, start: float, ramp: str) -> None:
    """Raise ``ValueError`` unless ``(factor, start, ramp)`` is a valid :func:`physics_weight_scale` schedule."""
    if ramp not in PHYSICS_RAMPS:
        raise ValueError(f"late_physics_ramp must be one of {PHYSICS_RAMPS}, got {ramp!r}")
    if factor < 0 or not 0 <= start <= 1 or (ramp == "geometric" and factor == 0):
        raise ValueError(
            f"late_physics_factor must be >= 0 (> 0 for a geometric ramp) and late_physics_from in [0, 1], got "
            f"{factor} and {start}"
        )


def physics_weight_scale(step: int, max_steps: int, factor: float, start: float, ramp: str = "step") -> float:
    """The multiplier of the physics weights ``c_res`` and ``c_proj`` at optimizer step ``step`` of ``max_steps``.

    With ``end = start * max_steps`` and ``f = min(1, step / end)`` (``f = 1`` if ``end = 0``):

    * ``"step"``: ``factor`` from ``step >= end`` on, 1 before (the published late boost: the recipes use
      ``factor = 100``, ``start = 0.8``);
    * ``"linear"``: ``1 + (factor - 1) f``, a smooth ramp from 1 at step 0 to ``factor`` at ``end``, then flat;
    * ``"geometric"``: ``factor ** f``, the same ramp evenly spaced in log-scale (x10 half-way to x100).

    The ramps have no step change, so a steps-to-target count on their fits measures learning, not the schedule.

    Args:
        step: Optimizer step (``global_step``, from 0).
        max_steps: ``trainer.max_steps`` (>= 1).
        factor: Full multiplier (>= 0; 1 leaves the weights constant).
        start: Fraction of ``max_steps`` where the boost starts (``"step"``) or the ramp ends, in [0, 1].
        ramp: ``"step"``, ``"linear"`` or ``"geometric"`` (needs ``factor > 0``).
    """
    check_physics_schedule(factor, start, ramp)
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    end = start * max_steps
    if ramp == "step":
        return factor if step >= end else 1.0
    fraction = 1.0 if end == 0 else min(1.0, step / end)
    return 1.0 + (factor - 1.0) * fraction if ramp == "linear" else factor**fraction


def sampling_timesteps(timesteps: int, steps: int | None) -> list[int]:
    """The decreasing time steps visited by the sampler: all ``T`` or ``steps`` evenly spaced ones ending at 0."""
    if steps is None or steps >= timesteps:
        return list(range(timesteps - 1, -1, -1))
    if steps < 1:
        raise ValueError(f"sampling steps must be >= 1, got {steps}")
    grid = torch.linspace(0, timesteps - 1, steps).round().long().unique().tolist()
    return sorted(grid, reverse=True)


@torch.no_grad()
def ddpm_sample(
    denoise: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    shape: tuple[int, ...],
    sched: dict[str, torch.Tensor],
    steps: int | None = None,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Ancestral sampling with an x0-predicting network.

    Args:
        denoise: ``denoise(x_t, t) -> x0_hat`` with ``t`` a ``(B,)`` long tensor (the condition is bound in).
        shape: ``(B, C, n, n)``.
        sched: Output of :func:`schedule`.
        steps: Number of network evaluations (default: all ``T``; fewer respaces the chain).
        generator: Random generator for the initial noise and every step (reproducible samples).
        device: Device of the samples.

    Returns:
        The final ``x0`` estimate, shape ``shape``.
    """
    timesteps = sched["betas"].shape[0]
    alphas_cumprod = sched["alphas_cumprod"].to(device)
    x = torch.randn(shape, generator=generator, device=device)
    visited = sampling_timesteps(timesteps, steps)
    for index, t in enumerate(visited):
        batch_t = torch.full((shape[0],), t, device=device, dtype=torch.long)
        x0_hat = denoise(x, batch_t)
        if index == len(visited) - 1:
            return x0_hat  # the last step's posterior mean is x0_hat itself (alpha_bar_{-1} = 1)
        s = visited[index + 1]
        a_t, a_s = alphas_cumprod[t], alphas_cumprod[s]
        beta = 1 - a_t / a_s  # the (respaced) one-step beta between t and s
        mean = (a_s.sqrt() * beta / (1 - a_t)) * x0_hat + ((1 - beta).sqrt() * (1 - a_s) / (1 - a_t)) * x
        noise = torch.randn(shape, generator=generator, device=device)
        x = mean + beta.sqrt() * noise
    return x
