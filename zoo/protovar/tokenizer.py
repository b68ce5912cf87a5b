"""Multi-scale residual VQ-VAE (VAR's tokenizer, tiny): 32x32 grey images <-> 85 codes at scales 1, 2, 4, 8.

Plain torch. The encoder maps a [-1, 1] image padded to 32x32 to f (32 x 8 x 8); residual quantisation over the
scales (1, 2, 4, 8) with one shared codebook gives the code maps r_1..r_4 and f_hat = sum_k z_k; the decoder maps
f_hat back to the image. Lookup is by cosine (l2-normalised vectors), the value is the raw codebook row, kept
as an exponential moving average of the residuals assigned to it (decay 0.99), with dead-code restart.

Dead-code restart (our choice; VAR's released quantiser has none, the spec asks for EMA + restart): the restart
of Jukebox (Dhariwal et al. 2020) and SoundStream (Zeghidour et al. 2021). ``ema_count`` is the EMA of a code's
hits per training step (the residual vectors of all scales of the batch assigned to it; 64 images x 85 tokens over
256 codes is ~21 on average). Every ``restart_every`` updates, each code whose EMA count is below
``dead_threshold`` (1.0: under one hit per step) is moved onto a distinct random residual vector of the current
batch (value and EMA sum set to it, EMA count to ``dead_threshold``, so it has ``restart_every`` steps to win hits
before it can be restarted again); live codes are not touched. The codebook starts random (N(0, 0.1)) with EMA
count 1, so the first check also re-seeds every code that the first batch did not hit from encoder outputs, a
data-dependent initialisation. A first version used a threshold of 0.01 with EMA count 1 at the start: a code
never hit takes 0.99^t < 0.01, t = 459 steps, to count as dead, more than the recipe's 312, so no code was ever
restarted and 30.5% of the codebook was used on the test images.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zoo._errors import ZooError

SCALES = (1, 2, 4, 8)


def to_model_range(images: torch.Tensor) -> torch.Tensor:
    """uint8 [N, 28, 28] (or floats in [0, 1]) -> floats [N, 1, 32, 32] in [-1, 1], zero-padded by 2 (value -1).

    Raises:
        ZooError: If the images are not 28x28.
    """
    x = torch.as_tensor(images)
    if x.dim() == 4 and x.shape[1] == 1:
        x = x[:, 0]
    if x.dim() == 2:
        x = x[None]
    if x.dim() != 3 or tuple(x.shape[-2:]) != (28, 28):
        raise ZooError(f"images must be 28x28 Fashion-MNIST-like arrays [N, 28, 28], got shape {tuple(x.shape)}")
    x = x.float() / 255.0 if x.dtype == torch.uint8 else x.float()
    return F.pad(x * 2 - 1, (2, 2, 2, 2), value=-1.0)[:, None]


def to_pixels(x: torch.Tensor) -> torch.Tensor:
    """[N, 1, 32, 32] in [-1, 1] -> uint8 [N, 28, 28] (crops the padding)."""
    x = x[:, 0, 2:30, 2:30].clamp(-1, 1)
    return ((x + 1) * 127.5).round().to(torch.uint8)


class ResBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.silu(self.conv1(F.silu(x))))


class Phi(nn.Module):
    """phi_k: a 3x3 conv blended 0.5 with its input (VAR's quant_resi)."""

    def __init__(self, dim: int, blend: float = 0.5) -> None:
        super().__init__()
        self.conv = nn.Conv2d(dim, dim, 3, padding=1)
        self.blend = blend

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return (1 - self.blend) * h + self.blend * self.conv(h)


class MultiScaleVQVAE(nn.Module):
    """The tokenizer.

    Args:
        codebook_size: V, the number of codes (shared by every scale).
        dim: Code dimension (channels of f).
        hidden: Channels of the first encoder stage (the second has twice as many).
        scales: Side lengths of the code maps, coarse to fine; the last is f's side (8).
        decay: EMA decay of the codebook.
        dead_threshold: A code whose EMA count (hits per step) is below this at a check is restarted on a random
            residual vector of the batch.
        restart_every: Check for dead codes every this many EMA updates.
    """

    def __init__(
        self,
        codebook_size: int = 256,
        dim: int = 32,
        hidden: int = 32,
        scales: tuple[int, ...] = SCALES,
        decay: float = 0.99,
        dead_threshold: float = 1.0,
        restart_every: int = 1,
    ) -> None:
        super().__init__()
        if dead_threshold < 0 or restart_every < 1:
            raise ZooError(f"dead_threshold must be >= 0 and restart_every >= 1, got {dead_threshold}, {restart_every}")
        self.scales = tuple(scales)
        self.decay, self.dead_threshold, self.restart_every = decay, dead_threshold, restart_every
        self.updates = 0  # EMA updates so far (not a buffer: a resumed fit restarts the count, a shifted phase only)
        self.encoder = nn.Sequential(
            nn.Conv2d(1, hidden, 4, stride=2, padding=1), ResBlock(hidden),
            nn.Conv2d(hidden, 2 * hidden, 4, stride=2, padding=1), ResBlock(2 * hidden),
            nn.SiLU(), nn.Conv2d(2 * hidden, dim, 1),
        )  # fmt: skip
        self.decoder = nn.Sequential(
            nn.Conv2d(dim, 2 * hidden, 1), ResBlock(2 * hidden),
            nn.ConvTranspose2d(2 * hidden, hidden, 4, stride=2, padding=1), ResBlock(hidden),
            nn.SiLU(), nn.ConvTranspose2d(hidden, 1, 4, stride=2, padding=1),
        )  # fmt: skip
        self.phis = nn.ModuleList(Phi(dim) for _ in self.scales)
        embedding = torch.randn(codebook_size, dim) * 0.1
        self.register_buffer("codebook", embedding)
        self.register_buffer("ema_count", torch.ones(codebook_size))
        self.register_buffer("ema_sum", embedding.clone())

    @property
    def side(self) -> int:
        return self.scales[-1]

    @property
    def tokens_per_image(self) -> int:
        return sum(k * k for k in self.scales)

    def lookup(self, vectors: torch.Tensor) -> torch.Tensor:
        """Nearest code by cosine: vectors [..., D] -> ids [...]."""
        flat = F.normalize(vectors.reshape(-1, vectors.shape[-1]), dim=-1)
        ids = (flat @ F.normalize(self.codebook, dim=-1).T).argmax(-1)
        return ids.reshape(vectors.shape[:-1])

    def code_to_z(self, ids: torch.Tensor, index: int) -> torch.Tensor:
        """Code map ids [N, k, k] of scale ``index`` -> its contribution z_k [N, D, 8, 8]."""
        h = self.codebook[ids].permute(0, 3, 1, 2)
        if h.shape[-1] != self.side:
            h = F.interpolate(h, size=(self.side, self.side), mode="bicubic", align_corners=False)
        return self.phis[index](h)

    def quantize(self, f: torch.Tensor, update: bool = False) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Residual quantisation of f [N, D, 8, 8]: the code maps (coarse to fine) and f_hat."""
        residual, f_hat, codes = f, torch.zeros_like(f), []
        stats = []
        for index, k in enumerate(self.scales):
            down = F.adaptive_avg_pool2d(residual, k) if k != self.side else residual
            vectors = down.permute(0, 2, 3, 1)
            ids = self.lookup(vectors.detach())
            codes.append(ids)
            if update:
                stats.append((ids.reshape(-1), vectors.detach().reshape(-1, vectors.shape[-1])))
            z = self.code_to_z(ids, index)
            residual = residual - z
            f_hat = f_hat + z
        if update:
            self._ema_update(stats)
        return codes, f_hat

    @torch.no_grad()
    def _ema_update(self, stats) -> None:
        ids = torch.cat([s[0] for s in stats])
        vectors = torch.cat([s[1] for s in stats])
        onehot = F.one_hot(ids, self.codebook.shape[0]).float()
        self.ema_count.mul_(self.decay).add_(onehot.sum(0), alpha=1 - self.decay)
        self.ema_sum.mul_(self.decay).add_(onehot.T @ vectors, alpha=1 - self.decay)
        self.codebook.copy_(self.ema_sum / self.ema_count.clamp_min(1e-5)[:, None])
        self.updates += 1
        if self.updates % self.restart_every == 0:
            self.restart_dead(vectors)

    @torch.no_grad()
    def restart_dead(self, vectors: torch.Tensor) -> torch.Tensor:
        """Move every code whose EMA count is below ``dead_threshold`` onto a distinct random row of ``vectors``.

        Args:
            vectors: [M, D] residual vectors the quantiser looked up (the current batch, all scales).

        Returns:
            The restarted code ids. Live codes are left as they are.
        """
        dead = (self.ema_count < self.dead_threshold).nonzero().flatten()
        if len(dead) == 0:
            return dead
        if len(vectors) >= len(dead):
            pick = torch.randperm(len(vectors), device=vectors.device)[: len(dead)]
        else:
            pick = torch.randint(0, len(vectors), (len(dead),), device=vectors.device)
        count = max(self.dead_threshold, 1e-3)
        self.codebook[dead] = vectors[pick]
        self.ema_sum[dead] = vectors[pick] * count
        self.ema_count[dead] = count
        return dead

    def encode(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Images [N, 1, 32, 32] in [-1, 1] -> code maps [N, k, k] per scale."""
        return self.quantize(self.encoder(x))[0]

    def codes_to_fhat(self, codes: list[torch.Tensor]) -> torch.Tensor:
        return sum(self.code_to_z(ids, i) for i, ids in enumerate(codes))

    def decode_fhat(self, f_hat: torch.Tensor) -> torch.Tensor:
        return self.decoder(f_hat).clamp(-1, 1)

    def decode(self, codes: list[torch.Tensor]) -> torch.Tensor:
        return self.decode_fhat(self.codes_to_fhat(codes))

    def forward(self, x: torch.Tensor, update: bool = False) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """Reconstruction (straight-through), the two quantiser losses and the codes.

        Returns:
            (reconstruction, (commitment ||f - sg f_hat||^2, phi loss ||f_hat - sg f||^2), codes). The codebook
            itself moves by EMA; the phi loss trains the phi_k convs (VAR's quant_resi gets its gradient so too).
        """
        f = self.encoder(x)
        codes, f_hat = self.quantize(f, update=update)
        commit = (F.mse_loss(f, f_hat.detach()), F.mse_loss(f_hat, f.detach()))
        f_st = f + (f_hat - f).detach()
        return self.decoder(f_st), commit, codes

    def var_inputs(self, codes: list[torch.Tensor]) -> torch.Tensor:
        """Teacher-forcing inputs of the VAR: for scales 2.. the cumulative f_hat_<k downsampled to k x k.

        Returns:
            [N, sum_{k>1} k^2, D]: the input vectors of every token after the first scale, in token order.
        """
        f_hat = torch.zeros(codes[0].shape[0], self.codebook.shape[1], self.side, self.side, device=codes[0].device)
        pieces = []
        for index in range(len(self.scales) - 1):
            f_hat = f_hat + self.code_to_z(codes[index], index)
            pieces.append(self.next_input(f_hat, index + 1))
        return torch.cat(pieces, 1)

    def next_input(self, f_hat: torch.Tensor, index: int) -> torch.Tensor:
        """Cumulative f_hat [N, D, 8, 8] -> inputs of scale ``index`` [N, k*k, D]."""
        k = self.scales[index]
        down = F.adaptive_avg_pool2d(f_hat, k) if k != self.side else f_hat
        return down.flatten(2).transpose(1, 2)

    def cumulative_maps(self, codes: list[torch.Tensor], upto: int) -> torch.Tensor:
        """f_hat_<=k (scales 0..upto) area-downsampled to k x k, flattened: [N, k*k*D] (prototype space)."""
        f_hat = sum(self.code_to_z(codes[i], i) for i in range(upto + 1))
        k = self.scales[upto]
        down = F.adaptive_avg_pool2d(f_hat, k) if k != self.side else f_hat
        return down.permute(0, 2, 3, 1).reshape(f_hat.shape[0], -1)
