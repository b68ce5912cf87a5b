"""A small 2-D U-Net that predicts the clean field ``x0`` from ``(x_t, condition, t)``.

The shape follows PIDM's ``Unet3D`` reduced to 2-D images: per resolution level two residual blocks
(GroupNorm, SiLU, 3x3 convolutions, a time-embedding shift), a strided-convolution downsample, a middle
stage with one self-attention block at the lowest resolution, and a mirrored decoder with skip
connections. Nothing here knows about projection heads: they read activations through forward hooks
on the modules named by :meth:`UNet2D.tap_points` (see :mod:`zoo.repa_p.heads`).
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["UNet2D", "sinusoidal_embedding"]


def sinusoidal_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Transformer-style sinusoidal embedding of integer time steps: ``(B,) -> (B, dim)``."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / max(half - 1, 1))
    angles = t.float()[:, None] * freqs[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


class ResBlock(nn.Module):
    """Two 3x3 convolutions with GroupNorm and SiLU; the time embedding shifts the first.

    Args:
        in_channels: Input channels.
        out_channels: Output channels.
        time_dim: Width of the time embedding.
        groups: GroupNorm groups.
    """

    def __init__(self, in_channels: int, out_channels: int, time_dim: int, groups: int = 8) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(min(groups, in_channels), in_channels)
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.time = nn.Linear(time_dim, out_channels)
        self.norm2 = nn.GroupNorm(min(groups, out_channels), out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1)
        self.skip = nn.Conv2d(in_channels, out_channels, 1) if in_channels != out_channels else nn.Identity()
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        h = self.conv1(self.act(self.norm1(x)))
        h = h + self.time(emb)[:, :, None, None]
        h = self.conv2(self.act(self.norm2(h)))
        return h + self.skip(x)


class SelfAttention(nn.Module):
    """Multi-head self-attention over the pixels of a feature map, with a residual connection.

    Args:
        channels: Feature channels.
        heads: Attention heads.
        groups: GroupNorm groups.
    """

    def __init__(self, channels: int, heads: int = 4, groups: int = 8) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(min(groups, channels), channels)
        self.attn = nn.MultiheadAttention(channels, heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, hgt, wid = x.shape
        tokens = self.norm(x).flatten(2).transpose(1, 2)
        out, _ = self.attn(tokens, tokens, tokens, need_weights=False)
        return x + out.transpose(1, 2).reshape(b, c, hgt, wid)


class Level(nn.Module):
    """One resolution level: residual blocks, then a resampling layer (identity at the end of the path)."""

    def __init__(self, blocks: list[ResBlock], resample: nn.Module) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.resample = resample


class Middle(nn.Module):
    """The bottleneck: residual block, self-attention, residual block."""

    def __init__(self, channels: int, time_dim: int, heads: int, groups: int) -> None:
        super().__init__()
        self.block1 = ResBlock(channels, channels, time_dim, groups)
        self.attn = SelfAttention(channels, heads, groups)
        self.block2 = ResBlock(channels, channels, time_dim, groups)

    def forward(self, x: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        return self.block2(self.attn(self.block1(x, emb)), emb)


class UNet2D(nn.Module):
    """The denoiser ``x0_hat = f(concat(x_t, condition), t)``.

    Args:
        in_channels: Channels of ``x_t`` plus the condition channels.
        out_channels: Channels of the predicted field.
        dim: Width of the first level.
        dim_mults: Width multiplier per level; the grid halves between levels.
        num_res_blocks: Residual blocks per level (encoder and decoder each).
        attn_heads: Heads of the bottleneck self-attention.
        groups: GroupNorm groups.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        dim: int = 16,
        dim_mults: tuple[int, ...] = (1, 2, 4),
        num_res_blocks: int = 2,
        attn_heads: int = 4,
        groups: int = 8,
    ) -> None:
        super().__init__()
        if not dim_mults or num_res_blocks < 1:
            raise ValueError(f"need at least one level and one residual block, got {dim_mults}, {num_res_blocks}")
        self.dim = dim
        self.num_levels = len(dim_mults)
        time_dim = 4 * dim
        self.time_mlp = nn.Sequential(nn.Linear(dim, time_dim), nn.SiLU(), nn.Linear(time_dim, time_dim))
        self.init_conv = nn.Conv2d(in_channels, dim, 3, padding=1)
        widths = [dim * m for m in dim_mults]

        self.downs = nn.ModuleList()
        skip_widths = []
        current = dim
        for level, width in enumerate(widths):
            blocks = []
            for _ in range(num_res_blocks):
                blocks.append(ResBlock(current, width, time_dim, groups))
                current = width
                skip_widths.append(width)
            last = level == len(widths) - 1
            self.downs.append(Level(blocks, nn.Identity() if last else nn.Conv2d(width, width, 3, stride=2, padding=1)))

        self.mid = Middle(current, time_dim, attn_heads, groups)

        self.ups = nn.ModuleList()
        for level, width in enumerate(reversed(widths)):
            blocks = []
            for _ in range(num_res_blocks):
                blocks.append(ResBlock(current + skip_widths.pop(), width, time_dim, groups))
                current = width
            last = level == len(widths) - 1
            upsample = (
                nn.Identity()
                if last
                else nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(width, width, 3, padding=1))
            )
            self.ups.append(Level(blocks, upsample))

        self.final_block = ResBlock(current + dim, dim, time_dim, groups)
        self.final_conv = nn.Conv2d(dim, out_channels, 1)

    @property
    def min_size_divisor(self) -> int:
        """Grid sizes must be multiples of this (one halving per level below the first)."""
        return 2 ** (self.num_levels - 1)

    def tap_points(self) -> dict[str, str]:
        """The paper's named tap points as module names for :class:`zoo.repa_p.heads.FeatureTaps`.

        ``encoder``: the last residual block of the deepest encoder level (before any downsampling);
        ``bottleneck``: the middle stage's output; ``decoder``: the last residual block of the finest
        decoder level (after the last upsampling); ``output``: the final residual block before the 1x1
        output convolution.
        """
        last = self.num_levels - 1
        blocks = len(self.downs[last].blocks) - 1
        return {
            "encoder": f"downs.{last}.blocks.{blocks}",
            "bottleneck": "mid",
            "decoder": f"ups.{last}.blocks.{blocks}",
            "output": "final_block",
        }

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Predict ``x0`` from the network input ``x`` (``x_t`` and the condition, stacked on channels)."""
        emb = self.time_mlp(sinusoidal_embedding(t, self.dim))
        h = self.init_conv(x)
        first = h
        skips = []
        for level in self.downs:
            for block in level.blocks:
                h = block(h, emb)
                skips.append(h)
            h = level.resample(h)
        h = self.mid(h, emb)
        for level in self.ups:
            for block in level.blocks:
                h = block(torch.cat([h, skips.pop()], dim=1), emb)
            h = level.resample(h)
        h = self.final_block(torch.cat([h, first], dim=1), emb)
        return self.final_conv(h)
