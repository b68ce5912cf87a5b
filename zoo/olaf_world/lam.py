"""The beta-VAE latent action model (LAM), the trajectory head and the SeqDelta-REPA losses, in plain torch.

Shapes follow the authors' LAM (github.com/showlab/Olaf-World, MIT; read for the exact losses, written anew):

* videos ``(B, T, H, W, C)`` in [0, 1] are cut into ``p x p`` patches; a learned action-prompt token per frame
  (init U[-1, 1]) is prepended to that frame's patch tokens;
* the encoder alternates spatial attention within a frame and causal temporal attention per token position;
* the prompt outputs of frames 1..T-1 give ``(mu, logvar)`` (logvar clamped to [-10, 10]) of ``z_t``;
* the decoder (spatial attention only) reconstructs frame ``t`` from the patches of frame ``t - 1`` plus
  ``action_up(z_t)``, through a sigmoid;
* loss = MSE + beta * KL + lambda * (1 - cos(g(mean_t z_t), tau)), with ``g`` the trajectory head.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# The shift decoder's logits and mask are 10 x their parameters: AdamW's ~lr-sized steps move them 10x faster
# (a few hundred steps must suffice to pick a 7-pixel shift).
SHIFT_GAIN = 10.0


def kl_divergence(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """-1/2 sum_dim (1 + logvar - mu^2 - exp(logvar)), averaged over all leading dimensions (the latents)."""
    return (-0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(dim=-1)).mean()


def align_loss(prediction: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    """1 - cos(prediction, tau), averaged over the batch."""
    return (1 - F.cosine_similarity(prediction, tau, dim=-1)).mean()


class Attention(nn.Module):
    """Pre-norm multi-head self-attention (optionally causal: position i attends to positions <= i)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"model_dim={dim} must be divisible by heads={heads}")
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, causal: bool = False) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        h = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return x + self.out(h.transpose(1, 2).reshape(b, n, d))


