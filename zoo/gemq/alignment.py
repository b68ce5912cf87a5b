"""Router fine-tuning as GEMQ frames it: align the quantized model's routing with the full-precision model's.

GEMQ fine-tunes the routers "so routing adapts to the quantized experts". The first implementation (the paper's
code path: next-token cross-entropy, AdamW lr 1e-4, one epoch over 64 x 128 calibration tokens) overfitted the
calibration text and never lowered routing mismatch (issue 32). This module is the replacement (plain torch, no
Lightning):

* **Loss** (:func:`router_kl`): the mean over MoE blocks of ``KL(p_fp || p_q)`` per token, where ``p_fp`` is the
  full-precision router's softmax over experts on the full-precision hidden states and ``p_q`` the quantized
  model's router softmax on its own (quantized) hidden states, i.e. the distillation of routing decisions. It is
  exactly zero when the quantized model routes as the fp model does (identical routing distributions), and it
  is differentiable in the student's routers only (everything else frozen). An optional next-token term
  ``ce_weight * CE`` can be mixed in (``(1 - ce_weight) * KL + ce_weight * CE``); the teacher's routing
  distributions on the calibration set are computed once and cached.
* **Agreement** (:func:`topk_mismatch`): share of tokens whose top-k expert *set* differs from the fp model's,
  averaged over blocks (the card's ``routing_mismatch``, = 1 - top-k set agreement).
* **Held-out early stopping** (:func:`align_routers`): the held-out criterion (validation next-token NLL by
  default, or validation routing KL) is measured before the first step and every ``eval_every`` steps; training
  stops after ``patience`` evaluations without improvement, and the routers of the best held-out evaluation are
  restored (step 0 = no fine-tuning is a candidate, so fine-tuning can never end worse than its starting point
  on the validation slice).
* **Learning-rate grid** (:func:`select_router_ft`): one early-stopped run per learning rate from the same
  starting routers; the one with the best held-out criterion is kept (steps = its early-stopping step).

The validation slice must be disjoint from the test split and from the calibration set (see
:func:`zoo.gemq.data.wiki_splits`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F
from torch import nn

from zoo.quant.moe.layout import find_moe_layers
from zoo.quant.moe.routing import only_trainable, router_parameters

CRITERIA = ("nll", "route_kl")


@dataclass
class RouterFTConfig:
    """Settings of router alignment.

    Args:
        lr: AdamW learning rate.
        max_steps: Most optimiser steps.
        batch_size: Calibration sequences per step.
        eval_every: Steps between held-out evaluations.
        patience: Held-out evaluations without improvement before stopping.
        ce_weight: Weight of next-token cross-entropy mixed into the routing KL (0: KL only).
        criterion: Held-out quantity minimised by early stopping, ``"nll"`` or ``"route_kl"``.
        weight_decay: AdamW weight decay.
    """

    lr: float = 1e-3
    max_steps: int = 400
    batch_size: int = 16
    eval_every: int = 20
    patience: int = 4
    ce_weight: float = 0.0
    criterion: str = "nll"
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        if self.criterion not in CRITERIA:
            raise ValueError(f"criterion must be one of {CRITERIA}, got {self.criterion!r}")
        if not 0.0 <= self.ce_weight <= 1.0:
            raise ValueError(f"ce_weight must be in [0, 1], got {self.ce_weight}")
        if self.max_steps < 0 or self.eval_every < 1 or self.patience < 1 or self.batch_size < 1:
            raise ValueError("max_steps >= 0, eval_every >= 1, patience >= 1 and batch_size >= 1 are required")


@dataclass
class AlignmentReport:
    """What :func:`align_routers` did.

    Args:
        history: ``(step, held-out criterion)`` of every evaluation, step 0 first.
        best_step: Step whose routers were restored.
        best: Held-out criterion at ``best_step``.
        losses: Training loss of every step.
        config: The settings used.
    """

    history: list[tuple[int, float]] = field(default_factory=list)
    best_step: int = 0
    best: float = math.inf
    losses: list[float] = field(default_factory=list)
    config: RouterFTConfig | None = None


def router_kl(student_logits: Sequence[torch.Tensor], teacher_logits: Sequence[torch.Tensor]) -> torch.Tensor:
    """Mean over blocks of the per-token ``KL(softmax(teacher) || softmax(student))`` over experts.

    Args:
        student_logits: Per block, router logits ``[n, E]`` of the quantized model (on its own hidden states).
        teacher_logits: Per block, router logits (or log-probabilities) ``[n, E]`` of the fp model.
    """
    if len(student_logits) != len(teacher_logits) or not student_logits:
        raise ValueError(f"{len(student_logits)} blocks of student logits against {len(teacher_logits)} of teacher")
    total = 0.0
    for mine, theirs in zip(student_logits, teacher_logits, strict=True):
        if mine.shape != theirs.shape:
            raise ValueError(f"router logits of shape {tuple(mine.shape)} against {tuple(theirs.shape)}")
        target = theirs.float().log_softmax(-1)
        total = total + F.kl_div(mine.float().log_softmax(-1), target, log_target=True, reduction="batchmean")
    return total / len(student_logits)


def topk_mismatch(student_logits: Sequence[torch.Tensor], teacher_logits: Sequence[torch.Tensor], top_k: int) -> float:
    """Share of tokens whose top-k expert set differs from the teacher's, averaged over blocks."""
    shares = []
    for mine, theirs in zip(student_logits, teacher_logits, strict=True):
        a = mine.topk(top_k, -1).indices.sort(-1).values
        b = theirs.topk(top_k, -1).indices.sort(-1).values
        shares.append((a != b).any(-1).float().mean().item())
    return sum(shares) / len(shares)


