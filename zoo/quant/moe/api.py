"""``quantize_(model, config)``: in-place, expert-level mixed-precision weight quantization (torchao's shape).

The model keeps its own forward: fused expert tensors become :class:`~zoo.quant.moe.modules.PackedExperts`,
``nn.Linear`` layers become :class:`~zoo.quant.moe.modules.PackedLinear`, both dequantizing on the fly. GPTQ is
sequential: each block is calibrated on the inputs it receives from the already-quantized blocks before it, and
within an expert the second matrix sees the output of the quantized first one. An expert that receives no
calibration token falls back to RTN.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch import nn

from zoo.quant.moe.config import MoEQuantConfig
from zoo.quant.moe.layout import Detector, MoELayer, find_moe_layers
from zoo.quant.moe.modules import FP_BITS, PackedLinear, PackedMatrix
from zoo.quant.moe.quantizers import (
    QuantizedMatrix,
    gptq_quantize,
    gptq_quantize_batched,
    input_hessian,
    rtn_quantize,
)

Calibration = torch.Tensor | Iterable[Any]


class _StopForward(Exception):
    """Raised by a capture hook once it has what it needs, to skip the rest of the forward."""


def calibration_batches(calibration: Calibration, batch_size: int = 16) -> Iterator[Any]:
    """Batches of a calibration set: a ``[N, T]`` tensor of token ids is split along N; anything else is iterated."""
    if isinstance(calibration, torch.Tensor):
        yield from calibration.split(batch_size)
    else:
        yield from calibration


def forward_batch(model: nn.Module, batch: Any) -> Any:
    """``model(**batch)`` for a dict batch, ``model(batch)`` otherwise."""
    return model(**batch) if isinstance(batch, dict) else model(batch)


def capture_inputs(
    model: nn.Module, module: nn.Module, calibration: Calibration, batch_size: int = 16
) -> list[torch.Tensor]:
    """The first positional input ``module`` receives for each calibration batch (the rest of each forward is skipped).

    Args:
        model: The model to run.
        module: A submodule of ``model``.
        calibration: Calibration batches (see :func:`calibration_batches`).
        batch_size: Split size for a tensor calibration set.
    """
    captured: list[torch.Tensor] = []

    def hook(_module, args, kwargs):
        value = args[0] if args else next(iter(kwargs.values()))
        captured.append(value.detach())
        raise _StopForward

    handle = module.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        with torch.no_grad():
            for batch in calibration_batches(calibration, batch_size):
                with contextlib.suppress(_StopForward):
                    forward_batch(model, batch)
    finally:
        handle.remove()
    return captured


def _tokens(inputs: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([x.reshape(-1, x.shape[-1]) for x in inputs])


def _quantize_matrix(
    weight: torch.Tensor, bits: int, config: MoEQuantConfig, inputs: torch.Tensor | None
) -> QuantizedMatrix:
    if config.method == "gptq" and inputs is not None and inputs.shape[0] > 0:
        return gptq_quantize(weight, input_hessian(inputs), bits, config.group_size, config.block_size, config.damp)
    return rtn_quantize(weight, bits, config.group_size)


def quantize_experts(
    model: nn.Module,
    layer: MoELayer,
    widths: list[int],
    config: MoEQuantConfig,
    calibration: Calibration | None = None,
    batch_size: int = 16,
) -> None:
    """Quantize and pack the routed experts of one block in place, expert ``e`` at ``widths[e]`` bits."""
    adapter = layer.experts
    if any(adapter.packed(name) is not None for name in adapter.names):
        raise ValueError(f"{layer.name} is already quantized; quantize a float copy of the model instead")
    tokens = chosen = None
    if config.method == "gptq" and any(bits != FP_BITS for bits in widths):
        tokens = _tokens(capture_inputs(model, layer.block, calibration, batch_size))
        chosen = layer.route(tokens)
    routed = [tokens[(chosen == e).any(-1)] if tokens is not None else None for e in range(len(widths))]
    for name in adapter.names:  # matrix by matrix, so a later matrix is calibrated on the quantized earlier ones
        slices: list[PackedMatrix | None] = [None] * len(widths)
        quantized: dict[int, QuantizedMatrix] = {}
        hessians: dict[int, torch.Tensor] = {}  # experts that GPTQ quantizes (those that saw calibration tokens)
        for expert, bits in enumerate(widths):
            weight = adapter.weight(name, expert)
            if bits == FP_BITS:
                slices[expert] = PackedMatrix.from_float(weight)
            elif routed[expert] is not None and len(routed[expert]):
                hessians[expert] = input_hessian(adapter.matrix_inputs(expert, routed[expert])[name])
            else:
                quantized[expert] = rtn_quantize(weight, bits, config.group_size)
        for experts in _same_shape_groups(adapter, name, list(hessians)):
            batch = gptq_quantize_batched(
                torch.stack([adapter.weight(name, e).detach() for e in experts]),
                torch.stack([hessians[e] for e in experts]),
                [widths[e] for e in experts],
                config.group_size, config.block_size, config.damp,
            )  # fmt: skip
            quantized.update(zip(experts, batch, strict=True))
        for expert, matrix in quantized.items():
            slices[expert] = PackedMatrix.from_quantized(matrix)
            if tokens is not None:  # GPTQ calibrates the next matrix of this expert on these quantized weights
                weight = adapter.weight(name, expert)
                adapter.set_weight(name, expert, matrix.dequantize().to(weight.dtype))
        adapter.pack(name, slices)


def _same_shape_groups(adapter, name: str, experts: list[int]) -> list[list[int]]:
    """Experts grouped by the shape of matrix ``name`` (fused experts: one group; per-expert Linear may differ)."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for expert in experts:
        groups.setdefault(tuple(adapter.weight(name, expert).shape), []).append(expert)
    return list(groups.values())


