"""The DWP training rule and the mismatch evaluation, in plain torch (no Lightning).

DWP (Diversity-aware Weight Perturbation) trains a network whose weights will be perturbed on a
compute-in-memory chip. At every step it draws K weight-noise realisations, runs the batch through each
(``torch.func.functional_call``, in a loop or one ``vmap``), measures per sample how often the
perturbed networks are right (affinity) and how much they disagree, and up-weights the samples that the
perturbed networks get wrong or disagree on. Gradients reach the clean weights through every realisation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap

from zoo.quant.cim.layers import CIMLayer
from zoo.quant.cim.noise import mismatch_noise

MODES = ("standard", "noise_injection", "dwp")


@dataclass
class DWPStats:
    """Per-batch diagnostics of a DWP step (all detached).

    Args:
        alpha: Sample weights ``[B]`` (mean 1).
        affinity: Fraction of realisations that classify each sample correctly ``[B]``.
        disagreement: ``(1 - affinity) + mean_k KL(p_k || p_mean)`` per sample ``[B]``.
    """

    alpha: torch.Tensor
    affinity: torch.Tensor
    disagreement: torch.Tensor


def perturbable_weights(model: nn.Module) -> list[str]:
    """Names of the parameters a CIM chip stores in crossbars: the weights of Linear/Conv2d (or CIM) layers.

    Biases, normalisation and embedding parameters are digital on a CIM chip and are not perturbed.
    """
    names = []
    for module_name, module in model.named_modules():
        if isinstance(module, nn.Linear | nn.Conv2d | CIMLayer):
            names.append(f"{module_name}.weight" if module_name else "weight")
    return names


def sample_realisations(
    params: dict[str, torch.Tensor],
    names: Iterable[str],
    sigma: float,
    form: str,
    k: int,
    generator: torch.Generator | None = None,
) -> dict[str, torch.Tensor]:
    """K perturbed copies of the named parameters, stacked on a new leading dimension.

    Each copy is ``w + delta`` with a detached ``delta`` (see :func:`zoo.quant.cim.noise.mismatch_noise`), so
    gradients flow to the clean ``w``.

    Args:
        params: The model's parameters by name.
        names: Which of them to perturb.
        sigma: Mismatch level.
        form: ``"additive"`` (max-scaled per layer) or ``"multiplicative"``.
        k: Number of realisations.
        generator: Random generator (None: the global one).

    Returns:
        ``{name: tensor [k, *shape]}`` for the perturbed names only.
    """
    stacked = {}
    for name in names:
        weight = params[name]
        deltas = torch.stack([mismatch_noise(weight, sigma, form, generator) for _ in range(k)])
        stacked[name] = weight.unsqueeze(0) + deltas
    return stacked


def has_running_stats(model: nn.Module) -> bool:
    """Whether the model updates buffers in training (BatchNorm), which vmap cannot batch in place."""
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats for m in model.modules())


def realisation_logits(
    model: nn.Module, x: torch.Tensor, perturbed: dict[str, torch.Tensor], vectorize: bool = True
) -> torch.Tensor:
    """Logits of every realisation, ``[K, B, C]``: one vmap over ``functional_call``, or a loop.

    Args:
        model: The network (its other parameters and buffers are shared by all realisations).
        x: Input batch.
        perturbed: Stacked perturbed parameters from :func:`sample_realisations`.
        vectorize: Use ``torch.func.vmap``; falls back to a loop for models with BatchNorm running statistics.
    """
    if vectorize and not has_running_stats(model):
        return vmap(lambda p: functional_call(model, p, (x,)), randomness="different")(perturbed)
    k = next(iter(perturbed.values())).shape[0]
    return torch.stack([functional_call(model, {n: v[i] for n, v in perturbed.items()}, (x,)) for i in range(k)])


def dwp_sample_weights(
    logits: torch.Tensor, targets: torch.Tensor, lam: float, temperature: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Affinity, disagreement and the adaptive sample weights of the DWP rule (all detached).

    ``a_i = mean_k 1[argmax p_ik = y_i]``; ``d_i = (1 - a_i) + mean_k KL(p_ik || p_bar_i)``;
    ``alpha_i = (1 - lam) + lam * B * softmax_i(d_i / T)``, so ``mean_i alpha_i = 1``.

    Args:
        logits: ``[K, B, C]`` logits of the K realisations.
        targets: ``[B]`` class labels.
        lam: Mixing weight of the adaptive part (0: uniform weights).
        temperature: Softmax temperature over the batch.

    Returns:
        ``(alpha, affinity, disagreement)``, each ``[B]``.
    """
    logits = logits.detach()
    log_p = F.log_softmax(logits, dim=-1)
    affinity = (logits.argmax(-1) == targets.unsqueeze(0)).float().mean(0)
    log_p_bar = torch.logsumexp(log_p, dim=0) - torch.log(torch.tensor(float(logits.shape[0])))
    kl = (log_p.exp() * (log_p - log_p_bar.unsqueeze(0))).sum(-1).clamp(min=0).mean(0)
    disagreement = (1 - affinity) + kl
    batch = targets.shape[0]
    alpha = (1 - lam) + lam * batch * torch.softmax(disagreement / temperature, dim=0)
    return alpha, affinity, disagreement


def dwp_loss(
    logits: torch.Tensor, targets: torch.Tensor, lam: float, temperature: float
) -> tuple[torch.Tensor, DWPStats]:
    """``L = mean_k mean_i alpha_i CE(p_ik, y_i)`` with detached DWP weights ``alpha``.

    Args:
        logits: ``[K, B, C]`` logits of the K realisations (with gradients).
        targets: ``[B]`` class labels.
        lam: Mixing weight of the adaptive part.
        temperature: Softmax temperature over the batch.
    """
    alpha, affinity, disagreement = dwp_sample_weights(logits, targets, lam, temperature)
    k, batch, classes = logits.shape
    ce = F.cross_entropy(logits.reshape(k * batch, classes), targets.repeat(k), reduction="none").view(k, batch)
    return (ce * alpha.unsqueeze(0)).mean(), DWPStats(alpha, affinity, disagreement)


def curriculum_sigma(sigma: float, step: int, total_steps: int, warmup_fraction: float) -> float:
    """Linear ramp of the training mismatch from 0 to ``sigma`` over the first ``warmup_fraction`` of steps."""
    if warmup_fraction <= 0 or total_steps <= 0:
        return sigma
    return sigma * min(1.0, step / (warmup_fraction * total_steps))


@torch.no_grad()
def perturbed_accuracy(
    model: nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    sigma: float,
    form: str,
    seeds: Iterable[int],
) -> list[float]:
    """Accuracy of the model under fixed mismatch draws, one per seed (each draw is one chip for all inputs).

    Args:
        model: The network, in eval mode.
        batches: ``(x, y)`` batches; iterated once per draw.
        sigma: Mismatch level (0 evaluates the clean model once per seed).
        form: ``"additive"`` or ``"multiplicative"``.
        seeds: One draw per seed.

    Returns:
        The accuracy of every draw.
    """
    batches = list(batches)
    params = dict(model.named_parameters())
    names = perturbable_weights(model)
    results = []
    for seed in seeds:
        generator = torch.Generator().manual_seed(int(seed))
        drawn = {n: params[n] + mismatch_noise(params[n], sigma, form, generator) for n in names}
        correct = total = 0
        for x, y in batches:
            logits = functional_call(model, drawn, (x,))
            correct += (logits.argmax(-1) == y).sum().item()
            total += y.numel()
        results.append(correct / max(total, 1))
    return results
