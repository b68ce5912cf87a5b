"""Router shift: recording top-k routing decisions, measuring mismatch, and fine-tuning only the routers.

Quantizing experts changes the hidden states that later routers see, so tokens get sent to other experts
("router shift"). :func:`finetune_routers` adapts the routers to the quantized experts: every other parameter is
frozen and the LM loss is minimised on the calibration sequences (GEMQ: AdamW, lr 1e-4, one epoch).
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import torch
from torch import nn

from zoo.quant.moe.api import Calibration, calibration_batches
from zoo.quant.moe.importance import LossFn, causal_lm_loss
from zoo.quant.moe.layout import Detector, find_moe_layers


class RoutingRecorder:
    """Records the top-k expert set of every token at every MoE block while active.

    Use as ``with RoutingRecorder(model) as recorder: model(x)``; ``recorder.routes[l]`` is then ``[tokens, k]``
    (sorted expert ids), batches concatenated.
    """

    def __init__(self, model: nn.Module, detectors: list[Detector] | None = None) -> None:
        self.layers = find_moe_layers(model, detectors)
        self._chunks: list[list[torch.Tensor]] = [[] for _ in self.layers]
        self._handles: list = []

    def __enter__(self) -> RoutingRecorder:
        for i, layer in enumerate(self.layers):

            def hook(_module, args, i=i, layer=layer):
                with torch.no_grad():
                    self._chunks[i].append(layer.route(args[0]).sort(dim=-1).values)

            self._handles.append(layer.router.register_forward_pre_hook(hook))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    @property
    def routes(self) -> list[torch.Tensor]:
        return [torch.cat(chunks) if chunks else torch.empty(0, dtype=torch.long) for chunks in self._chunks]


def routing_mismatch(routes: list[torch.Tensor], reference: list[torch.Tensor]) -> float:
    """Fraction of tokens whose top-k expert set differs from the reference's, averaged over MoE blocks."""
    if len(routes) != len(reference):
        raise ValueError(f"{len(routes)} blocks of routes against {len(reference)} in the reference")
    fractions = [(a != b).any(-1).float().mean().item() for a, b in zip(routes, reference, strict=True)]
    return sum(fractions) / len(fractions)


def router_parameters(model: nn.Module, detectors: list[Detector] | None = None) -> list[nn.Parameter]:
    """The parameters of every MoE router."""
    return [p for layer in find_moe_layers(model, detectors) for p in layer.router.parameters()]


@contextmanager
def only_trainable(model: nn.Module, parameters: list[nn.Parameter]):
    """Freeze every parameter of ``model`` except ``parameters`` for the duration of the block."""
    saved = {p: p.requires_grad for p in model.parameters()}
    keep = {id(p) for p in parameters}
    try:
        for p in model.parameters():
            p.requires_grad_(id(p) in keep)
        yield
    finally:
        for p, flag in saved.items():
            p.requires_grad_(flag)