class MLP(nn.Module):
    def __init__(self, dim: int, ratio: int = 2) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, ratio * dim), nn.GELU(), nn.Linear(ratio * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.net(x)


class STBlock(nn.Module):
    """Spatial attention within each frame, then (causal) temporal attention per token position, then an MLP."""

    def __init__(self, dim: int, heads: int, causal: bool = True) -> None:
        super().__init__()
        self.spatial = Attention(dim, heads)
        self.temporal = Attention(dim, heads)
        self.mlp = MLP(dim)
        self.causal = causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, n, d = x.shape
        x = self.spatial(x.reshape(b * t, n, d)).reshape(b, t, n, d)
        x = x.transpose(1, 2).reshape(b * n, t, d)
        x = self.temporal(x, causal=self.causal).reshape(b, n, t, d).transpose(1, 2)
        return self.mlp(x)


class SpatialBlock(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.attn = Attention(dim, heads)
        self.mlp = MLP(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.attn(x))


class MotionStem(nn.Module):
    """Tokens of frame t from a small CNN on (frame t, frame t - frame t-1) (ours: the spec embeds patches linearly).

    The frames are average-pooled 2x, then ``log2(patch) - 1`` stride-2 3x3 convolutions (GELU between) reach
    the patch grid, so the tokens line up with :func:`patchify`'s (row-major, one per ``patch x patch`` cell).
    Why: the action in a top-down game is a global shift of the view by a few pixels; a linear embedding of a
    16 x 16 patch cannot compare the two frames' edges, the convolutions can (the inverse-dynamics CNN of
    :mod:`zoo.olaf_world.metrics` sees the same inputs). Frame 0 gets a zero change. Causal: frame t's tokens read
    frames t and t-1 only.
    """

    def __init__(self, channels: int, patch: int, model_dim: int, width: int = 32) -> None:
        super().__init__()
        if patch < 4 or patch & (patch - 1):
            raise ValueError(f"patch={patch}: the conv stem needs a power of two >= 4")
        layers: list[nn.Module] = [nn.AvgPool2d(2)]
        depth = patch.bit_length() - 2  # log2(patch) - 1 stride-2 convolutions after the 2x pooling
        in_ch = 2 * channels
        for i in range(depth):
            out_ch = model_dim if i == depth - 1 else min(model_dim, width * 2**i)
            layers.append(nn.Conv2d(in_ch, out_ch, 3, stride=2, padding=1))
            if i < depth - 1:
                layers.append(nn.GELU())
            in_ch = out_ch
        self.net = nn.Sequential(*layers)

    def forward(self, videos: torch.Tensor) -> torch.Tensor:
        """``(B, T, H, W, C)`` -> ``(B, T, (H/p)(W/p), model_dim)``."""
        b, t = videos.shape[:2]
        change = torch.cat([torch.zeros_like(videos[:, :1]), videos[:, 1:] - videos[:, :-1]], dim=1)
        x = torch.cat([videos, change], dim=-1).reshape(b * t, *videos.shape[2:4], -1).permute(0, 3, 1, 2)
        x = self.net(x)
        return x.permute(0, 2, 3, 1).reshape(b, t, -1, x.shape[1])


def transition_cnn(in_channels: int, side: int, out_dim: int, hidden: int = 128) -> nn.Sequential:
    """Three stride-2 3x3 convolutions (32, 64, 64 channels, ReLU) to a ``side x side`` map, flattened (positions
    kept), then Linear -> ReLU -> Linear to ``out_dim``: the frame-pair CNN of :class:`ConvActionEncoder` and of
    the evaluation's inverse-dynamics classifier.

    Args:
        in_channels: Channels of the stacked frame pair (e.g. previous, next and their difference: 9 for RGB).
        side: Side of the map after the three convolutions (input side / 8).
        out_dim: Output width.
        hidden: Width of the hidden linear layer.
    """
    return nn.Sequential(
        nn.Conv2d(in_channels, 32, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(64 * side * side, hidden),
        nn.ReLU(),
        nn.Linear(hidden, out_dim),
    )


class ConvActionEncoder(nn.Module):
    """z_t from frames t-1 and t alone through a small CNN (ours; the spec's encoder is the ST transformer).

    Input per transition: (frame t-1, frame t, their difference) average-pooled to 32 x 32 (9 channels); three
    stride-2 3x3 convolutions (32, 64, 64 channels, ReLU) to a 4 x 4 map, flattened (positions kept: the head
    can read where the change is, e.g. the player's sprite at the centre), then Linear -> ReLU -> Linear to
    ``(mu, logvar)``. The architecture of the evaluation's inverse-dynamics CNN (:mod:`zoo.olaf_world.metrics`),
    which learns the action from labels ~4x faster per sample than the ST transformer here. Causal by
    construction: z_t reads frames t-1 and t only.
    """

    def __init__(self, channels: int, image_size: int, latent_dim: int, hidden: int = 128) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.AvgPool2d(2), *transition_cnn(3 * channels, image_size // 16, 2 * latent_dim, hidden)
        )

    def forward(self, videos: torch.Tensor) -> torch.Tensor:
        """``(B, T, H, W, C)`` -> stats ``(B, T-1, 2 latent_dim)``."""
        b, t = videos.shape[:2]
        previous, following = videos[:, :-1], videos[:, 1:]
        x = torch.cat([previous, following, following - previous], dim=-1)
        x = x.reshape(b * (t - 1), *x.shape[2:]).permute(0, 3, 1, 2)
        return self.net(x).reshape(b, t - 1, -1)


def patchify(videos: torch.Tensor, patch: int) -> torch.Tensor:
    """``(B, T, H, W, C)`` -> ``(B, T, (H/p)(W/p), p*p*C)``, patches in row-major order."""
    b, t, h, w, c = videos.shape
    x = videos.reshape(b, t, h // patch, patch, w // patch, patch, c)
    return x.permute(0, 1, 2, 4, 3, 5, 6).reshape(b, t, (h // patch) * (w // patch), patch * patch * c)


def unpatchify(patches: torch.Tensor, patch: int, height: int, width: int, channels: int) -> torch.Tensor:
    """Inverse of :func:`patchify`."""
    b, t = patches.shape[:2]
    x = patches.reshape(b, t, height // patch, width // patch, patch, patch, channels)
    return x.permute(0, 1, 2, 4, 3, 5, 6).reshape(b, t, height, width, channels)


def shift_frames(frames: torch.Tensor, kernel_x: torch.Tensor, kernel_y: torch.Tensor) -> torch.Tensor:
    """Separable per-sample filtering of ``frames`` ``(N, H, W, C)`` by ``kernel_x``, ``kernel_y`` ``(N, K)`` (K odd).

    ``out[n, y, x] = sum_ij kernel_y[n, i] kernel_x[n, j] frames[n, y + i - r, x + j - r]`` with ``r = K // 2`` and
    replicated edges: a kernel that is one-hot at ``j = r + s`` moves the content by ``s`` pixels to the left.
    """
    k = kernel_x.shape[-1]
    r = k // 2
    h, w = frames.shape[1:3]
    padded = F.pad(frames.permute(0, 3, 1, 2), (r, r, r, r), mode="replicate").permute(0, 2, 3, 1)
    rows = sum(kernel_x[:, j, None, None, None] * padded[:, :, j : j + w] for j in range(k))
    return sum(kernel_y[:, i, None, None, None] * rows[:, i : i + h] for i in range(k))


class LatentActionModel(nn.Module):
    """The beta-VAE LAM: spatio-temporal encoder -> z_t (t = 1..T-1) -> spatial decoder of frame t from t-1.

    Args:
        image_size: Frame side length (square frames).
        channels: Colour channels.
        patch: Patch side length.
        model_dim: Token width.
        encoder_blocks: Spatio-temporal encoder blocks.
        decoder_blocks: Spatial decoder blocks.
        heads: Attention heads.
        latent_dim: Width of z.
        max_frames: Longest clip (temporal position embeddings).
        causal: Causal temporal attention (the released configs).
        residual: Add the decoder's output to the logits of the previous frame before the sigmoid, with the
            output layer zero-initialised, so the untrained decoder copies frame t-1 and training spends its
            steps on the change (our choice for short CPU runs; False is the authors' plain sigmoid decoder).
    """

    def __init__(
        self,
        image_size: int = 64,
        channels: int = 3,
        patch: int = 8,
        model_dim: int = 128,
        encoder_blocks: int = 3,
        decoder_blocks: int = 3,
        heads: int = 4,
        latent_dim: int = 32,
        max_frames: int = 16,
        causal: bool = True,
        residual: bool = True,
        shift_kernel: int = 0,
        logvar_init: float | None = None,
        motion_tokens: bool = False,
        encoder_stem: str = "linear",
        latent_readout: str = "prompt",
        encoder: str = "transformer",
    ) -> None:
        super().__init__()
        if encoder not in ("transformer", "conv"):
            raise ValueError(f"encoder={encoder!r}: choose 'transformer' or 'conv'")
        if latent_readout not in ("prompt", "tokens"):
            raise ValueError(f"latent_readout={latent_readout!r}: choose 'prompt' or 'tokens'")
        if encoder_stem not in ("linear", "conv"):
            raise ValueError(f"encoder_stem={encoder_stem!r}: choose 'linear' or 'conv'")
        if shift_kernel and (shift_kernel % 2 == 0 or shift_kernel < 3 or not residual):
            raise ValueError(f"shift_kernel={shift_kernel}: choose 0 (off) or an odd K >= 3, with residual=True")
        if image_size % patch:
            raise ValueError(f"patch={patch} must divide image_size={image_size}")
        self.image_size, self.channels, self.patch, self.latent_dim = image_size, channels, patch, latent_dim
        num_patches = (image_size // patch) ** 2
        patch_dim = patch * patch * channels
        self.max_frames = max_frames
        self.motion_tokens = motion_tokens
        self.encoder_stem = encoder_stem
        self.latent_readout = latent_readout
        self.encoder_type = encoder
        if encoder == "conv":
            self.conv_encoder = ConvActionEncoder(channels, image_size, latent_dim)
            latent_head = self.conv_encoder.net[-1]
        else:
            if encoder_stem == "conv":
                self.stem = MotionStem(channels, patch, model_dim)
            else:
                self.patch_in = nn.Linear(2 * patch_dim if motion_tokens else patch_dim, model_dim)
            self.action_prompt = nn.Parameter(torch.empty(1, 1, 1, model_dim).uniform_(-1, 1))
            self.spatial_pos = nn.Parameter(torch.randn(1, 1, num_patches + 1, model_dim) * 0.02)
            self.temporal_pos = nn.Parameter(torch.randn(1, max_frames, 1, model_dim) * 0.02)
            self.encoder = nn.ModuleList(STBlock(model_dim, heads, causal) for _ in range(encoder_blocks))
            self.encoder_norm = nn.LayerNorm(model_dim)
            readout_width = model_dim * (num_patches + 1 if latent_readout == "tokens" else 1)
            self.to_latent = nn.Linear(readout_width, 2 * latent_dim)
            latent_head = self.to_latent
        if logvar_init is not None:
            with torch.no_grad():
                latent_head.bias[latent_dim:] = logvar_init
        self.patch_up = nn.Linear(patch_dim, model_dim)
        self.action_up = nn.Linear(latent_dim, model_dim)
        self.decoder_pos = nn.Parameter(torch.randn(1, num_patches, model_dim) * 0.02)
        self.decoder = nn.ModuleList(SpatialBlock(model_dim, heads) for _ in range(decoder_blocks))
        self.decoder_norm = nn.LayerNorm(model_dim)
        self.patch_out = nn.Linear(model_dim, patch_dim)
        self.residual = residual
        if residual:
            nn.init.zeros_(self.patch_out.weight)
            nn.init.zeros_(self.patch_out.bias)
        self.shift_kernel = shift_kernel
        if shift_kernel:
            # logits of the two 1-D kernels; the bias starts peaked on the centre tap (an identity-like kernel)
            self.to_shift = nn.Linear(latent_dim, 2 * shift_kernel)
            nn.init.zeros_(self.to_shift.weight)
            with torch.no_grad():
                self.to_shift.bias.zero_()
                self.to_shift.bias[[shift_kernel // 2, shift_kernel + shift_kernel // 2]] = 4.0 / SHIFT_GAIN
            # per-pixel logit of "this pixel scrolls" (shared by every frame); 0 = half moved, half copied
            self.shift_mask = nn.Parameter(torch.zeros(1, image_size, image_size, 1))

    def check_videos(self, videos: torch.Tensor) -> None:
        """Raise a one-line ValueError unless ``videos`` is ``(B, T >= 2, H, W, C)`` in [0, 1] at this size."""
        shape = (self.image_size, self.image_size, self.channels)
        if videos.ndim != 5 or tuple(videos.shape[2:]) != shape:
            raise ValueError(f"videos must be (B, T, {shape[0]}, {shape[1]}, {shape[2]}), got {tuple(videos.shape)}")
        if videos.shape[1] < 2:
            raise ValueError(f"videos have T={videos.shape[1]} frames; a latent action needs T >= 2")
        if videos.shape[1] > self.max_frames:
            raise ValueError(f"videos have T={videos.shape[1]} frames; this model takes at most {self.max_frames}")
        if not torch.is_floating_point(videos) or videos.min() < 0 or videos.max() > 1:
            raise ValueError("videos must be float frames in [0, 1] (divide uint8 frames by 255)")

    def encode(self, videos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mu, logvar)`` of shape ``(B, T-1, latent_dim)``: z_t is the action from frame t-1 to t."""
        self.check_videos(videos)
        b, t = videos.shape[:2]
        if self.encoder_type == "conv":
            mu, logvar = self.conv_encoder(videos).chunk(2, dim=-1)
            return mu, logvar.clamp(-10.0, 10.0)
        if self.encoder_stem == "conv":
            tokens = self.stem(videos)
        else:
            patches = patchify(videos, self.patch)
            if self.motion_tokens:
                change = torch.cat([torch.zeros_like(patches[:, :1]), patches[:, 1:] - patches[:, :-1]], dim=1)
                patches = torch.cat([patches, change], dim=-1)
            tokens = self.patch_in(patches)
        prompt = self.action_prompt.expand(b, t, 1, -1)
        x = torch.cat([prompt, tokens], dim=2) + self.spatial_pos + self.temporal_pos[:, :t]
        for block in self.encoder:
            x = block(x)
        x = self.encoder_norm(x[:, 1:])
        stats = self.to_latent(x.flatten(2) if self.latent_readout == "tokens" else x[:, :, 0])
        mu, logvar = stats.chunk(2, dim=-1)
        return mu, logvar.clamp(-10.0, 10.0)

    def decode(self, previous: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """Frames ``(B, K, H, W, C)`` predicted from the previous frames and latent actions ``z`` ``(B, K, d)``."""
        b, k = previous.shape[:2]
        previous_patches = patchify(previous, self.patch)
        base_patches = previous_patches
        if self.shift_kernel:
            base_patches = patchify(self.shifted(previous, z), self.patch)
        x = self.patch_up(previous_patches) + self.action_up(z).unsqueeze(2) + self.decoder_pos
        x = x.reshape(b * k, *x.shape[2:])
        for block in self.decoder:
            x = block(x)
        logits = self.patch_out(self.decoder_norm(x)).reshape(b, k, -1, self.patch_out.out_features)
        if self.residual:
            logits = logits + torch.logit(base_patches, eps=1e-3)
        patches = torch.sigmoid(logits)
        return unpatchify(patches, self.patch, self.image_size, self.image_size, self.channels)

    def shifted(self, previous: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """The shift decoder's base: frames ``previous`` ``(B, K, H, W, C)`` moved by the kernels ``z`` picks."""
        b, k = previous.shape[:2]
        kernels = (SHIFT_GAIN * self.to_shift(z)).reshape(b * k, 2, self.shift_kernel).softmax(dim=-1)
        flat = previous.reshape(b * k, *previous.shape[2:])
        moved = shift_frames(flat, kernels[:, 0], kernels[:, 1]).reshape(previous.shape)
        mask = torch.sigmoid(SHIFT_GAIN * self.shift_mask)
        return mask * moved + (1 - mask) * previous

    def forward(self, videos: torch.Tensor, sample: bool = True) -> dict[str, torch.Tensor]:
        """Encode, sample ``z`` (``mu`` when ``sample`` is False) and reconstruct frames 1..T-1."""
        mu, logvar = self.encode(videos)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp() if sample else mu
        recon = self.decode(videos[:, :-1], z)
        return {"mu": mu, "logvar": logvar, "z": z, "recon": recon}


class TrajectoryHead(nn.Module):
    """g: LayerNorm(latent) -> Linear -> SiLU -> Linear -> SiLU -> Linear(latent -> teacher_dim), Xavier init."""

    def __init__(self, latent_dim: int = 32, teacher_dim: int = 1280) -> None:
        super().__init__()
        self.teacher_dim = teacher_dim
        self.net = nn.Sequential(
            nn.LayerNorm(latent_dim),
            nn.Linear(latent_dim, latent_dim),
            nn.SiLU(),
            nn.Linear(latent_dim, latent_dim),
            nn.SiLU(),
            nn.Linear(latent_dim, teacher_dim),
        )
        for layer in self.net:
            if isinstance(layer, nn.Linear):
                nn.init.xavier_uniform_(layer.weight)
                nn.init.zeros_(layer.bias)

    def forward(self, z_mean: torch.Tensor) -> torch.Tensor:
        return self.net(z_mean)


def lam_losses(
    lam: LatentActionModel,
    head: TrajectoryHead,
    videos: torch.Tensor,
    tau: torch.Tensor | None,
    beta: float,
    align_weight: float,
) -> dict[str, torch.Tensor]:
    """MSE + beta * KL + lambda * align for one batch; ``tau`` may be None only when ``align_weight == 0``."""
    out = lam(videos, sample=True)
    mse = (videos[:, 1:] - out["recon"]).pow(2).mean()
    kl = kl_divergence(out["mu"], out["logvar"])
    loss = mse + beta * kl
    losses = {"mse": mse, "kl": kl}
    if align_weight:
        if tau is None:
            raise ValueError("align_weight > 0 needs tau")
        if tau.shape != (videos.shape[0], head.teacher_dim):
            raise ValueError(f"tau has shape {tuple(tau.shape)}; the trajectory head expects (B, {head.teacher_dim})")
        align = align_loss(head(out["z"].mean(dim=1)), tau)
        loss = loss + align_weight * align
        losses["align"] = align
    losses["loss"] = loss
    return losses
