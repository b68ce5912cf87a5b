"""Tiny transformers MoE models for the zoo.quant.moe tests (random weights, built in milliseconds)."""

from __future__ import annotations

import pytest
import torch


def tiny_mixtral(seed: int = 0, experts: int = 4, layers: int = 2):
    from transformers import MixtralConfig, MixtralForCausalLM

    config = MixtralConfig(
        vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=layers, num_attention_heads=2,
        num_key_value_heads=2, num_local_experts=experts, num_experts_per_tok=2, max_position_embeddings=64,
    )  # fmt: skip
    config._experts_implementation = "eager"
    torch.manual_seed(seed)
    return MixtralForCausalLM(config).eval()


def tiny_qwen2_moe(seed: int = 0):
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

    config = Qwen2MoeConfig(
        vocab_size=256, hidden_size=32, intermediate_size=64, moe_intermediate_size=32,
        shared_expert_intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
        num_experts=4, num_experts_per_tok=2, max_position_embeddings=64,
    )  # fmt: skip
    config._experts_implementation = "eager"
    torch.manual_seed(seed)
    return Qwen2MoeForCausalLM(config).eval()


@pytest.fixture
def mixtral():
    return tiny_mixtral()


@pytest.fixture
def qwen2_moe():
    return tiny_qwen2_moe()


@pytest.fixture
def tokens():
    return torch.randint(0, 256, (8, 24), generator=torch.Generator().manual_seed(0))


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """These tiny models are per-operation-overhead bound: one intra-op thread is fastest (10x on a loaded machine)."""
    from zoo.quant.moe.quantizers import torch_threads

    with torch_threads(1):
        yield