def forward_with_router_logits(model: nn.Module, batch: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Next-token logits ``[B, T, V]`` and every block's router logits ``[B*T, E]`` (on the model's own states)."""
    layers = find_moe_layers(model)
    captured: list[torch.Tensor | None] = [None] * len(layers)

    def make_hook(i, layer):
        def hook(_module, args):
            captured[i] = layer.router_logits(args[0])

        return hook

    handles = [layer.router.register_forward_pre_hook(make_hook(i, layer)) for i, layer in enumerate(layers)]
    try:
        output = model(batch)
    finally:
        for handle in handles:
            handle.remove()
    logits = output.logits if hasattr(output, "logits") else output
    return logits, captured  # type: ignore[return-value]


@torch.no_grad()
def teacher_router_logprobs(model: nn.Module, tokens: torch.Tensor, batch_size: int = 32) -> list[torch.Tensor]:
    """Per block, the fp model's routing log-probabilities ``[N * T, E]`` on ``tokens`` (rows in token order)."""
    training = model.training
    model.eval()
    chunks: list[list[torch.Tensor]] = []
    try:
        for batch in tokens.split(batch_size):
            _, routers = forward_with_router_logits(model, batch)
            if not chunks:
                chunks = [[] for _ in routers]
            for i, logits in enumerate(routers):
                chunks[i].append(logits.float().log_softmax(-1))
    finally:
        model.train(training)
    return [torch.cat(c) for c in chunks]


def _rows(tokens_per_seq: int, index: torch.Tensor) -> torch.Tensor:
    """Row indices (into a ``[N * T, E]`` cache) of the sequences ``index``."""
    return (index[:, None] * tokens_per_seq + torch.arange(tokens_per_seq)[None]).reshape(-1)


def alignment_loss(
    model: nn.Module, batch: torch.Tensor, teacher_logprobs: Sequence[torch.Tensor], ce_weight: float = 0.0
) -> torch.Tensor:
    """``(1 - ce_weight) * router_kl + ce_weight * next-token CE`` of one batch (teacher rows already selected)."""
    logits, routers = forward_with_router_logits(model, batch)
    loss = router_kl(routers, teacher_logprobs)
    if ce_weight:
        vocab = logits.shape[-1]
        ce = F.cross_entropy(logits[:, :-1].reshape(-1, vocab).float(), batch[:, 1:].reshape(-1))
        loss = (1 - ce_weight) * loss + ce_weight * ce
    return loss


@torch.no_grad()
def held_out_score(
    model: nn.Module,
    validation: torch.Tensor,
    criterion: str = "nll",
    teacher_logprobs: Sequence[torch.Tensor] | None = None,
    batch_size: int = 32,
) -> float:
    """The early-stopping criterion on the validation sequences: mean next-token NLL, or the routing KL."""
    training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        for start in range(0, len(validation), batch_size):
            batch = validation[start : start + batch_size]
            logits, routers = forward_with_router_logits(model, batch)
            if criterion == "nll":
                vocab = logits.shape[-1]
                total += float(
                    F.cross_entropy(
                        logits[:, :-1].reshape(-1, vocab).float(), batch[:, 1:].reshape(-1), reduction="sum"
                    )
                )
                count += batch[:, 1:].numel()
            else:
                if teacher_logprobs is None:
                    raise ValueError("criterion 'route_kl' needs the teacher's routing on the validation sequences")
                rows = _rows(batch.shape[1], torch.arange(start, start + len(batch)))
                total += float(router_kl(routers, [t[rows] for t in teacher_logprobs])) * len(batch)
                count += len(batch)
    finally:
        model.train(training)
    return total / count


def _router_state(model: nn.Module) -> list[dict[str, torch.Tensor]]:
    return [{k: v.detach().clone() for k, v in layer.router.state_dict().items()} for layer in find_moe_layers(model)]


def _load_router_state(model: nn.Module, state: list[dict[str, torch.Tensor]]) -> None:
    for layer, saved in zip(find_moe_layers(model), state, strict=True):
        layer.router.load_state_dict(saved)


