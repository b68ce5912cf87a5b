"""Weight clipping of CIM layers (aihwkit's ``WeightClipParameter``), as a plain function."""

from __future__ import annotations

import torch
from torch import nn

from zoo.quant.cim.config import WeightClip
from zoo.quant.cim.layers import CIMLayer


@torch.no_grad()
def clip_weights_(model: nn.Module, clip: WeightClip | None = None) -> int:
    """Clip the weights of every CIM layer in place.

    Args:
        model: A converted model.
        clip: Clipping for every layer; None uses each layer's ``config.clip``.

    Returns:
        The number of layers clipped.
    """
    clipped = 0
    for module in model.modules():
        if not isinstance(module, CIMLayer):
            continue
        rule = clip or module.cim_config.clip
        if rule.type == "none":
            continue
        bound = rule.value if rule.type == "fixed" else rule.value * module.weight.std()
        module.weight.clamp_(-bound, bound)
        clipped += 1
    return clipped