def _check_allocation_names(config: MoEQuantConfig, layers: list[MoELayer]) -> None:
    unknown = sorted(set(config.allocation) - {layer.name for layer in layers})
    if unknown:
        raise ValueError(
            f"allocation names {unknown}, which are not MoE blocks of the model: {[l.name for l in layers]}"
        )


def _linear_targets(
    model: nn.Module, layers: list[MoELayer], config: MoEQuantConfig
) -> list[tuple[str, nn.Linear, int]]:
    """Non-expert Linear layers to quantize, with their widths (routers and gates inside MoE blocks excluded)."""
    shared = {name for layer in layers for name in layer.shared}
    inside_blocks = {id(m) for layer in layers for m in layer.block.modules()}
    targets = []
    for fqn, module in model.named_modules():
        if not isinstance(module, nn.Linear) or (id(module) in inside_blocks and fqn not in shared):
            continue
        bits = config.override(fqn)
        if bits is None:
            if config.skipped(fqn):
                continue
            bits = config.shared_expert_bits if fqn in shared else config.linear_bits
        if bits != FP_BITS:
            targets.append((fqn, module, bits))
    return targets


def quantize_(
    model: nn.Module,
    config: MoEQuantConfig | None = None,
    calibration: Calibration | None = None,
    *,
    detectors: list[Detector] | None = None,
    batch_size: int = 16,
) -> nn.Module:
    """Quantize a mixture-of-experts model in place.

    Args:
        model: A model with MoE blocks (transformers Mixtral / Qwen2-MoE, or any layout a detector describes).
        config: What to quantize and how; default: every routed expert at 4-bit RTN.
        calibration: Inputs for GPTQ: token ids ``[N, T]`` or an iterable of batches (dicts are passed as kwargs).
        detectors: Extra MoE-layout detectors (see :func:`~zoo.quant.moe.layout.find_moe_layers`).
        batch_size: Batch size for a tensor calibration set.

    Returns:
        The same model, with packed experts (and Linear layers, if the config asks).

    Raises:
        ValueError: GPTQ without calibration data, an allocation that does not fit, an already-quantized block.
    """
    config = config or MoEQuantConfig()
    if config.method == "gptq" and calibration is None:
        raise ValueError(
            "method='gptq' needs calibration= (token ids [N, T] or batches); use method='rtn' without data"
        )
    layers = find_moe_layers(model, detectors)
    _check_allocation_names(config, layers)
    training = model.training
    model.eval()
    try:
        for layer in layers:
            widths = config.expert_widths(layer.name, layer.experts_name, layer.num_experts)
            quantize_experts(model, layer, widths, config, calibration, batch_size)
        for fqn, module, bits in _linear_targets(model, layers, config):
            inputs = None
            if config.method == "gptq":
                inputs = _tokens(capture_inputs(model, module, calibration, batch_size))
            quantized = _quantize_matrix(module.weight, bits, config, inputs)
            parent_name, _, child = fqn.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            setattr(parent, child, PackedLinear(PackedMatrix.from_quantized(quantized), module.bias))
    finally:
        model.train(training)
    return model


def convert_for_loading(
    model: nn.Module, config: MoEQuantConfig, *, detectors: list[Detector] | None = None
) -> nn.Module:
    """Give a float model the packed structure ``config`` describes, so a saved quantized state dict loads into it.

    Nothing is quantized: the packed buffers are allocated empty (zeros) and are meant to be overwritten by
    ``load_state_dict``; experts and layers kept at 16 bits keep their current weights.
    """
    layers = find_moe_layers(model, detectors)
    _check_allocation_names(config, layers)
    for layer in layers:
        adapter = layer.experts
        widths = config.expert_widths(layer.name, layer.experts_name, layer.num_experts)
        for name in adapter.names:
            slices = []
            for expert, bits in enumerate(widths):
                weight = adapter.weight(name, expert)
                if bits == FP_BITS:
                    slices.append(PackedMatrix.from_float(weight))
                else:
                    slices.append(PackedMatrix(*weight.shape, bits, config.group_size).to(weight.device))
            adapter.pack(name, slices)
    for fqn, module, bits in _linear_targets(model, layers, config):
        packed = PackedMatrix(*module.weight.shape, bits, config.group_size).to(module.weight.device)
        parent_name, _, child = fqn.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, PackedLinear(packed, module.bias))
    return model


def expert_nbytes(model: nn.Module, *, detectors: list[Detector] | None = None) -> int:
    """Measured bytes of the routed experts: packed buffers where quantized, 2 bytes per weight (fp16) otherwise."""
    total = 0
    for layer in find_moe_layers(model, detectors):
        adapter = layer.experts
        for name in adapter.names:
            packed = adapter.packed(name)
            if packed is not None:
                total += sum(p.nbytes() for p in packed)
            else:
                total += 2 * adapter.weight(name, 0).numel() * adapter.num_experts
    return total


def expert_fp16_nbytes(model: nn.Module, *, detectors: list[Detector] | None = None) -> int:
    """Bytes of the routed experts stored in fp16."""
    return sum(2 * layer.experts.float_numel() for layer in find_moe_layers(model, detectors))


def expert_widths(model: nn.Module, *, detectors: list[Detector] | None = None) -> dict[str, list[int]]:
    """Bit-width of each routed expert per block, read from the packed storage (16 where not quantized)."""
    widths = {}
    for layer in find_moe_layers(model, detectors):
        adapter = layer.experts
        packed = adapter.packed(adapter.names[0])
        widths[layer.name] = [p.bits for p in packed] if packed is not None else [FP_BITS] * adapter.num_experts
    return widths
