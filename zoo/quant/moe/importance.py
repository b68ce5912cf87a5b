"""GEMQ's model-wide importance statistics ``c[l, e, b]``.

For every MoE block ``l``, expert ``e`` and width ``b``: quantize only that expert (RTN, one group per row, as in
GEMQ's analysis), rerun the block on its cached calibration inputs (only the tokens routed to ``e``: the others
cannot change), restore the weights, and measure

* ``weighted[l, e, b] = sum(g_l**2 * (y_l - y_l^(e,b))**2)``, the gradient-weighted output error, where ``g_l``
  is the gradient of the LM loss with respect to the block output ``y_l`` (equal to the decoder layer's output
  gradient, since the block output is added to the residual stream). A second-order (Fisher) estimate of the
  loss increase, comparable *across* layers: this is what the global ILP minimises.
* ``local[l, e, b] = sum((y_l - y_l^(e,b))**2)``, the plain output error of the block, comparable only within a
  layer (what per-layer allocation in the style of MC-MoE/PMQ uses).
* ``frequency[l, e]``: fraction of tokens routed to the expert (for the frequency heuristic).

With ``reference=`` (GEMQ's progressive step) the inputs and gradients come from ``model`` (e.g. the quantized
model, so they reflect its error propagation and router shift) while the errors are measured on the reference
model's float experts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from zoo.quant.moe.api import Calibration, calibration_batches, forward_batch
from zoo.quant.moe.layout import Detector, MoELayer, find_moe_layers
from zoo.quant.moe.quantizers import fake_quantize

LossFn = Callable[[nn.Module, torch.Tensor], torch.Tensor]


def causal_lm_loss(model: nn.Module, batch: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of a causal LM on token ids ``[B, T]`` (HF output or raw logits)."""
    output = forward_batch(model, batch)
    logits = output.logits if hasattr(output, "logits") else output
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(), batch[:, 1:].reshape(-1))


def _first(output):
    return output[0] if isinstance(output, tuple | list) else output


@dataclass
class ExpertImportance:
    """Importance statistics of every (block, expert, width).

    Args:
        layer_names: MoE block names, in order (axis 0).
        bits: The widths (axis 2).
        weighted: ``[L, E, B]`` gradient-weighted output errors (GEMQ's ``c``).
        local: ``[L, E, B]`` unweighted output errors.
        frequency: ``[L, E]`` fraction of calibration tokens routed to each expert.
        tokens: Calibration tokens used.
    """

    layer_names: list[str]
    bits: tuple[int, ...]
    weighted: torch.Tensor
    local: torch.Tensor
    frequency: torch.Tensor
    tokens: int


