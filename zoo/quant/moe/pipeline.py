"""GEMQ end to end on any MoE model: importance -> allocation -> GPTQ -> router fine-tuning, and the progressive loop.

GEMQ (Global Expert-level Mixed-precision Quantization, arXiv 2605.23078) in four calls::

    importance = expert_importance(model, calib, bits=(1, 2, 3))             # c[l, e, b]
    widths = allocate(importance, budget=2.5, solver="ilp", c2c3=True)       # global ILP
    quantize_(model, MoEQuantConfig(method="gptq", allocation=as_config_allocation(names, widths)), calib)
    finetune_routers(model, calib, lr=1e-4, epochs=1)

:func:`gemq_quantize` runs them in order; :func:`progressive_gemq` re-estimates the importance on the quantized
model before each lower budget.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field, replace

import numpy as np
from torch import nn

from zoo.quant.moe.allocation import (
    as_config_allocation,
    c2c3_floors,
    frequency_allocation,
    global_ilp,
    greedy_allocation,
    per_layer_ilp,
    uniform_allocation,
)
from zoo.quant.moe.api import Calibration, quantize_
from zoo.quant.moe.config import MoEQuantConfig
from zoo.quant.moe.importance import ExpertImportance, expert_importance
from zoo.quant.moe.layout import find_moe_layers
from zoo.quant.moe.modules import FP_BITS
from zoo.quant.moe.routing import finetune_routers

SOLVERS = ("ilp", "layer", "uniform", "frequency", "greedy")


@dataclass
class GEMQConfig:
    """Settings of the GEMQ pipeline (defaults: the paper's).

    Args:
        budget: Average bits per routed expert.
        bits: Candidate widths.
        solver: ``"ilp"`` (GEMQ, global), ``"layer"`` (per-layer, unweighted errors), ``"uniform"``,
            ``"frequency"`` (routing frequency heuristic) or ``"greedy"`` (solver-free global).
        c2c3: At least one expert at the highest and one at the second-highest width per layer (not for uniform).
        method: Quantizer of the final weights, ``"gptq"`` or ``"rtn"``.
        group_size: Group size of the final quantization.
        damp: GPTQ dampening.
        block_size: GPTQ block size.
        probe_group_size: RTN group size of the importance probes (``None``: per row, as in GEMQ).
        router_finetune: Fine-tune the routers after quantization.
        router_lr: AdamW learning rate of router fine-tuning.
        router_epochs: Epochs over the calibration set.
        router_batch_size: Sequences per router fine-tuning step.
        shared_expert_bits: Width of shared experts (16 = full precision, as in the paper).
        linear_bits: Width of attention / dense layers (16 keeps them; the paper uses 4).
        fixed: Experts whose width is imposed, as ``"layer,expert" -> bits``.
    """

    budget: float = 2.5
    bits: tuple[int, ...] = (1, 2, 3)
    solver: str = "ilp"
    c2c3: bool = True
    method: str = "gptq"
    group_size: int | None = 128
    damp: float = 0.01
    block_size: int = 128
    probe_group_size: int | None = None
    router_finetune: bool = True
    router_lr: float = 1e-4
    router_epochs: int = 1
    router_batch_size: int = 8
    shared_expert_bits: int = FP_BITS
    linear_bits: int = FP_BITS
    fixed: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {self.solver!r}")
        self.bits = tuple(int(b) for b in self.bits)


def allocate(
    importance: ExpertImportance,
    budget: float,
    solver: str = "ilp",
    c2c3: bool = True,
    fixed: dict[str, int] | None = None,
) -> np.ndarray:
    """Widths ``[L, E]`` for a budget, by the chosen solver (see :class:`GEMQConfig`)."""
    bits = importance.bits
    floors = c2c3_floors(bits) if c2c3 else None
    n_layers, n_experts = importance.frequency.shape
    if solver == "ilp":
        pinned = {tuple(int(i) for i in key.split(",")): w for key, w in (fixed or {}).items()}
        return global_ilp(importance.weighted.numpy(), bits, budget, floors, fixed=pinned)
    if solver == "greedy":
        return greedy_allocation(importance.weighted.numpy(), bits, budget, floors)
    if solver == "layer":
        return per_layer_ilp(importance.local.numpy(), bits, budget, floors)
    if solver == "frequency":
        return frequency_allocation(importance.frequency.numpy(), bits, budget, floors)
    if solver == "uniform":
        return uniform_allocation(n_layers, n_experts, bits, budget)
    raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")


def quant_config(layer_names: list[str], widths: np.ndarray, config: GEMQConfig) -> MoEQuantConfig:
    """The :class:`MoEQuantConfig` that applies an allocation with the pipeline's quantizer settings."""
    return MoEQuantConfig(
        method=config.method,
        group_size=config.group_size,
        allocation=as_config_allocation(layer_names, widths),
        shared_expert_bits=config.shared_expert_bits,
        linear_bits=config.linear_bits,
        damp=config.damp,
        block_size=config.block_size,
    )


def gemq_quantize(
    model: nn.Module,
    calibration: Calibration,
    config: GEMQConfig | None = None,
    importance: ExpertImportance | None = None,
    seed: int = 0,
) -> dict:
    """Run the GEMQ pipeline on a float model, in place.

    Args:
        model: Float MoE model.
        calibration: Token ids ``[N, T]`` (or batches) for importance, GPTQ and router fine-tuning.
        config: Pipeline settings.
        importance: Precomputed statistics (e.g. shared by several budgets); computed if None and needed.
        seed: Seed of the router fine-tuning shuffle.

    Returns:
        A report: ``quant_config`` (dict, for config.json), ``widths`` ``[L][E]``, ``timings`` and the
        router fine-tuning ``losses``.
    """
    config = config or GEMQConfig()
    timings: dict[str, float] = {}
    names = [layer.name for layer in find_moe_layers(model)]
    if importance is None and config.solver != "uniform":
        start = time.perf_counter()
        importance = expert_importance(model, calibration, config.bits, group_size=config.probe_group_size)
        timings["importance_s"] = time.perf_counter() - start
    if importance is None:  # uniform needs only the shape
        widths = uniform_allocation(len(names), find_moe_layers(model)[0].num_experts, config.bits, config.budget)
    else:
        start = time.perf_counter()
        widths = allocate(importance, config.budget, config.solver, config.c2c3, config.fixed)
        timings["allocate_s"] = time.perf_counter() - start
    qconfig = quant_config(names, widths, config)
    start = time.perf_counter()
    quantize_(model, qconfig, calibration)
    timings["quantize_s"] = time.perf_counter() - start
    losses: list[float] = []
    if config.router_finetune:
        start = time.perf_counter()
        losses = finetune_routers(
            model,
            calibration,
            lr=config.router_lr,
            epochs=config.router_epochs,
            batch_size=config.router_batch_size,
            seed=seed,
        )
        timings["router_finetune_s"] = time.perf_counter() - start
    return {"quant_config": qconfig.to_dict(), "widths": widths.tolist(), "timings": timings, "losses": losses}


def copy_routers(source: nn.Module, target: nn.Module) -> None:
    """Copy every router's weights from ``source`` into ``target`` (same architecture)."""
    for a, b in zip(find_moe_layers(source), find_moe_layers(target), strict=True):
        b.router.load_state_dict(a.router.state_dict())


def progressive_gemq(
    model: nn.Module,
    calibration: Calibration,
    budgets: list[float],
    config: GEMQConfig | None = None,
    importance: ExpertImportance | None = None,
    seed: int = 0,
) -> list[tuple[nn.Module, dict]]:
    """GEMQ's progressive framework: quantize at ``budgets[0]``, then for each lower budget re-estimate
    ``c[l, e, b]`` on the current quantized model (its inputs, gradients and fine-tuned routers; errors measured
    against the float experts) and re-quantize the float model with the new allocation.

    Args:
        model: Float model (left unchanged).
        calibration: Calibration token ids.
        budgets: Decreasing budgets, e.g. ``[2.5, 2.0, 1.5]``.
        config: Pipeline settings (its ``budget`` is ignored).
        importance: Statistics of the float model for the first budget (computed if None).
        seed: Seed of router fine-tuning.

    Returns:
        ``(quantized model, report)`` per budget.
    """
    config = replace(config or GEMQConfig(), solver="ilp")
    if importance is None:
        importance = expert_importance(model, calibration, config.bits, group_size=config.probe_group_size)
    results = []
    for step, budget in enumerate(budgets):
        quantized = copy.deepcopy(model)
        report = gemq_quantize(quantized, calibration, replace(config, budget=budget), importance, seed=seed)
        report["step"] = step
        results.append((quantized, report))
        if step + 1 < len(budgets):
            reference = copy.deepcopy(model)
            copy_routers(quantized, reference)
            importance = expert_importance(
                quantized, calibration, config.bits, reference=reference, group_size=config.probe_group_size
            )
    return results