def finetune_routers(
    model: nn.Module,
    calibration: Calibration,
    *,
    lr: float = 1e-4,
    epochs: int = 1,
    batch_size: int = 8,
    weight_decay: float = 0.0,
    loss_fn: LossFn = causal_lm_loss,
    seed: int = 0,
    detectors: list[Detector] | None = None,
    teacher: nn.Module | None = None,
    distill_weight: float = 0.0,
    route_weight: float = 0.0,
) -> list[float]:
    """Fine-tune only the routers of a (quantized) MoE model on the calibration set, in place.

    Args:
        model: The model.
        calibration: Token ids ``[N, T]`` (shuffled each epoch) or batches.
        lr: AdamW learning rate.
        epochs: Passes over the calibration set.
        batch_size: Sequences per step for a tensor calibration set.
        weight_decay: AdamW weight decay.
        loss_fn: ``(model, batch) -> scalar loss``.
        seed: Seed of the shuffling.
        detectors: Extra MoE-layout detectors.
        teacher: The full-precision model, for the two optional terms below (GEMQ uses neither).
        distill_weight: Weight ``a`` of ``(1 - a) * CE + a * KL(teacher || model)`` on next-token distributions.
        route_weight: Weight of ``sum_l KL(teacher router_l || model router_l)``, which pulls each router's
            distribution over experts back to the teacher's (each on its own hidden states).

    Returns:
        The loss of every step.
    """
    routers = router_parameters(model, detectors)
    optimizer = torch.optim.AdamW(routers, lr=lr, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(seed)
    losses: list[float] = []
    training = model.training
    model.train()
    try:
        with only_trainable(model, routers):
            for _ in range(epochs):
                data = calibration
                if isinstance(calibration, torch.Tensor):
                    data = calibration[torch.randperm(len(calibration), generator=generator)]
                for batch in calibration_batches(data, batch_size):
                    if teacher is None or (distill_weight == 0 and route_weight == 0):
                        loss = loss_fn(model, batch)
                    else:
                        loss = _teacher_loss(model, teacher, batch, distill_weight, route_weight, detectors)
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    optimizer.step()
                    losses.append(loss.item())
    finally:
        model.train(training)
    return losses


def _router_logits(model: nn.Module, batch: torch.Tensor, detectors) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Next-token logits and every router's logits (on the model's own hidden states) for one batch."""
    layers = find_moe_layers(model, detectors)
    captured: list[torch.Tensor] = [None] * len(layers)  # type: ignore[list-item]

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
    return (output.logits if hasattr(output, "logits") else output), captured


def _teacher_loss(model, teacher, batch, distill_weight: float, route_weight: float, detectors) -> torch.Tensor:
    import torch.nn.functional as F

    logits, routers = _router_logits(model, batch, detectors)
    with torch.no_grad():
        teacher.eval()
        teacher_logits, teacher_routers = _router_logits(teacher, batch, detectors)
    vocab = logits.shape[-1]
    student = logits[:, :-1].reshape(-1, vocab).float()
    loss = (1 - distill_weight) * F.cross_entropy(student, batch[:, 1:].reshape(-1))
    if distill_weight:
        target = teacher_logits[:, :-1].reshape(-1, vocab).float().log_softmax(-1)
        loss = loss + distill_weight * F.kl_div(student.log_softmax(-1), target, log_target=True, reduction="batchmean")
    if route_weight:
        for mine, theirs in zip(routers, teacher_routers, strict=True):
            kl = F.kl_div(
                mine.float().log_softmax(-1), theirs.float().log_softmax(-1), log_target=True, reduction="batchmean"
            )
            loss = loss + route_weight * kl / len(routers)
    return loss


@torch.no_grad()
def realign_routers(
    model: nn.Module,
    teacher: nn.Module,
    calibration: Calibration,
    *,
    ridge: float = 1e-3,
    batch_size: int = 16,
    detectors: list[Detector] | None = None,
) -> list[float]:
    """Closed-form router re-alignment (beyond the paper): refit each router so that its logits on the quantized
    model's hidden states match the full-precision router's logits on the full-precision hidden states.

    Layer by layer (each refit changes the hidden states the next router sees), solve the ridge regression
    ``min_W |H_q W^T - Z_fp|^2 + ridge * tr(H_q^T H_q) / d * |W - W_0|^2`` over the calibration tokens, where
    ``Z_fp = H_fp W_fp^T``. Only router weights change.

    Args:
        model: Quantized model (changed in place).
        teacher: Full-precision model with the same architecture.
        calibration: Token ids ``[N, T]`` or batches.
        ridge: Shrinkage towards the current weights, relative to the mean input energy.
        batch_size: Split size for a tensor calibration set.
        detectors: Extra MoE-layout detectors.

    Returns:
        Per layer, the fraction of calibration tokens whose top-k set differed from the teacher's before the refit.
    """
    from zoo.quant.moe.api import capture_inputs

    layers, teacher_layers = find_moe_layers(model, detectors), find_moe_layers(teacher, detectors)
    mismatch = []
    for layer, reference in zip(layers, teacher_layers, strict=True):
        hidden = torch.cat(
            [x.reshape(-1, x.shape[-1]) for x in capture_inputs(model, layer.router, calibration, batch_size)]
        )
        teacher_hidden = torch.cat(
            [x.reshape(-1, x.shape[-1]) for x in capture_inputs(teacher, reference.router, calibration, batch_size)]
        )
        target = reference.router_logits(teacher_hidden).double()
        chosen = layer.route(hidden).sort(-1).values
        mismatch.append(float((chosen != reference.route(teacher_hidden).sort(-1).values).any(-1).float().mean()))
        X = hidden.double()
        gram = X.T @ X
        lam = ridge * gram.diagonal().mean()
        W0 = layer.router.weight.detach().double()
        solution = torch.linalg.solve(
            gram + lam * torch.eye(gram.shape[0], dtype=gram.dtype), X.T @ target + lam * W0.T
        )
        layer.router.weight.copy_(solution.T.to(layer.router.weight.dtype))
    return mismatch


@torch.no_grad()
def lm_metrics(
    model: nn.Module,
    tokens: torch.Tensor,
    *,
    batch_size: int = 32,
    reference_routes: list[torch.Tensor] | None = None,
    detectors: list[Detector] | None = None,
) -> tuple[dict[str, float], list[torch.Tensor]]:
    """Perplexity, next-token top-1 accuracy and routing mismatch of a causal LM on sequences ``[N, T]``.

    Args:
        model: The model (run in eval mode).
        tokens: Token ids ``[N, T]``; every position but the first is predicted.
        batch_size: Sequences per forward.
        reference_routes: Routes of the full-precision model on the same tokens (from a previous call); the
            mismatch is reported when given.
        detectors: Extra MoE-layout detectors.

    Returns:
        ``(metrics, routes)``: ``{"ppl", "accuracy", "nll"[, "routing_mismatch"]}`` and this model's routes.
    """
    training = model.training
    model.eval()
    nll, correct, count = 0.0, 0, 0
    try:
        with RoutingRecorder(model, detectors) as recorder, torch.no_grad():
            for batch in tokens.split(batch_size):
                output = model(batch)
                logits = (output.logits if hasattr(output, "logits") else output)[:, :-1].float()
                targets = batch[:, 1:]
                nll += float(
                    torch.nn.functional.cross_entropy(
                        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum"
                    )
                )
                correct += int((logits.argmax(-1) == targets).sum())
                count += targets.numel()
    finally:
        model.train(training)
    metrics = {"ppl": math.exp(nll / count), "accuracy": correct / count, "nll": nll / count}
    routes = recorder.routes
    if reference_routes is not None:
        metrics["routing_mismatch"] = routing_mismatch(routes, reference_routes)
    return metrics, routes