def block_io_and_gradients(
    model: nn.Module,
    layers: list[MoELayer],
    calibration: Calibration,
    loss_fn: LossFn = causal_lm_loss,
    batch_size: int = 16,
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Inputs ``X_l`` and loss gradients ``g_l`` of every MoE block's output, over the calibration set.

    Returns:
        ``(inputs, gradients)``: per block, tensors of shape ``[N, T, hidden]`` (batches concatenated); the
        gradients are those of the mean loss over the whole calibration set (equal-length sequences).
    """
    inputs: list[list[torch.Tensor]] = [[] for _ in layers]
    outputs: list[torch.Tensor | None] = [None] * len(layers)
    gradients: list[list[torch.Tensor]] = [[] for _ in layers]

    def make_hook(index: int):
        def hook(_module, args, output):
            inputs[index].append(args[0].detach())
            hidden = _first(output)
            if not hidden.requires_grad:  # e.g. frozen model: still give the output a gradient
                hidden = hidden + torch.zeros((), device=hidden.device, requires_grad=True)
            outputs[index] = hidden
            return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

        return hook

    handles = [layer.block.register_forward_hook(make_hook(i)) for i, layer in enumerate(layers)]
    training = model.training
    model.eval()
    try:
        for batch in calibration_batches(calibration, batch_size):
            with torch.enable_grad():
                loss = loss_fn(model, batch)
                grads = torch.autograd.grad(loss, outputs, allow_unused=True)
            for i, grad in enumerate(grads):
                gradients[i].append(torch.zeros_like(outputs[i]) if grad is None else grad.detach())
    finally:
        for handle in handles:
            handle.remove()
        model.train(training)
    # Each batch's loss is a mean over its own tokens; rescale so g is the gradient of the mean over all batches
    # (c does not then depend on the batch size).
    sizes = [g.shape[0] for g in gradients[0]]
    total = sum(sizes)
    gradients = [[g * (n / total) for g, n in zip(per_layer, sizes, strict=True)] for per_layer in gradients]
    return [torch.cat(x) for x in inputs], [torch.cat(g) for g in gradients]


@torch.no_grad()
def expert_output_errors(
    layer: MoELayer, inputs: torch.Tensor, gradients: torch.Tensor, bits: tuple[int, ...], group_size: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(weighted [E, B], local [E, B])`` errors of quantizing one expert of ``layer`` at a time.

    Quantizing expert ``e`` changes the block output only on the tokens routed to ``e`` (the router input is
    unchanged), so the block is rerun on those tokens alone: exact, and about ``E / top_k`` times cheaper than
    rerunning it on every token. The block is assumed token-wise (true of MoE feed-forward blocks).
    """
    adapter = layer.experts
    hidden = inputs.shape[-1]
    x = inputs.reshape(-1, hidden)
    weight2 = gradients.reshape(-1, hidden).float().pow(2)
    chosen = layer.route(x)
    weighted = torch.zeros(adapter.num_experts, len(bits))
    local = torch.zeros(adapter.num_experts, len(bits))
    for expert in range(adapter.num_experts):
        routed = (chosen == expert).any(-1)
        if not routed.any():
            continue
        x_e = x[routed].unsqueeze(0)
        reference = _first(layer.block(x_e)).float().reshape(-1, hidden)
        original = {name: adapter.weight(name, expert).clone() for name in adapter.names}
        try:
            for k, b in enumerate(bits):
                for name, weight in original.items():
                    adapter.set_weight(name, expert, fake_quantize(weight, b, group_size))
                diff2 = (reference - _first(layer.block(x_e)).float().reshape(-1, hidden)).pow(2)
                weighted[expert, k] = (weight2[routed] * diff2).sum()
                local[expert, k] = diff2.sum()
        finally:
            for name, weight in original.items():
                adapter.set_weight(name, expert, weight)
    return weighted, local


def expert_importance(
    model: nn.Module,
    calibration: Calibration,
    bits: tuple[int, ...] = (1, 2, 3),
    *,
    reference: nn.Module | None = None,
    group_size: int | None = None,
    loss_fn: LossFn = causal_lm_loss,
    detectors: list[Detector] | None = None,
    batch_size: int = 16,
) -> ExpertImportance:
    """Compute ``c[l, e, b]`` (and the per-layer and frequency statistics) for every routed expert.

    Args:
        model: The model whose block inputs and output gradients are used.
        calibration: Token ids ``[N, T]`` or batches.
        bits: Candidate widths.
        reference: Model with float experts (same architecture) whose blocks are rerun; default ``model``.
        group_size: RTN group size of the probe quantization (``None``: one group per row, as in GEMQ).
        loss_fn: ``(model, batch) -> scalar loss``.
        detectors: Extra MoE-layout detectors.
        batch_size: Split size for a tensor calibration set.
    """
    layers = find_moe_layers(model, detectors)
    probe_layers = find_moe_layers(reference, detectors) if reference is not None else layers
    if len(probe_layers) != len(layers):
        raise ValueError("reference has a different number of MoE blocks than model")
    inputs, gradients = block_io_and_gradients(model, layers, calibration, loss_fn, batch_size)
    weighted, local, frequency = [], [], []
    for layer, probe, x, g in zip(layers, probe_layers, inputs, gradients, strict=True):
        w, u = expert_output_errors(probe, x, g, tuple(bits), group_size)
        weighted.append(w)
        local.append(u)
        with torch.no_grad():
            chosen = layer.route(x)
        counts = torch.bincount(chosen.reshape(-1), minlength=layer.num_experts).float()
        frequency.append(counts / chosen.shape[0])
    return ExpertImportance(
        layer_names=[layer.name for layer in layers],
        bits=tuple(bits),
        weighted=torch.stack(weighted),
        local=torch.stack(local),
        frequency=torch.stack(frequency),
        tokens=int(inputs[0].shape[0] * inputs[0].shape[1]) if inputs[0].dim() == 3 else int(inputs[0].shape[0]),
    )
