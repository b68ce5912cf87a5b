"""The learned analogue of ProMiSE's decoding-bias finding: a conditional DDPM over AdK's PCA coefficients.

Plain torch (no Lightning): the PCA encoder, the cosine-schedule DDPM (``T = 100``), the eps-predicting MLP
``8 + 16 -> 128 -> 128 -> 8`` conditioned on a context token (apo / ligand / none, the last for
classifier-free guidance), the ancestral sampler with guidance ``w`` and temperature, and the importance
resampling by the inverse training-state frequency ("BioEmu-like" decoding).
"""

from __future__ import annotations

import math

import torch
from torch import nn

#: Context tokens; the last one is the unconditional token of classifier-free guidance.
CONTEXT_IDS = {"apo": 0, "ligand": 1}
NULL_CONTEXT = len(CONTEXT_IDS)
#: Predicted x0 (whitened PC units) is clipped to this range while sampling (training data lie within about 3).
X0_CLIP = 5.0


def context_id(context: str) -> int:
    """The token of a context name; a ValueError names the valid ones."""
    if context not in CONTEXT_IDS:
        raise ValueError(f"unknown context {context!r}; expected one of {', '.join(CONTEXT_IDS)}")
    return CONTEXT_IDS[context]


# ------------------------------------------------------------------------------------------------ PCA


def fit_pca(frames: torch.Tensor, n_components: int) -> dict[str, torch.Tensor]:
    """PCA of aligned ``(F, L, 3)`` frames: ``mean (3L,)``, ``basis (K, 3L)`` (orthonormal rows) and ``scale (K,)``.

    ``scale`` is the standard deviation of each component over the frames (the coefficients are whitened by
    it). Signs are fixed so the largest-magnitude entry of each basis vector is positive (deterministic).
    """
    flat = frames.reshape(frames.shape[0], -1).to(torch.float64)
    if n_components > min(flat.shape):
        raise ValueError(f"n_components={n_components} exceeds the rank bound {min(flat.shape)} of the frames")
    mean = flat.mean(dim=0)
    _, singular, vh = torch.linalg.svd(flat - mean, full_matrices=False)
    basis = vh[:n_components]
    signs = torch.sign(basis.gather(1, basis.abs().argmax(dim=1, keepdim=True)))
    basis = basis * signs
    scale = singular[:n_components] / math.sqrt(flat.shape[0] - 1)
    return {"mean": mean, "basis": basis, "scale": scale}


def encode(frames: torch.Tensor, pca: dict[str, torch.Tensor]) -> torch.Tensor:
    """Whitened coefficients ``(..., K)`` of aligned frames ``(..., L, 3)``."""
    flat = frames.reshape(*frames.shape[:-2], -1).to(pca["mean"].dtype)
    return ((flat - pca["mean"]) @ pca["basis"].mT) / pca["scale"]


def decode(coefficients: torch.Tensor, pca: dict[str, torch.Tensor]) -> torch.Tensor:
    """C-alpha coordinates ``(..., L, 3)`` of whitened coefficients ``(..., K)``."""
    flat = pca["mean"] + (coefficients.to(pca["mean"].dtype) * pca["scale"]) @ pca["basis"]
    return flat.reshape(*coefficients.shape[:-1], -1, 3)


# ----------------------------------------------------------------------------------------------- DDPM


