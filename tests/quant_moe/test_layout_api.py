"""quantize_ on transformers Mixtral / Qwen2-MoE (fused 3-D experts), list-of-Linear experts and a custom adapter."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from torch import nn

from tests.quant_moe.conftest import tiny_mixtral
from zoo.quant.moe.api import convert_for_loading, expert_fp16_nbytes, expert_nbytes, expert_widths, quantize_
from zoo.quant.moe.config import MoEQuantConfig
from zoo.quant.moe.layout import ExpertsAdapter, FusedExperts, LinearListExperts, MoELayer, find_moe_layers
from zoo.quant.moe.modules import PackedExperts, PackedLinear, PackedMatrix
from zoo.quant.moe.quantizers import fake_quantize


def test_mixtral_fused_layout_is_found_by_parameter(mixtral):
    layers = find_moe_layers(mixtral)
    assert [layer.name for layer in layers] == ["model.layers.0.mlp", "model.layers.1.mlp"]
    adapter = layers[0].experts
    assert isinstance(adapter, FusedExperts) and adapter.names == ("gate_up_proj", "down_proj")
    assert adapter.weight("gate_up_proj", 1).shape == (128, 32) and adapter.weight("down_proj", 1).shape == (32, 64)
    assert layers[0].top_k == 2 and layers[0].shared == {}


def test_qwen2_moe_shared_expert_is_found_and_kept_high(qwen2_moe, tokens):
    layer = find_moe_layers(qwen2_moe)[0]
    assert sorted(layer.shared) == [
        f"model.layers.0.mlp.shared_expert.{n}" for n in ("down_proj", "gate_proj", "up_proj")
    ]
    quantize_(qwen2_moe, MoEQuantConfig(expert_bits=2, method="gptq"), tokens)
    block = qwen2_moe.model.layers[0].mlp
    assert isinstance(block.experts.gate_up_proj, PackedExperts)
    assert isinstance(block.shared_expert.up_proj, nn.Linear)  # 16 bits: untouched
    assert isinstance(block.shared_expert_gate, nn.Linear) and isinstance(block.gate.weight, nn.Parameter)
    assert torch.isfinite(qwen2_moe(tokens).logits).all()
    quantize_(copy_qwen := qwen2_moe.__class__(qwen2_moe.config).eval(), MoEQuantConfig(shared_expert_bits=4))
    assert isinstance(copy_qwen.model.layers[0].mlp.shared_expert.up_proj, PackedLinear)


def test_one_expert_perturbation_changes_only_its_tokens(mixtral):
    layer = find_moe_layers(mixtral)[0]
    x = torch.randn(3, 10, 32, generator=torch.Generator().manual_seed(0))
    before = layer.block(x).reshape(-1, 32)
    layer.experts.set_weight("down_proj", 2, layer.experts.weight("down_proj", 2) + 0.5)
    after = layer.block(x).reshape(-1, 32)
    routed = (layer.route(x) == 2).any(-1)
    changed = (after - before).abs().amax(-1) > 0
    assert routed.any() and (~routed).any()
    assert torch.equal(changed, routed)


def test_packed_forward_equals_fake_quantized_float_model(mixtral, tokens):
    config = MoEQuantConfig(expert_bits=3, group_size=16, allocation={"model.layers.0.mlp": [1, 2, 3, 16]})
    fake = copy.deepcopy(mixtral)
    for layer, widths in zip(find_moe_layers(fake), ([1, 2, 3, 16], [3, 3, 3, 3]), strict=True):
        for e, bits in enumerate(widths):
            for name in layer.experts.names:
                w = layer.experts.weight(name, e)
                layer.experts.set_weight(name, e, w.half().float() if bits == 16 else fake_quantize(w, bits, 16))
    quantize_(mixtral, config)
    assert expert_widths(mixtral) == {"model.layers.0.mlp": [1, 2, 3, 16], "model.layers.1.mlp": [3, 3, 3, 3]}
    with torch.no_grad():
        assert torch.equal(mixtral(tokens).logits, fake(tokens).logits)


def test_packed_experts_serve_grouped_mm_through_torch_function(mixtral, tokens):
    reference = mixtral(tokens).logits
    quantize_(mixtral, MoEQuantConfig(expert_bits=8, group_size=32))
    mixtral.set_experts_implementation("grouped_mm")
    torch.testing.assert_close(mixtral(tokens).logits, reference, atol=0.05, rtol=0.05)


def test_expert_bytes_are_measured(mixtral):
    fp16 = expert_fp16_nbytes(mixtral)
    assert fp16 == expert_nbytes(mixtral) == 2 * 2 * 4 * (128 * 32 + 32 * 64)
    quantize_(mixtral, MoEQuantConfig(expert_bits=2, group_size=32))
    assert expert_nbytes(mixtral) == fp16 * (2 + 32 / 32) / 16  # 2 bits + fp16 scale and zero per 32 weights


def test_saved_quantized_model_reloads_with_identical_logits(mixtral, tokens, tmp_path):
    from safetensors.torch import load_file, save_file

    config = MoEQuantConfig(method="gptq", group_size=16, allocation={"model.layers.1.mlp": [1, 3, 2, 2]})
    quantize_(mixtral, config, tokens)
    save_file({k: v.contiguous() for k, v in mixtral.state_dict().items()}, str(tmp_path / "model.safetensors"))
    (tmp_path / "quant.json").write_text(json.dumps(config.to_dict()))

    fresh = tiny_mixtral(seed=123)  # different float weights: everything must come from the file
    convert_for_loading(fresh, MoEQuantConfig.from_dict(json.loads((tmp_path / "quant.json").read_text())))
    fresh.load_state_dict(load_file(str(tmp_path / "model.safetensors")), strict=True)
    with torch.no_grad():
        assert torch.equal(fresh(tokens).logits, mixtral(tokens).logits)


def test_config_round_trip_and_overrides(mixtral):
    config = MoEQuantConfig(
        expert_bits=2, linear_bits=4, fqn_bits={"model.layers.0.mlp.experts.3": 16, "re:.*self_attn\\.o_proj": 16}
    )
    assert MoEQuantConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    quantize_(mixtral, config)
    assert expert_widths(mixtral)["model.layers.0.mlp"] == [2, 2, 2, 16]
    attention = mixtral.model.layers[0].self_attn
    assert isinstance(attention.q_proj, PackedLinear) and attention.q_proj.packed.bits == 4
    assert isinstance(attention.o_proj, nn.Linear)
    assert isinstance(mixtral.lm_head, nn.Linear)  # skipped by default
    assert isinstance(mixtral.model.layers[0].mlp.gate.weight, nn.Parameter)  # routers never quantized


def test_bad_configs_give_clear_errors(mixtral, tokens):
    with pytest.raises(ValueError, match="needs calibration"):
        quantize_(mixtral, MoEQuantConfig(method="gptq"))
    with pytest.raises(ValueError, match="method must be"):
        MoEQuantConfig(method="awq")
    with pytest.raises(ValueError, match="1..8 bits or 16"):
        MoEQuantConfig(expert_bits=12)
    with pytest.raises(ValueError, match="has 2 widths but the block has 4"):
        quantize_(mixtral, MoEQuantConfig(allocation={"model.layers.0.mlp": [2, 2]}))
    with pytest.raises(ValueError, match="not MoE blocks"):
        quantize_(mixtral, MoEQuantConfig(allocation={"model.layers.9.mlp": [2, 2, 2, 2]}))
    with pytest.raises(ValueError, match="unknown MoEQuantConfig keys"):
        MoEQuantConfig.from_dict({"bits": 3})
    quantize_(mixtral, MoEQuantConfig())
    with pytest.raises(ValueError, match="already quantized"):
        quantize_(mixtral, MoEQuantConfig())
    with pytest.raises(ValueError, match="no MoE block"):
        find_moe_layers(nn.Sequential(nn.Linear(2, 2)))


# ------------------------------------------------------------------------ list-of-Linear experts (Mixtral 4.x style)


class SwiGLUExpert(nn.Module):
    def __init__(self, hidden: int, inner: int) -> None:
        super().__init__()
        self.w1, self.w2, self.w3 = (
            nn.Linear(hidden, inner, bias=False),
            nn.Linear(inner, hidden, bias=False),
            nn.Linear(hidden, inner, bias=False),
        )

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))


class ListMoE(nn.Module):
    def __init__(self, hidden: int = 16, experts: int = 4, top_k: int = 2) -> None:
        super().__init__()
        self.top_k = top_k
        self.gate = nn.Linear(hidden, experts, bias=False)
        self.experts = nn.ModuleList(SwiGLUExpert(hidden, 32) for _ in range(experts))

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        weights, chosen = self.gate(flat).softmax(-1).topk(self.top_k, -1)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(chosen == e)
            out.index_add_(0, token, expert(flat[token]) * weights[token, slot, None])
        return out.reshape(x.shape)


def test_list_of_linear_experts(tokens):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(256, 16), ListMoE(), ListMoE(), nn.Linear(16, 256))
    layers = find_moe_layers(model)
    assert isinstance(layers[0].experts, LinearListExperts)
    assert layers[0].experts.names == ("w1", "w3", "w2")  # forward order, not registration order
    quantize_(model, MoEQuantConfig(expert_bits=3, method="gptq", group_size=8), tokens)
    assert isinstance(model[1].experts[0].w2, PackedLinear) and isinstance(model[1].gate, nn.Linear)
    assert isinstance(model[3], nn.Linear)  # linear_bits=16 keeps the head
    assert expert_widths(model)["1"] == [3, 3, 3, 3] and torch.isfinite(model(tokens)).all()


# ------------------------------------------------------------------- a custom layout through a small adapter


class BankMoE(nn.Module):
    """Experts are one [E, out, in] bank of single matrices; the router is called 'selector' (no built-in rule)."""

    def __init__(self, hidden: int = 16, experts: int = 4) -> None:
        super().__init__()
        self.selector = nn.Linear(hidden, experts, bias=False)
        self.bank = nn.Parameter(torch.randn(experts, hidden, hidden) / 4)

    def forward(self, x):
        chosen = self.selector(x).argmax(-1)
        return torch.stack(
            [self.bank[int(e)] @ v for v, e in zip(x.reshape(-1, x.shape[-1]), chosen.reshape(-1))]
        ).reshape(x.shape)


class BankAdapter(ExpertsAdapter):
    def __init__(self, block: BankMoE) -> None:
        self.block, self.num_experts = block, block.selector.out_features

    @property
    def names(self):
        return ("bank",)

    def weight(self, name, expert):
        bank = self.block.bank
        return bank.expert(expert) if isinstance(bank, PackedExperts) else bank[expert].detach()

    def set_weight(self, name, expert, value):
        with torch.no_grad():
            self.block.bank[expert].copy_(value)

    def matrix_inputs(self, expert, x):
        return {"bank": x}

    def pack(self, name, slices: list[PackedMatrix]):
        del self.block._parameters["bank"]
        self.block.bank = PackedExperts(slices)

    def packed(self, name):
        return list(self.block.bank.slices) if isinstance(self.block.bank, PackedExperts) else None


def bank_detector(name, module, model):
    return (
        MoELayer(name, module, module.selector, BankAdapter(module), top_k=1) if isinstance(module, BankMoE) else None
    )


def test_custom_layout_through_a_detector():
    torch.manual_seed(0)
    model = nn.Sequential(BankMoE(), nn.Tanh(), BankMoE())
    x = torch.randn(4, 5, 16)
    reference = model(x)
    calibration = [x[i : i + 2] for i in range(0, 4, 2)]
    quantize_(model, MoEQuantConfig(expert_bits=8, method="gptq", group_size=8), calibration, detectors=[bank_detector])
    assert expert_widths(model, detectors=[bank_detector]) == {"0": [8] * 4, "2": [8] * 4}
    torch.testing.assert_close(model(x), reference, atol=0.02, rtol=0.02)
