"""FedGR's client-side rules as pure functions: label refining, teacher revision, and the loss terms.

Label refining (per sample i, given the server's clean posterior c_i and the client's ε̂_k):

* before sniffing ends, or when the server's sieve found no separate noisy component (c_i = 1): plain CE on
  the observed label ỹ_i;
* an unflagged sample (c_i ≥ ``clean_threshold``: the sieve is confident the label is clean) keeps ỹ_i in
  every case: refining never relabels it (issue 31; the dev code's ε̂_k ≥ 0.8 branch trained such samples on
  pseudo-labels too);
* a flagged sample with a confident pseudo-label trains on ``c_i·CE(ỹ_i) + (1 - c_i)·CE(ŷ_i)``, or on
  ``CE(ŷ_i)`` alone when ε̂_k ≥ ``high_noise_threshold`` (a client that noisy gets no weight on its flagged
  labels); a flagged sample without a confident pseudo-label is ignored.

L_sr is the mean of these per-sample losses over the samples that are not ignored.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from zoo.fedgr.config import FedGRConfig


@dataclass
class RefinedLabels:
    """Per-sample training targets of L_sr.

    Args:
        observed_weight: ``[n]`` weight of CE on the observed label.
        pseudo_weight: ``[n]`` weight of CE on the pseudo-label.
        pseudo_labels: ``[n]`` the global model's argmax on the weak view.
        keep: ``[n]`` bool, the sample enters L_sr.
    """

    observed_weight: torch.Tensor
    pseudo_weight: torch.Tensor
    pseudo_labels: torch.Tensor
    keep: torch.Tensor

    @property
    def pseudo_fraction(self) -> float:
        """Fraction of samples trained on a pseudo-label."""
        return float((self.keep & (self.pseudo_weight > 0)).float().mean()) if self.keep.numel() else 0.0


def pseudo_labels(global_probs: torch.Tensor, threshold: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Argmax of the global model's class probabilities, and whether its confidence exceeds ``threshold``.

    Args:
        global_probs: ``[n, classes]`` softmax outputs of the global model on the weak view.
        threshold: Confidence a pseudo-label needs (strictly greater).
    """
    confidence, labels = global_probs.max(dim=1)
    return labels, confidence > threshold


def refine_labels(
    global_probs: torch.Tensor,
    clean_probability: torch.Tensor | None,
    noise_estimate: float,
    config: FedGRConfig,
) -> RefinedLabels:
    """The targets of L_sr for a client's samples (see the module docstring).

    Args:
        global_probs: ``[n, classes]`` global model's softmax on the weak view.
        clean_probability: ``[n]`` server posterior c_i, or None before the server has sieved (plain CE).
        noise_estimate: The client's ε̂_k.
        config: FedGR constants.
    """
    labels, confident = pseudo_labels(global_probs, config.pseudo_threshold)
    n = len(labels)
    ones, zeros = torch.ones(n, device=labels.device), torch.zeros(n, device=labels.device)
    if clean_probability is None:
        return RefinedLabels(ones, zeros, labels, torch.ones(n, dtype=torch.bool, device=labels.device))
    c = clean_probability.to(ones)
    flagged = c < config.clean_threshold
    if not config.refine:  # sieving only: flagged samples are dropped
        return RefinedLabels(ones, zeros, labels, ~flagged)
    use_pseudo = flagged & confident
    c_observed = zeros if noise_estimate >= config.high_noise_threshold else c
    observed_weight = torch.where(use_pseudo, c_observed, ones)
    pseudo_weight = torch.where(use_pseudo, 1.0 - c_observed, zeros)
    return RefinedLabels(observed_weight, pseudo_weight, labels, ~flagged | confident)


def sieve_refine_loss(
    logits: torch.Tensor,
    observed: torch.Tensor,
    refined: RefinedLabels,
    index: torch.Tensor | slice = slice(None),
) -> torch.Tensor:
    """L_sr on a mini-batch: weighted CE on observed and pseudo-labels, averaged over kept samples.

    Args:
        logits: ``[b, classes]`` student logits on the strong view.
        observed: ``[b]`` observed labels.
        refined: Targets of the client's samples.
        index: Which samples of ``refined`` the batch holds.
    """
    keep = refined.keep[index].float()
    ce_observed = F.cross_entropy(logits, observed, reduction="none")
    ce_pseudo = F.cross_entropy(logits, refined.pseudo_labels[index], reduction="none")
    per_sample = refined.observed_weight[index] * ce_observed + refined.pseudo_weight[index] * ce_pseudo
    return (keep * per_sample).sum() / keep.sum().clamp_min(1.0)


def softened_kl(target_logits: torch.Tensor, input_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """KL(softmax(target / T) ‖ softmax(input / T)), averaged over the batch.

    Used for L_ema (teacher logits → student logits) and for L_reg (global embeddings → local embeddings).
    """
    target = F.log_softmax(target_logits / temperature, dim=1)
    prediction = F.log_softmax(input_logits / temperature, dim=1)
    return F.kl_div(prediction, target, reduction="batchmean", log_target=True)


@dataclass
class LossWeights:
    """Weights of FedGR's loss terms in one round.

    Args:
        sieved: L_sr uses the server's sieving (False: plain CE on observed labels).
        distill: Weight of L_ema.
        reg: Weight of L_reg.
    """

    sieved: bool
    distill: float
    reg: float


def loss_weights(round_idx: int, config: FedGRConfig) -> LossWeights:
    """Which loss terms are on in round ``round_idx`` (1-based).

    L_sr sieves from the round after sniffing; L_ema is on from ``soft_silent_round``; L_reg from
    ``reg_start_round``. A module switched off by the config has weight 0 throughout.
    """
    return LossWeights(
        sieved=round_idx > config.sniff_rounds,
        distill=config.distill_weight if config.distill and round_idx >= config.soft_silent_round else 0.0,
        reg=config.reg_weight if config.regularise and round_idx >= config.reg_start_round else 0.0,
    )


def teacher_action(
    round_idx: int,
    config: FedGRConfig,
    noise_estimate: float | None,
    pseudo_fraction: float,
    has_teacher: bool,
) -> str:
    """``"reset"`` (EMA ← global) or ``"revise"`` (EMA ← (1 - rate)·EMA + rate·global) at a client round's start.

    The teacher is reset when the client has none yet, before ``soft_silent_round``, or when the client is
    very noisy (ε̂_k > ``high_noise_threshold``) and fewer than ``teacher_reset_pseudo_fraction`` of its
    samples have a confident pseudo-label.
    """
    if not has_teacher or round_idx < config.soft_silent_round:
        return "reset"
    if (
        noise_estimate is not None
        and noise_estimate > config.high_noise_threshold
        and pseudo_fraction < config.teacher_reset_pseudo_fraction
    ):
        return "reset"
    return "revise"


@torch.no_grad()
def lerp_(targets: Iterable[torch.Tensor], sources: Iterable[torch.Tensor], weight: float) -> None:
    """In place, ``t ← (1 - weight)·t + weight·s`` for each pair (EMA updates and teacher revision)."""
    targets, sources = list(targets), list(sources)
    if targets:
        torch._foreach_lerp_(targets, sources, weight)