def align_routers(
    model: nn.Module,
    teacher: nn.Module,
    calibration: torch.Tensor,
    validation: torch.Tensor,
    config: RouterFTConfig | None = None,
    *,
    seed: int = 0,
    teacher_calibration: Sequence[torch.Tensor] | None = None,
    teacher_validation: Sequence[torch.Tensor] | None = None,
    score_fn: Callable[[nn.Module], float] | None = None,
) -> AlignmentReport:
    """Fine-tune only the routers of the quantized ``model`` towards the fp ``teacher``'s routing, in place, with
    held-out early stopping; the routers of the best held-out evaluation are restored at the end.

    Args:
        model: Quantized model (its routers change).
        teacher: Full-precision model of the same architecture (not changed).
        calibration: Token ids ``[N, T]`` to train on (shuffled by ``seed``).
        validation: Held-out token ids ``[M, T]`` for early stopping (disjoint from calibration and test).
        config: Settings.
        seed: Seed of the shuffling.
        teacher_calibration: Cached :func:`teacher_router_logprobs` of ``calibration`` (computed if None).
        teacher_validation: Cached teacher routing on ``validation`` (needed for ``criterion="route_kl"``).
        score_fn: Replaces the held-out criterion (lower is better); for tests and custom criteria.

    Returns:
        An :class:`AlignmentReport`.
    """
    config = config or RouterFTConfig()
    if calibration.dim() != 2 or validation.dim() != 2:
        raise ValueError("calibration and validation must be token ids [N, T]")
    if teacher_calibration is None and config.ce_weight < 1:
        teacher_calibration = teacher_router_logprobs(teacher, calibration)
    if config.criterion == "route_kl" and teacher_validation is None and score_fn is None:
        teacher_validation = teacher_router_logprobs(teacher, validation)

    def score() -> float:
        if score_fn is not None:
            return float(score_fn(model))
        return held_out_score(model, validation, config.criterion, teacher_validation)

    report = AlignmentReport(config=config)
    best_state = _router_state(model)
    report.best, report.best_step = score(), 0
    report.history.append((0, report.best))
    routers = router_parameters(model)
    optimizer = torch.optim.AdamW(routers, lr=config.lr, weight_decay=config.weight_decay)
    generator = torch.Generator().manual_seed(seed)
    order = torch.empty(0, dtype=torch.long)
    since_best, step = 0, 0
    training = model.training
    model.eval()  # no dropout or router jitter: the routers are fitted to the deterministic forward they serve
    try:
        with only_trainable(model, routers):
            while step < config.max_steps and since_best < config.patience:
                if len(order) < config.batch_size:  # a new epoch (the last short batch is dropped)
                    order = torch.randperm(len(calibration), generator=generator)
                index, order = order[: config.batch_size], order[config.batch_size :]
                batch = calibration[index]
                rows = _rows(calibration.shape[1], index)
                targets = [t[rows] for t in teacher_calibration] if teacher_calibration is not None else []
                if config.ce_weight >= 1:
                    from zoo.quant.moe.importance import causal_lm_loss

                    loss = causal_lm_loss(model, batch)
                else:
                    loss = alignment_loss(model, batch, targets, config.ce_weight)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                report.losses.append(loss.item())
                step += 1
                if step % config.eval_every == 0 or step == config.max_steps:
                    value = score()
                    report.history.append((step, value))
                    if value < report.best:
                        report.best, report.best_step, best_state, since_best = value, step, _router_state(model), 0
                    else:
                        since_best += 1
    finally:
        model.train(training)
    _load_router_state(model, best_state)
    return report


def select_router_ft(
    model: nn.Module,
    teacher: nn.Module,
    calibration: torch.Tensor,
    validation: torch.Tensor,
    lrs: Sequence[float],
    config: RouterFTConfig | None = None,
    *,
    seed: int = 0,
) -> tuple[AlignmentReport, list[AlignmentReport]]:
    """One early-stopped :func:`align_routers` per learning rate, each from the same starting routers; ``model``
    ends with the routers of the run whose best held-out criterion is lowest.

    Returns:
        ``(chosen report, every report in lrs order)``.
    """
    if not lrs:
        raise ValueError("give at least one learning rate")
    config = config or RouterFTConfig()
    start = _router_state(model)
    teacher_calibration = teacher_router_logprobs(teacher, calibration) if config.ce_weight < 1 else None
    teacher_validation = teacher_router_logprobs(teacher, validation) if config.criterion == "route_kl" else None
    reports, states = [], []
    for lr in lrs:
        _load_router_state(model, start)
        report = align_routers(
            model,
            teacher,
            calibration,
            validation,
            replace(config, lr=float(lr)),
            seed=seed,
            teacher_calibration=teacher_calibration,
            teacher_validation=teacher_validation,
        )
        reports.append(report)
        states.append(_router_state(model))
    best = min(range(len(reports)), key=lambda i: reports[i].best)
    _load_router_state(model, states[best])
    return reports[best], reports
