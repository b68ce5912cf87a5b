"""Backbones for DWP: a compact timm ResNet for 28x28 grey images, an MLP, or any timm model by name."""

from __future__ import annotations

import functools

from torch import nn

BACKBONES = ("resnet_fmnist", "mlp")


def resnet_fmnist(
    channels: tuple[int, ...] = (16, 32, 64, 128),
    stem_width: int = 8,
    norm_groups: int = 8,
    num_classes: int = 10,
    in_chans: int = 1,
) -> nn.Module:
    """A small timm ResNet (one BasicBlock per stage) adapted to 28x28 grey images.

    timm's ResNet with its 3-conv "deep" stem (ResNet-D style; first conv stride 2, so 28x28 -> 14x14) and
    no stem max-pool, then four stages at 14, 7, 4 and 2 pixels. GroupNorm instead of BatchNorm: the
    normalisation runs digitally on a CIM chip and needs no running statistics, which also lets the K
    weight realisations of DWP run in one ``vmap``.

    Args:
        channels: Widths of the four stages.
        stem_width: Width of the stem's first two convolutions (the third outputs ``2 * stem_width``).
        norm_groups: Groups of every GroupNorm (must divide every width).
        num_classes: Output classes.
        in_chans: Input channels.
    """
    from timm.layers import GroupNorm
    from timm.models.resnet import BasicBlock, ResNet

    widths = (stem_width, 2 * stem_width, *channels)
    if len(channels) != 4 or any(width % norm_groups for width in widths):
        raise ValueError(
            f"resnet_fmnist needs 4 stage widths and widths divisible by norm_groups={norm_groups}; got "
            f"channels={tuple(channels)}, stem_width={stem_width}"
        )
    model = ResNet(
        BasicBlock,
        layers=(1, 1, 1, 1),
        channels=tuple(channels),
        num_classes=num_classes,
        in_chans=in_chans,
        stem_width=stem_width,
        stem_type="deep",
        norm_layer=functools.partial(GroupNorm, num_groups=norm_groups),
    )
    model.maxpool = nn.Identity()  # 28x28 inputs: keep the 14x14 map after the stride-2 stem
    return model


def mlp(hidden: tuple[int, ...] = (256, 128), num_classes: int = 10, in_features: int = 784) -> nn.Module:
    """The spec's MLP (784 -> 256 -> 128 -> 10 by default), flattening image inputs."""
    layers: list[nn.Module] = [nn.Flatten()]
    for width in hidden:
        layers += [nn.Linear(in_features, width), nn.ReLU()]
        in_features = width
    layers.append(nn.Linear(in_features, num_classes))
    return nn.Sequential(*layers)


def build_backbone(
    name: str,
    channels: tuple[int, ...] = (16, 32, 64, 128),
    stem_width: int = 8,
    norm_groups: int = 8,
    num_classes: int = 10,
    in_chans: int = 1,
) -> nn.Module:
    """Build a backbone by name: ``"resnet_fmnist"``, ``"mlp"`` (``channels`` are its hidden widths) or
    ``"timm:<model name>"`` (any timm architecture, randomly initialised).

    Raises:
        ValueError: On an unknown name.
    """
    if name == "resnet_fmnist":
        return resnet_fmnist(tuple(channels), stem_width, norm_groups, num_classes, in_chans)
    if name == "mlp":
        return mlp(tuple(channels), num_classes, in_features=28 * 28 * in_chans)
    if name.startswith("timm:"):
        import timm

        return timm.create_model(name[5:], pretrained=False, num_classes=num_classes, in_chans=in_chans)
    raise ValueError(f"unknown backbone {name!r}; use one of {', '.join(BACKBONES)} or 'timm:<model name>'")
