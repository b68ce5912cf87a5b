"""Router alignment (issue 32): the routing-KL loss, top-k mismatch, held-out early stopping, the lr grid."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from zoo.gemq.alignment import (
    RouterFTConfig,
    align_routers,
    alignment_loss,
    held_out_score,
    router_kl,
    select_router_ft,
    teacher_router_logprobs,
    topk_mismatch,
)
from zoo.gemq.model import MoEArch, build_moe_lm
from zoo.quant.moe.layout import find_moe_layers

ARCHS = {
    "mixtral": MoEArch(vocab_size=64, hidden_size=16, num_layers=2, num_heads=2, num_experts=4, intermediate_size=32,
                       max_seq_len=16),
    "qwen2_moe": MoEArch(kind="qwen2_moe", vocab_size=64, hidden_size=16, num_layers=2, num_heads=2, num_experts=4,
                         intermediate_size=16, shared_intermediate_size=32, max_seq_len=16),
}  # fmt: skip


def _tiny(kind: str = "mixtral", seed: int = 0):
    """A tiny random MoE LM with weights of std 0.3 (the default 0.02 gives near-uniform routing)."""
    torch.manual_seed(seed)
    model = build_moe_lm(ARCHS[kind]).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.3)
    return model


def _tokens(n: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 64, (n, 16), generator=torch.Generator().manual_seed(seed))


def _rtn(model, bits: int = 1):
    """The model with every routed expert round-to-nearest quantized (routers untouched)."""
    from zoo.quant.moe.api import quantize_
    from zoo.quant.moe.config import MoEQuantConfig

    layers = find_moe_layers(model)
    allocation = {layer.name: [bits] * layer.num_experts for layer in layers}
    return quantize_(copy.deepcopy(model), MoEQuantConfig(method="rtn", group_size=None, allocation=allocation))


def _routers(model) -> list[torch.Tensor]:
    return [layer.router.weight.detach().clone() for layer in find_moe_layers(model)]


def test_router_kl_matches_hand_computed_values():
    # teacher p = (1/2, 1/2); student q = (3/4, 1/4): KL(p || q) = 1/2 ln(2/3) + 1/2 ln 2 = 1/2 ln(4/3)
    teacher, student = torch.zeros(1, 2), torch.tensor([[math.log(3.0), 0.0]])
    assert float(router_kl([student], [teacher])) == pytest.approx(0.5 * math.log(4 / 3), abs=1e-6)
    # two blocks are averaged: the second block routes exactly as the teacher does (KL 0)
    assert float(router_kl([student, teacher], [teacher, teacher])) == pytest.approx(0.25 * math.log(4 / 3), abs=1e-6)
    # log-probabilities are accepted as the teacher (log_softmax is idempotent); tokens are averaged
    logits = torch.tensor([[2.0, -1.0, 0.5], [0.0, 0.0, 3.0]])
    assert float(router_kl([logits], [logits.log_softmax(-1)])) == pytest.approx(0.0, abs=1e-7)
    with pytest.raises(ValueError, match="blocks of student logits"):
        router_kl([logits], [])
    with pytest.raises(ValueError, match="router logits of shape"):
        router_kl([logits], [logits[:, :2]])


def test_topk_mismatch_counts_tokens_whose_expert_set_changes():
    teacher = torch.tensor([[3.0, 2.0, 0.0, -1.0], [0.0, 1.0, 2.0, 3.0]])
    same_set = torch.tensor([[2.0, 3.0, 0.0, -1.0], [0.0, 1.0, 3.0, 2.0]])  # order swapped, same top-2 sets
    one_changed = torch.tensor([[3.0, 2.0, 0.0, -1.0], [3.0, 1.0, 2.0, 0.0]])
    assert topk_mismatch([same_set], [teacher], 2) == 0.0
    assert topk_mismatch([one_changed], [teacher], 2) == 0.5
    assert topk_mismatch([one_changed, same_set], [teacher, teacher], 2) == 0.25


@pytest.mark.parametrize("kind", ["mixtral", "qwen2_moe"])
def test_router_loss_is_zero_when_the_quantized_model_routes_as_the_fp_model(kind):
    teacher = _tiny(kind)
    batch = _tokens(4, 1)
    targets = teacher_router_logprobs(teacher, batch)
    assert len(targets) == 2 and targets[0].shape == (4 * 16, 4)
    with torch.no_grad():
        assert float(alignment_loss(copy.deepcopy(teacher), batch, targets)) == pytest.approx(0.0, abs=1e-6)
        quantized = _rtn(teacher)  # 1-bit experts: block 0's output changes, so block 1's router sees other states
        assert float(alignment_loss(quantized, batch, targets)) > 1e-3


def _scripted(values, snapshots):
    calls = iter(values)

    def score(model):
        snapshots.append(_routers(model))
        return next(calls)

    return score


def test_early_stopping_restores_the_routers_of_the_best_held_out_evaluation():
    teacher = _tiny()
    model = _rtn(teacher)
    snapshots: list = []
    # held-out values at steps 0, 2, 4, ...: best at step 4, then three evaluations without improvement
    score = _scripted([5.0, 3.0, 1.0, 2.0, 4.0, 6.0, 7.0], snapshots)
    config = RouterFTConfig(lr=0.05, max_steps=50, batch_size=4, eval_every=2, patience=3)
    report = align_routers(model, teacher, _tokens(8, 2), _tokens(4, 3), config, score_fn=score)
    assert [step for step, _ in report.history] == [0, 2, 4, 6, 8, 10]
    assert (report.best_step, report.best) == (4, 1.0) and len(report.losses) == 10
    assert not all(torch.equal(a, b) for a, b in zip(snapshots[2], snapshots[-1], strict=True))  # training moved
    assert all(torch.equal(a, b) for a, b in zip(_routers(model), snapshots[2], strict=True))  # step 4 restored


def test_early_stopping_can_keep_the_unchanged_routers_and_real_criterion_is_restored():
    teacher = _tiny()
    model = _rtn(teacher)
    start = _routers(model)

    def drift(m):  # any move away from the starting routers is worse
        return sum(float((a - b).pow(2).sum()) for a, b in zip(_routers(m), start, strict=True))

    config = RouterFTConfig(lr=0.05, max_steps=6, batch_size=4, eval_every=2, patience=5)
    report = align_routers(model, teacher, _tokens(8, 2), _tokens(4, 3), config, score_fn=drift)
    assert report.best_step == 0 and len(report.losses) == 6
    assert all(torch.equal(a, b) for a, b in zip(_routers(model), start, strict=True))
    # with the real criterion (validation NLL) the restored model scores the recorded best
    validation = _tokens(4, 3)
    report = align_routers(model, teacher, _tokens(8, 2), validation, RouterFTConfig(lr=0.05, max_steps=6,
                           batch_size=4, eval_every=2, patience=5))  # fmt: skip
    assert held_out_score(model, validation) == pytest.approx(report.best, rel=1e-6)
    assert report.best == min(value for _, value in report.history)


def test_alignment_lowers_the_routing_kl_on_calibration_text():
    teacher = _tiny()
    model = _rtn(teacher)
    calibration = _tokens(16, 4)
    targets = teacher_router_logprobs(teacher, calibration)
    with torch.no_grad():
        before = float(alignment_loss(model, calibration, targets))
    config = RouterFTConfig(lr=0.02, max_steps=30, batch_size=8, eval_every=10, patience=5, criterion="route_kl")
    report = align_routers(model, teacher, calibration, calibration, config)
    with torch.no_grad():
        after = float(alignment_loss(model, calibration, targets))
    assert report.best < 0.9 * before and after == pytest.approx(report.best, rel=1e-5)
    frozen = [p for n, p in model.named_parameters() if "gate" not in n and p.dtype.is_floating_point]
    reference = dict(_rtn(teacher).named_parameters())
    assert all(torch.equal(p, reference[n]) for n, p in model.named_parameters() if "gate" not in n) and frozen


def test_select_router_ft_keeps_the_learning_rate_with_the_best_held_out_value():
    teacher = _tiny()
    model = _rtn(teacher)
    config = RouterFTConfig(max_steps=4, batch_size=4, eval_every=2, patience=2)
    chosen, reports = select_router_ft(model, teacher, _tokens(8, 2), _tokens(4, 3), [1e-3, 0.05], config)
    assert [r.config.lr for r in reports] == [1e-3, 0.05]
    assert chosen.best == min(r.best for r in reports)
    assert held_out_score(model, _tokens(4, 3)) == pytest.approx(chosen.best, rel=1e-6)
    with pytest.raises(ValueError, match="at least one learning rate"):
        select_router_ft(model, teacher, _tokens(8, 2), _tokens(4, 3), [])


def test_bad_settings_give_clear_errors():
    with pytest.raises(ValueError, match="criterion must be one of"):
        RouterFTConfig(criterion="accuracy")
    with pytest.raises(ValueError, match="ce_weight must be in"):
        RouterFTConfig(ce_weight=2.0)
    with pytest.raises(ValueError, match="eval_every >= 1"):
        RouterFTConfig(eval_every=0)
    teacher = _tiny()
    with pytest.raises(ValueError, match=r"token ids \[N, T\]"):
        align_routers(teacher, teacher, torch.zeros(16, dtype=torch.long), _tokens(2, 0))
    with pytest.raises(ValueError, match="needs the teacher's routing"):
        held_out_score(teacher, _tokens(2, 0), criterion="route_kl")
