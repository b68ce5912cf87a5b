"""Model-level entry points: convert any torch model to CIM layers and back, program it, let it drift."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
from torch import nn

from zoo.quant.cim.config import CIMConfig, FqnToCIMConfig
from zoo.quant.cim.layers import CIM_LAYER_TYPES, CIMLayer

FilterFn = Callable[[nn.Module, str], bool]


def _convertible(module: nn.Module, parent: nn.Module | None) -> type[CIMLayer] | None:
    if isinstance(parent, nn.MultiheadAttention):  # its out_proj is read as a tensor, never called
        return None
    for float_type, cim_type in CIM_LAYER_TYPES.items():
        # Subclasses that override forward compute something else than the float op: leave them digital.
        if isinstance(module, float_type) and type(module).forward is float_type.forward:
            return cim_type
    return None


def convert_to_cim(
    model: nn.Module, config: CIMConfig | FqnToCIMConfig, filter_fn: FilterFn | None = None
) -> nn.Module:
    """Swap the model's ``nn.Linear`` and ``nn.Conv2d`` for CIM layers, in place.

    The CIM layers share the float layers' Parameters: the state_dict keys and values do not change, and
    :func:`convert_from_cim` restores the exact float modules.

    Args:
        model: Any torch model.
        config: One config for every layer, or per-module configs by name/regex (:class:`FqnToCIMConfig`).
        filter_fn: ``filter_fn(module, fqn) -> bool``; only modules for which it is True are converted
            (torchao's convention). Default: every Linear and Conv2d.

    Returns:
        ``model`` itself (converted in place); a bare Linear/Conv2d is returned as its CIM layer.

    Raises:
        TypeError: If ``config`` is not a CIMConfig or FqnToCIMConfig.
    """
    if not isinstance(config, CIMConfig | FqnToCIMConfig):
        raise TypeError(f"config must be a CIMConfig or FqnToCIMConfig, not {type(config).__name__}")

    def config_for(fqn: str) -> CIMConfig | None:
        return config.config_for(fqn) if isinstance(config, FqnToCIMConfig) else config

    cim_type = _convertible(model, None)
    if cim_type is not None:  # a bare layer: nothing holds it, so return the replacement
        layer_config = config_for("")
        if layer_config is None or (filter_fn is not None and not filter_fn(model, "")):
            return model
        return cim_type(model, layer_config)

    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            fqn = f"{parent_name}.{child_name}" if parent_name else child_name
            cim_type = _convertible(child, parent)
            if cim_type is None or (filter_fn is not None and not filter_fn(child, fqn)):
                continue
            layer_config = config_for(fqn)
            if layer_config is not None:
                setattr(parent, child_name, cim_type(child, layer_config))
    return model


def convert_from_cim(model: nn.Module) -> nn.Module:
    """Put the original float modules back in place of every CIM layer (exact weights, same Parameters).

    Args:
        model: A model converted by :func:`convert_to_cim`.

    Returns:
        ``model`` (a bare CIM layer is returned as its float module).
    """
    if isinstance(model, CIMLayer):
        return model.to_float()
    for _, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, CIMLayer):
                setattr(parent, child_name, child.to_float())
    return model


def cim_layers(model: nn.Module) -> Iterator[tuple[str, CIMLayer]]:
    """``(fqn, layer)`` of every CIM layer of the model, in module order."""
    for name, module in model.named_modules():
        if isinstance(module, CIMLayer):
            yield name, module


def _generator(seed: int | None, device: torch.device) -> torch.Generator | None:
    if seed is None:
        return None
    return torch.Generator(device=device).manual_seed(int(seed))


def _require_layers(model: nn.Module) -> list[tuple[str, CIMLayer]]:
    layers = list(cim_layers(model))
    if not layers:
        raise ValueError("the model has no CIM layers; call zoo.quant.cim.convert_to_cim(model, CIMConfig()) first")
    return layers


@torch.no_grad()
def program(model: nn.Module, seed: int | None = None) -> nn.Module:
    """Program every CIM layer of the model (programming noise, drift exponents) and switch it to eval mode.

    Args:
        model: A converted model.
        seed: Seed of the programming draws (None: the global generator). The same seed programs the same chip.

    Returns:
        ``model``, in eval mode.
    """
    layers = _require_layers(model)
    generator = _generator(seed, layers[0][1].weight.device)
    for _, layer in layers:
        layer.program(generator)
    return model.eval()


@torch.no_grad()
def drift(model: nn.Module, t_seconds: float, seed: int | None = None) -> nn.Module:
    """Simulate the programmed chip ``t_seconds`` after programming (drift, read noise, compensation).

    Args:
        model: A programmed model.
        t_seconds: Seconds since programming; 0 leaves the programmed weights.
        seed: Seed of the read noise (None: the global generator).

    Returns:
        ``model``, in eval mode.
    """
    if t_seconds < 0:
        raise ValueError(f"t_seconds must be >= 0 (time since programming), not {t_seconds!r}")
    layers = _require_layers(model)
    generator = _generator(seed, layers[0][1].weight.device)
    for _, layer in layers:
        layer.drift(float(t_seconds), generator)
    return model.eval()


def reset_programming(model: nn.Module) -> nn.Module:
    """Forget the simulated devices of every CIM layer: the model computes digitally again."""
    for _, layer in cim_layers(model):
        layer.reset_programming()
    return model
