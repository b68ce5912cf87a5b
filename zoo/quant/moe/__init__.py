"""Mixture-of-experts mixed-precision quantization: expert-level bit allocation, GEMQ and its baselines.

Works on transformers MoE models (Mixtral, Qwen2-MoE, ... with fused 3-D expert tensors or per-expert Linear
layers) and on any model whose experts a small :class:`ExpertsAdapter` describes. torchao-style API::

    from zoo.quant.moe import MoEQuantConfig, quantize_
    quantize_(model, MoEQuantConfig(expert_bits=3, method="gptq"), calibration=token_ids)

GEMQ (arXiv 2605.23078) end to end::

    from zoo.quant.moe import GEMQConfig, gemq_quantize
    report = gemq_quantize(model, token_ids, GEMQConfig(budget=2.5))   # c[l,e,b] -> global ILP -> GPTQ -> routers

Modules: :mod:`.quantizers` (RTN, 1-bit, GPTQ), :mod:`.packing` / :mod:`.modules` (packed storage, dequantize on the
fly), :mod:`.layout` (finding experts), :mod:`.api` (``quantize_``), :mod:`.importance` (``c[l, e, b]``),
:mod:`.allocation` (ILP, per-layer, uniform, frequency, greedy), :mod:`.routing` (router fine-tuning, mismatch),
:mod:`.pipeline` (GEMQ and its progressive loop).
"""

from zoo.quant.moe.allocation import (
    InfeasibleBudgetError,
    c2c3_floors,
    frequency_allocation,
    global_ilp,
    greedy_allocation,
    minimum_budget,
    per_layer_ilp,
    uniform_allocation,
)
from zoo.quant.moe.api import convert_for_loading, expert_fp16_nbytes, expert_nbytes, expert_widths, quantize_
from zoo.quant.moe.config import MoEQuantConfig
from zoo.quant.moe.importance import ExpertImportance, expert_importance
from zoo.quant.moe.layout import (
    ExpertsAdapter,
    FusedExperts,
    LinearListExperts,
    MoELayer,
    find_moe_layers,
    register_moe_detector,
)
from zoo.quant.moe.modules import PackedExperts, PackedLinear, PackedMatrix
from zoo.quant.moe.pipeline import GEMQConfig, allocate, gemq_quantize, progressive_gemq
from zoo.quant.moe.quantizers import QuantizedMatrix, gptq_quantize, rtn_quantize, sqnr_db
from zoo.quant.moe.routing import RoutingRecorder, finetune_routers, lm_metrics, realign_routers, routing_mismatch

__all__ = [
    "ExpertImportance",
    "ExpertsAdapter",
    "FusedExperts",
    "GEMQConfig",
    "InfeasibleBudgetError",
    "LinearListExperts",
    "MoELayer",
    "MoEQuantConfig",
    "PackedExperts",
    "PackedLinear",
    "PackedMatrix",
    "QuantizedMatrix",
    "RoutingRecorder",
    "allocate",
    "c2c3_floors",
    "convert_for_loading",
    "expert_fp16_nbytes",
    "expert_importance",
    "expert_nbytes",
    "expert_widths",
    "find_moe_layers",
    "finetune_routers",
    "frequency_allocation",
    "gemq_quantize",
    "global_ilp",
    "gptq_quantize",
    "greedy_allocation",
    "lm_metrics",
    "minimum_budget",
    "per_layer_ilp",
    "progressive_gemq",
    "quantize_",
    "realign_routers",
    "register_moe_detector",
    "routing_mismatch",
    "rtn_quantize",
    "sqnr_db",
    "uniform_allocation",
]
