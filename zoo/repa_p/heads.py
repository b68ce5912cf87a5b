"""REPA-P's projection heads and the forward hooks that feed them (backbone-agnostic).

A :class:`FeatureTaps` object registers forward hooks on modules of any backbone, chosen by module name
(``"mid"``, ``"ups.2.blocks.1"``, or a transformer block such as ``"blocks.6"`` for a DiT), and keeps
their latest outputs. A :class:`ProjectionHead` decodes one such activation into a physical field at
the output resolution, so a PDE residual can be applied to it. The backbone's code is never touched,
and removing the hooks and heads leaves the backbone exactly as it was: zero inference overhead.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["FeatureTaps", "ProjectionHead"]


class ProjectionHead(nn.Module):
    """Decode a feature map into a field: resize to the output grid, then a 1x1 MLP.

    ``hidden > 0``: 1x1 conv ``C -> hidden``, GroupNorm(8), SiLU, 1x1 conv ``hidden -> out``;
    ``hidden == 0``: a single 1x1 conv (the paper's lightest head).

    Args:
        in_channels: Channels of the tapped activation.
        out_channels: Channels of the physical field.
        size: Side of the output grid.
        hidden: Hidden width (the paper uses 128).
        groups: GroupNorm groups.
    """

    def __init__(self, in_channels: int, out_channels: int, size: int, hidden: int = 128, groups: int = 8) -> None:
        super().__init__()
        self.size = size
        if hidden > 0:
            self.net = nn.Sequential(
                nn.Conv2d(in_channels, hidden, 1),
                nn.GroupNorm(min(groups, hidden), hidden),
                nn.SiLU(),
                nn.Conv2d(hidden, out_channels, 1),
            )
        else:
            self.net = nn.Conv2d(in_channels, out_channels, 1)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if features.ndim == 3:  # token sequence (B, N, C) of a square grid, e.g. from a DiT block
            b, n, c = features.shape
            side = int(round(n**0.5))
            if side * side != n:
                raise ValueError(f"cannot view {n} tokens as a square grid; tap a spatial layer instead")
            features = features.transpose(1, 2).reshape(b, c, side, side)
        if features.shape[-1] != self.size or features.shape[-2] != self.size:
            features = F.interpolate(features, size=(self.size, self.size), mode="bilinear", align_corners=False)
        return self.net(features)


class FeatureTaps:
    """Forward hooks that record the outputs of named submodules.

    Args:
        model: The backbone.
        names: Module names as in ``model.named_modules()``.

    Example:
        >>> taps = FeatureTaps(unet, ["mid"])
        >>> _ = unet(x, t)
        >>> taps.features["mid"].shape
    """

    def __init__(self, model: nn.Module, names: Iterable[str]) -> None:
        modules = dict(model.named_modules())
        self.names = tuple(names)
        unknown = [n for n in self.names if n not in modules]
        if unknown:
            raise ValueError(
                f"tap points {unknown} are not modules of {type(model).__name__}; use names from named_modules(), "
                f"e.g. {[n for n in modules if n][:6]}"
            )
        self.features: dict[str, torch.Tensor] = {}
        self._handles = [modules[n].register_forward_hook(self._recorder(n)) for n in self.names]

    def _recorder(self, name: str):
        def hook(module: nn.Module, args, output) -> None:
            self.features[name] = output[0] if isinstance(output, tuple) else output

        return hook

    def clear(self) -> None:
        """Forget the recorded activations (they hold the autograd graph)."""
        self.features = {}

    def remove(self) -> None:
        """Detach every hook from the backbone."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self.clear()

    @property
    def active(self) -> bool:
        return bool(self._handles)
