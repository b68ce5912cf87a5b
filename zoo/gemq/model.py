"""The small Mixtral-architecture LM that GEMQ is reproduced on (plain transformers, no Lightning)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

ARCHS = ("mixtral", "qwen2_moe")


@dataclass
class MoEArch:
    """Architecture of the MoE language model.

    Args:
        kind: ``"mixtral"`` (MixtralForCausalLM) or ``"qwen2_moe"`` (Qwen2MoeForCausalLM, with a shared expert).
        vocab_size: Tokenizer vocabulary.
        hidden_size: Model width.
        num_layers: Decoder layers (each with an MoE block).
        num_heads: Attention heads.
        num_experts: Routed experts per block.
        top_k: Experts per token.
        intermediate_size: Hidden width of one routed expert.
        shared_intermediate_size: Hidden width of the shared expert (``qwen2_moe`` only).
        max_seq_len: Longest sequence (RoPE table).
        dropout: Attention-probability dropout in training (``attention_dropout``; 0 in the published v1 base).
    """

    kind: str = "mixtral"
    vocab_size: int = 4096
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    num_experts: int = 8
    top_k: int = 2
    intermediate_size: int = 256
    shared_intermediate_size: int = 256
    max_seq_len: int = 128
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ARCHS:
            raise ValueError(f"arch.kind must be one of {ARCHS}, got {self.kind!r}")
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k={self.top_k} exceeds num_experts={self.num_experts}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")


def build_moe_lm(arch: MoEArch, router_aux_loss_coef: float = 0.01) -> nn.Module:
    """A randomly initialised transformers MoE causal LM (eager expert loop, fused 3-D expert tensors)."""
    common = dict(
        vocab_size=arch.vocab_size,
        hidden_size=arch.hidden_size,
        num_hidden_layers=arch.num_layers,
        num_attention_heads=arch.num_heads,
        num_key_value_heads=arch.num_heads,
        num_experts_per_tok=arch.top_k,
        max_position_embeddings=arch.max_seq_len,
        router_aux_loss_coef=router_aux_loss_coef,
        tie_word_embeddings=False,
        attention_dropout=arch.dropout,
    )
    if arch.kind == "mixtral":
        from transformers import MixtralConfig, MixtralForCausalLM

        config = MixtralConfig(num_local_experts=arch.num_experts, intermediate_size=arch.intermediate_size, **common)
        model_class = MixtralForCausalLM
    else:
        from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

        config = Qwen2MoeConfig(
            num_experts=arch.num_experts,
            moe_intermediate_size=arch.intermediate_size,
            shared_expert_intermediate_size=arch.shared_intermediate_size,
            intermediate_size=arch.shared_intermediate_size,
            **common,
        )
        model_class = Qwen2MoeForCausalLM
    # The eager loop dequantizes only the experts a batch uses; grouped_mm would materialise all of them.
    config._experts_implementation = "eager"
    config._attn_implementation = "sdpa"
    return model_class(config)


@torch.no_grad()
def round_to_fp16(module: nn.Module) -> None:
    """Round every float parameter to the nearest fp16 value (kept in fp32), so fp16 storage is lossless."""
    for parameter in module.parameters():
        if parameter.dtype == torch.float32:
            parameter.copy_(parameter.half().float())
