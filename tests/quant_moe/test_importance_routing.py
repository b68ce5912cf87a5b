"""Importance statistics c[l, e, b], router fine-tuning, routing mismatch and the pipeline."""

from __future__ import annotations

import copy

import pytest
import torch

from zoo.quant.moe.importance import block_io_and_gradients, causal_lm_loss, expert_importance
from zoo.quant.moe.layout import find_moe_layers
from zoo.quant.moe.pipeline import GEMQConfig, allocate, gemq_quantize, progressive_gemq
from zoo.quant.moe.quantizers import fake_quantize
from zoo.quant.moe.routing import RoutingRecorder, finetune_routers, routing_mismatch


def test_importance_matches_a_direct_computation(mixtral, tokens):
    importance = expert_importance(mixtral, tokens, bits=(1, 2, 3), batch_size=4)
    assert importance.weighted.shape == importance.local.shape == (2, 4, 3)
    assert torch.allclose(importance.frequency.sum(-1), torch.full((2,), 2.0))  # top-2: two experts per token
    assert (importance.weighted[..., 0] > importance.weighted[..., 2]).all()  # 1 bit hurts more than 3 bits

    # c[1, 2, 2 bits] by hand: loss gradient at the block output, error of quantizing expert 2 alone
    layer = find_moe_layers(mixtral)[1]
    captured = {}
    handle = layer.block.register_forward_hook(lambda m, a, out: captured.update(x=a[0], y=out) or out.retain_grad())
    causal_lm_loss(mixtral, tokens).backward()
    handle.remove()
    with torch.no_grad():
        for name in layer.experts.names:
            layer.experts.set_weight(name, 2, fake_quantize(layer.experts.weight(name, 2), 2, None))
        diff = captured["y"] - layer.block(captured["x"])
    expected = (captured["y"].grad.pow(2) * diff.pow(2)).sum()
    torch.testing.assert_close(importance.weighted[1, 2, 1], expected, rtol=1e-3, atol=0)


def test_gradients_reach_every_block(mixtral, tokens):
    layers = find_moe_layers(mixtral)
    inputs, gradients = block_io_and_gradients(mixtral, layers, tokens, batch_size=4)
    assert [tuple(x.shape) for x in inputs] == [(8, 24, 32)] * 2
    assert all(g.abs().sum() > 0 for g in gradients)
    assert all(p.grad is None for p in mixtral.parameters())  # autograd.grad: no parameter gradients left behind


def test_router_finetuning_touches_only_routers_and_lowers_loss(mixtral, tokens):
    before = copy.deepcopy(mixtral.state_dict())
    losses = finetune_routers(mixtral, tokens, lr=1e-2, epochs=5, batch_size=4)
    assert losses[-1] < losses[0]
    after = mixtral.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed == {"model.layers.0.mlp.gate.weight", "model.layers.1.mlp.gate.weight"}
    assert all(p.requires_grad for p in mixtral.parameters())  # restored


def test_routing_mismatch_counts_changed_top_k_sets():
    a = [torch.tensor([[0, 1], [2, 3], [1, 2], [0, 3]]), torch.tensor([[0, 1]] * 4)]
    b = [torch.tensor([[0, 1], [2, 3], [1, 3], [0, 3]]), torch.tensor([[0, 2]] * 4)]
    assert routing_mismatch(a, b) == pytest.approx((0.25 + 1.0) / 2)
    assert routing_mismatch(a, a) == 0.0


def test_recorder_sees_shift_after_quantization(mixtral, tokens):
    with RoutingRecorder(mixtral) as recorder:
        mixtral(tokens)
    reference = recorder.routes
    assert reference[0].shape == (8 * 24, 2)
    quantized = copy.deepcopy(mixtral)
    gemq_quantize(quantized, tokens, GEMQConfig(budget=1.5, c2c3=False, method="rtn", router_finetune=False))
    with RoutingRecorder(quantized) as recorder:
        quantized(tokens)
    assert routing_mismatch(recorder.routes, reference) > 0  # layer 1 sees different hidden states


def test_pipeline_solvers_and_budget(mixtral, tokens):
    importance = expert_importance(mixtral, tokens, batch_size=4)
    for solver in ("ilp", "layer", "uniform", "frequency", "greedy"):
        widths = allocate(importance, 2.0, solver, c2c3=solver != "uniform")
        assert widths.shape == (2, 4) and widths.mean() <= 2.0
    from zoo.quant.moe.allocation import InfeasibleBudgetError

    with pytest.raises(InfeasibleBudgetError, match="below the minimum feasible 1.75"):
        allocate(importance, 1.5, "ilp", c2c3=True)  # 4 experts: one 3-bit + one 2-bit + two 1-bit = 1.75
    with pytest.raises(ValueError, match="solver must be one of"):
        GEMQConfig(solver="gurobi")


def test_progressive_reestimates_on_the_quantized_model(mixtral, tokens):
    config = GEMQConfig(method="rtn", router_epochs=1, router_batch_size=4)
    results = progressive_gemq(mixtral, tokens, [2.5, 1.75], config)
    assert [r["step"] for _, r in results] == [0, 1]
    assert [torch.tensor(r["widths"]).float().mean().item() for _, r in results] == [2.5, 1.75]
    assert all(isinstance(p, torch.nn.Parameter) for p in mixtral.model.layers[0].mlp.experts.parameters())


def test_route_matching_pulls_routers_back_to_the_teacher(mixtral, tokens):
    teacher = copy.deepcopy(mixtral)
    with torch.no_grad():
        for layer in find_moe_layers(mixtral):
            layer.router.weight.add_(0.03 * torch.randn_like(layer.router.weight))  # about twice the weights' scale
    with RoutingRecorder(teacher) as recorder:
        teacher(tokens)
    reference = recorder.routes

    def mismatch():
        with RoutingRecorder(mixtral) as rec, torch.no_grad():
            mixtral(tokens)
        return routing_mismatch(rec.routes, reference)

    before = mismatch()
    finetune_routers(mixtral, tokens, lr=3e-3, epochs=10, batch_size=4, teacher=teacher, route_weight=10.0)
    assert mismatch() < 0.3 * before


def test_router_realignment_restores_full_precision_routing(mixtral, tokens):
    from zoo.quant.moe.routing import realign_routers

    quantized = copy.deepcopy(mixtral)
    gemq_quantize(quantized, tokens, GEMQConfig(budget=1.75, method="rtn", router_finetune=False))

    def routes(model):
        with RoutingRecorder(model) as rec, torch.no_grad():
            model(tokens)
        return rec.routes

    before = routing_mismatch(routes(quantized), routes(mixtral))
    realign_routers(quantized, mixtral, tokens, ridge=1e-4)
    after = routing_mismatch(routes(quantized), routes(mixtral))
    assert before > 0 and after < 0.5 * before
