"""Weak and strong views of a whole client's images at once (vectorised, one ``torch.Generator``).

Weak view: random shift of up to ±``shift`` pixels (zero padding, then crop) and a horizontal flip with
probability 1/2. Strong view: the weak view, then a contrast jitter, one random erasing box and additive
Gaussian noise, clamped to [0, 1]. Both run on the images' device and draw every random number from the
given generator, so a view is a pure function of (images, generator state).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class AugmentConfig:
    """Parameters of the two views.

    Args:
        shift: Largest shift in pixels of the weak view.
        flip: Whether the weak view flips horizontally with probability 1/2.
        erase_min: Smallest side of the erasing box of the strong view.
        erase_max: Largest side of the erasing box.
        noise_std: Standard deviation of the additive Gaussian noise (on the [0, 1] scale).
        contrast_low: Lower end of the contrast factor.
        contrast_high: Upper end of the contrast factor.
    """

    shift: int = 2
    flip: bool = True
    erase_min: int = 4
    erase_max: int = 10
    noise_std: float = 0.1
    contrast_low: float = 0.7
    contrast_high: float = 1.3


def to_unit_float(images: torch.Tensor) -> torch.Tensor:
    """``[N, H, W]`` uint8 or ``[N, 1, H, W]`` float images → ``[N, 1, H, W]`` float in [0, 1]."""
    if images.dtype == torch.uint8:
        images = images.float() / 255.0
    return images.unsqueeze(1) if images.dim() == 3 else images


def weak_view(images: torch.Tensor, generator: torch.Generator, config: AugmentConfig | None = None) -> torch.Tensor:
    """Shifted (and possibly flipped) copies of ``images``, as ``[N, 1, H, W]`` floats in [0, 1].

    Args:
        images: ``[N, H, W]`` uint8 or ``[N, 1, H, W]`` float images.
        generator: Source of randomness, on the images' device.
        config: View parameters.
    """
    config = config or AugmentConfig()
    x = to_unit_float(images)
    n, _, height, width = x.shape
    pad = config.shift
    padded = torch.nn.functional.pad(x[:, 0], (pad, pad, pad, pad))
    device = x.device
    dy = torch.randint(0, 2 * pad + 1, (n, 1), generator=generator, device=device)
    dx = torch.randint(0, 2 * pad + 1, (n, 1), generator=generator, device=device)
    rows = dy + torch.arange(height, device=device)
    cols = torch.arange(width, device=device).expand(n, width)
    if config.flip:
        flipped = torch.rand(n, 1, generator=generator, device=device) < 0.5
        cols = torch.where(flipped, cols.flip(-1), cols)
    cols = dx + cols
    batch = torch.arange(n, device=device)[:, None, None]
    return padded[batch, rows[:, :, None], cols[:, None, :]].unsqueeze(1)


def strong_view(weak: torch.Tensor, generator: torch.Generator, config: AugmentConfig | None = None) -> torch.Tensor:
    """Contrast jitter, one erasing box and Gaussian noise on top of a weak view.

    Args:
        weak: ``[N, 1, H, W]`` float images in [0, 1] (typically :func:`weak_view`'s output).
        generator: Source of randomness, on the images' device.
        config: View parameters.
    """
    config = config or AugmentConfig()
    n, _, height, width = weak.shape
    device = weak.device
    low, high = config.contrast_low, config.contrast_high
    factor = low + (high - low) * torch.rand(n, 1, 1, 1, generator=generator, device=device)
    mean = weak.mean(dim=(1, 2, 3), keepdim=True)
    x = (weak - mean) * factor + mean
    box_h = torch.randint(config.erase_min, config.erase_max + 1, (n, 1), generator=generator, device=device)
    box_w = torch.randint(config.erase_min, config.erase_max + 1, (n, 1), generator=generator, device=device)
    top = (torch.rand(n, 1, generator=generator, device=device) * (height - box_h + 1)).long()
    left = (torch.rand(n, 1, generator=generator, device=device) * (width - box_w + 1)).long()
    ys = torch.arange(height, device=device)
    xs = torch.arange(width, device=device)
    in_rows = (ys >= top) & (ys < top + box_h)  # [N, H]
    in_cols = (xs >= left) & (xs < left + box_w)  # [N, W]
    box = (in_rows[:, :, None] & in_cols[:, None, :]).unsqueeze(1)
    x = x.masked_fill(box, 0.0)
    x = x + config.noise_std * torch.randn(x.shape, generator=generator, device=device)
    return x.clamp_(0.0, 1.0)
