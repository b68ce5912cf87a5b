"""FedGR's client-side rules against hand-computed values: pseudo-labels, refined targets, loss terms,
the loss weights per round, and the EMA teacher's reset / revision."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from zoo.fedgr.client import TEACHER_PREFIX, ClientTask, FedGRTrainer
from zoo.fedgr.config import FedGRConfig, LocalConfig, RunConfig
from zoo.fedgr.federation import ClientData
from zoo.fedgr.net import seeded_model
from zoo.fedgr.revise import (
    LossWeights,
    lerp_,
    loss_weights,
    pseudo_labels,
    refine_labels,
    sieve_refine_loss,
    softened_kl,
    teacher_action,
)

CFG = FedGRConfig(sniff_rounds=10, soft_silent_round=10)  # thresholds 0.5 / 0.9 / 0.8 (the defaults)
PROBS = torch.tensor([[0.95, 0.05], [0.03, 0.97], [0.6, 0.4], [0.1, 0.9]])


def test_pseudo_labels_need_confidence_strictly_above_the_threshold():
    labels, confident = pseudo_labels(PROBS, 0.9)
    assert labels.tolist() == [0, 1, 0, 1]
    assert confident.tolist() == [True, True, False, False]  # 0.9 is not > 0.9


def test_refined_targets_hand_computed():
    clean = torch.tensor([0.8, 0.3, 0.2, 0.6])
    refined = refine_labels(PROBS, clean, noise_estimate=0.4, config=CFG)
    # sample 0: unflagged -> own label; 1: flagged + confident -> 0.3 own + 0.7 pseudo;
    # 2: flagged, not confident -> ignored; 3: unflagged -> own label
    assert refined.observed_weight.tolist() == pytest.approx([1.0, 0.3, 1.0, 1.0])
    assert refined.pseudo_weight.tolist() == pytest.approx([0.0, 0.7, 0.0, 0.0])
    assert refined.keep.tolist() == [True, True, False, True]
    assert refined.pseudo_fraction == 0.25


def test_refined_targets_for_very_noisy_clients_sniffing_and_sieving_only():
    clean = torch.tensor([0.8, 0.3, 0.2, 0.6])
    # >= 0.8: flagged samples train on pseudo-labels only; unflagged ones (0 and 3) keep their own labels
    noisy_client = refine_labels(PROBS, clean, noise_estimate=0.8, config=CFG)
    assert noisy_client.observed_weight.tolist() == [1, 0, 1, 1]
    assert noisy_client.pseudo_weight.tolist() == [0, 1, 0, 0]
    assert noisy_client.keep.tolist() == [True, True, False, True]
    sniffing = refine_labels(PROBS, None, noise_estimate=0.0, config=CFG)  # no sieve yet: plain CE
    assert sniffing.observed_weight.tolist() == [1, 1, 1, 1] and sniffing.keep.all()
    sieve_only = refine_labels(PROBS, clean, 0.4, FedGRConfig(refine=False))
    assert sieve_only.keep.tolist() == [True, False, False, True] and sieve_only.pseudo_weight.sum() == 0


@pytest.mark.parametrize("noise_estimate", [0.0, 0.4, 0.8, 1.0])
def test_refining_leaves_a_confident_clean_sample_unchanged(noise_estimate):
    """Issue 31: a sample the sieve calls clean (c_i >= 0.5) keeps its observed label, however confident the
    global model is in another class and however noisy the client is estimated to be."""
    probs = torch.tensor([[0.99, 0.01], [0.02, 0.98]])  # the global model is sure of class 0, then class 1
    observed = torch.tensor([1, 0])  # both observed labels disagree with it
    refined = refine_labels(probs, torch.tensor([0.97, 0.5]), noise_estimate, CFG)
    assert refined.keep.tolist() == [True, True]
    assert refined.observed_weight.tolist() == [1.0, 1.0] and refined.pseudo_weight.tolist() == [0.0, 0.0]
    logits = torch.tensor([[0.0, 3.0], [1.0, -1.0]])
    expected = torch.nn.functional.cross_entropy(logits, observed)  # plain CE on the observed labels
    assert sieve_refine_loss(logits, observed, refined).item() == pytest.approx(expected.item(), rel=1e-6)


def test_sieve_refine_loss_hand_computed():
    clean = torch.tensor([0.8, 0.3, 0.2, 0.6])
    refined = refine_labels(PROBS, clean, 0.4, CFG)
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [5.0, 0.0], [0.0, 0.0]])
    observed = torch.tensor([0, 0, 1, 1])

    def ce(z, y):
        return math.log(math.exp(z[0]) + math.exp(z[1])) - z[y]

    expected = (ce([2, 0], 0) + 0.3 * ce([0, 1], 0) + 0.7 * ce([0, 1], 1) + ce([0, 0], 1)) / 3
    assert sieve_refine_loss(logits, observed, refined).item() == pytest.approx(expected, rel=1e-6)
    index = torch.tensor([2])  # a batch of ignored samples contributes nothing
    assert sieve_refine_loss(logits[index], observed[index], refined, index).item() == 0.0


def test_softened_kl_hand_computed():
    target = torch.tensor([[0.0, 0.0]])
    prediction = torch.tensor([[math.log(3.0) * 0.5, 0.0]])  # at T=0.5: softmax = [0.75, 0.25]
    expected = 0.5 * math.log(0.5 / 0.75) + 0.5 * math.log(0.5 / 0.25)
    assert softened_kl(target, prediction, 0.5).item() == pytest.approx(expected, rel=1e-6)
    assert softened_kl(prediction, prediction, 0.5).item() == pytest.approx(0.0, abs=1e-7)


def test_loss_terms_are_zero_weighted_before_their_start_rounds():
    assert loss_weights(9, CFG) == LossWeights(sieved=False, distill=0.0, reg=0.1)
    assert loss_weights(10, CFG).distill == 1.0 and not loss_weights(10, CFG).sieved
    assert loss_weights(11, CFG).sieved
    assert loss_weights(1, FedGRConfig(reg_start_round=5)).reg == 0.0
    ablated = FedGRConfig(distill=False, regularise=False)
    assert loss_weights(30, ablated) == LossWeights(sieved=True, distill=0.0, reg=0.0)


def test_teacher_reset_and_revise_rules():
    assert teacher_action(12, CFG, 0.5, 1.0, has_teacher=False) == "reset"  # first visit
    assert teacher_action(9, CFG, 0.5, 1.0, has_teacher=True) == "reset"  # before the soft silent round
    assert teacher_action(10, CFG, 0.5, 0.1, has_teacher=True) == "revise"
    assert teacher_action(12, CFG, 0.85, 0.4, has_teacher=True) == "reset"  # very noisy, few pseudo-labels
    assert teacher_action(12, CFG, 0.85, 0.6, has_teacher=True) == "revise"
    assert teacher_action(12, CFG, None, 0.0, has_teacher=True) == "revise"


def test_lerp_is_the_ema_rule():
    target, source = [torch.tensor([1.0, -2.0])], [torch.tensor([3.0, 0.0])]
    lerp_(target, source, 0.1)  # 0.9 * t + 0.1 * s
    assert target[0].tolist() == pytest.approx([1.2, -1.8])


def _trainer(**fedgr):
    data = ClientData(0, np.arange(8), np.zeros((8, 28, 28), np.uint8), np.zeros(8, np.int64))
    run = RunConfig(local=LocalConfig(epochs=0), fedgr=FedGRConfig(**fedgr))
    return FedGRTrainer(data, run)


def test_trainer_revises_the_teacher_as_ninety_percent_ema_plus_ten_percent_global():
    trainer = _trainer()
    global_state = seeded_model(1).state_dict()
    old_teacher = {TEACHER_PREFIX + k: v for k, v in seeded_model(2).state_dict().items()}
    task = ClientTask(client_id=0, round_idx=12, seed=0, clean_probability=np.ones(8), noise_estimate=0.1)
    _, state = trainer.fit(global_state, task, dict(old_teacher))  # no local step: only the revision
    for key, value in global_state.items():
        expected = 0.9 * old_teacher[TEACHER_PREFIX + key] + 0.1 * value
        torch.testing.assert_close(state[TEACHER_PREFIX + key], expected)
    task.round_idx = 5  # before the soft silent round: reset to the global model
    _, state = trainer.fit(global_state, task, dict(old_teacher))
    assert all(torch.equal(state[TEACHER_PREFIX + k], v) for k, v in global_state.items())


def test_trainer_keeps_a_running_mean_of_uploaded_losses():
    trainer = _trainer(loss_momentum=0.5)
    global_state = seeded_model(1).state_dict()
    task = ClientTask(client_id=0, round_idx=1, seed=0, upload_losses=True)
    first, state = trainer.fit(global_state, task, None)
    assert first.sample_ids.tolist() == list(range(8))
    state["loss_mean"] = torch.full((8,), 4.0)  # pretend an earlier visit saw loss 4
    second, _ = trainer.fit(global_state, task, state)
    np.testing.assert_allclose(second.loss_mean, 0.5 * 4.0 + 0.5 * first.loss_mean, rtol=1e-6)