def cosine_schedule(timesteps: int, offset: float = 0.008) -> dict[str, torch.Tensor]:
    """Nichol & Dhariwal's cosine schedule: ``betas``, ``alpha_bars`` and the posterior coefficients (float64)."""
    steps = torch.arange(timesteps + 1, dtype=torch.float64) / timesteps
    f = torch.cos((steps + offset) / (1 + offset) * math.pi / 2) ** 2
    alpha_bars_all = f / f[0]
    betas = (1 - alpha_bars_all[1:] / alpha_bars_all[:-1]).clamp(max=0.999)
    alphas = 1 - betas
    alpha_bars = torch.cumprod(alphas, dim=0)
    previous = torch.cat([torch.ones(1, dtype=torch.float64), alpha_bars[:-1]])
    return {
        "betas": betas,
        "alpha_bars": alpha_bars,
        "posterior_x0": betas * previous.sqrt() / (1 - alpha_bars),
        "posterior_xt": (1 - previous) * alphas.sqrt() / (1 - alpha_bars),
        "posterior_std": (betas * (1 - previous) / (1 - alpha_bars)).clamp_min(1e-20).sqrt(),
    }


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal embedding ``(B, dim)`` of integer steps ``(B,)``."""
    half = dim // 2
    frequencies = torch.exp(-math.log(1000.0) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    angles = t.float().unsqueeze(-1) * frequencies
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


class EpsilonMLP(nn.Module):
    """``eps(x_t, t, context)``: MLP ``K + cond -> hidden -> hidden -> K`` with SiLU.

    The ``cond``-dimensional conditioning is a sinusoidal step embedding (half) and a learned context token
    embedding (half; token ``NULL_CONTEXT`` = unconditional).

    Args:
        dim: Number of PCA coefficients K.
        cond_dim: Conditioning width (even).
        hidden: Hidden width.
    """

    def __init__(self, dim: int = 8, cond_dim: int = 16, hidden: int = 128) -> None:
        super().__init__()
        if cond_dim % 4:
            raise ValueError(f"cond_dim must be a multiple of 4, got {cond_dim}")
        self.cond_dim = cond_dim
        self.context = nn.Embedding(NULL_CONTEXT + 1, cond_dim // 2)
        self.net = nn.Sequential(
            nn.Linear(dim + cond_dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, dim)
        )

    def forward(self, x_t: torch.Tensor, t: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        cond = torch.cat([timestep_embedding(t, self.cond_dim // 2), self.context(context)], dim=-1)
        return self.net(torch.cat([x_t, cond], dim=-1))


def diffusion_loss(
    net: EpsilonMLP, x0: torch.Tensor, context: torch.Tensor, schedule: dict, context_dropout: float
) -> torch.Tensor:
    """Epsilon MSE at uniform random steps; contexts dropped to the null token with ``context_dropout``."""
    t = torch.randint(0, schedule["alpha_bars"].shape[0], (x0.shape[0],), device=x0.device)
    noise = torch.randn_like(x0)
    alpha_bar = schedule["alpha_bars"][t].to(x0.dtype).unsqueeze(-1)
    x_t = alpha_bar.sqrt() * x0 + (1 - alpha_bar).sqrt() * noise
    dropped = torch.rand(x0.shape[0], device=x0.device) < context_dropout
    context = torch.where(dropped, torch.full_like(context, NULL_CONTEXT), context)
    return (net(x_t, t, context) - noise).square().mean()


@torch.no_grad()
def sample(
    net: EpsilonMLP,
    n: int,
    context: int,
    schedule: dict,
    dim: int,
    guidance: float = 0.0,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Ancestral DDPM samples ``(n, K)`` (float32) for one context token.

    Guidance is classifier-free, ``eps = (1 + w) eps(x, c) - w eps(x, none)`` (``w = 0``: the conditional
    model). The temperature scales the initial noise and every step's noise (the spec's "noise scale"). The
    predicted x0 is clipped to ``+-X0_CLIP`` and the posterior mean taken from it.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    device = next(net.parameters()).device
    alpha_bars = schedule["alpha_bars"].float().to(device)
    coef_x0, coef_xt = schedule["posterior_x0"].float().to(device), schedule["posterior_xt"].float().to(device)
    std = schedule["posterior_std"].float().to(device)
    x = temperature * torch.randn(n, dim, generator=generator, device=device)
    tokens = torch.full((n,), context, dtype=torch.long, device=device)
    null = torch.full((n,), NULL_CONTEXT, dtype=torch.long, device=device)
    for step in reversed(range(alpha_bars.shape[0])):
        t = torch.full((n,), step, dtype=torch.long, device=device)
        if guidance:
            both = net(torch.cat([x, x]), torch.cat([t, t]), torch.cat([tokens, null]))
            conditional, unconditional = both[:n], both[n:]
            eps = (1 + guidance) * conditional - guidance * unconditional
        else:
            eps = net(x, t, tokens)
        x0 = ((x - (1 - alpha_bars[step]).sqrt() * eps) / alpha_bars[step].sqrt()).clamp(-X0_CLIP, X0_CLIP)
        x = coef_x0[step] * x0 + coef_xt[step] * x
        if step > 0:
            x = x + temperature * std[step] * torch.randn(n, dim, generator=generator, device=device)
    return x


def importance_resample(
    state_index: torch.Tensor, state_frequency: torch.Tensor, n: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Indices of ``n`` of the pool's samples drawn without replacement with weights ``1 / frequency[state]``.

    The weight undoes the training-data exposure: a sample of a state seen in a fraction ``f`` of the training
    frames counts ``1/f``.

    Args:
        state_index: ``(P,)`` state of each pool sample (its nearest reference state).
        state_frequency: ``(M,)`` fraction of training frames in each state (all > 0).
        n: Samples kept (``n <= P``).
        generator: Random generator.
    """
    if n > state_index.shape[0]:
        raise ValueError(f"cannot keep {n} samples of a pool of {state_index.shape[0]}")
    weights = 1.0 / state_frequency.to(torch.float64).clamp_min(1e-6)[state_index]
    return torch.multinomial(weights, n, replacement=False, generator=generator)
