"""The DWP rule against hand-computed values, and the spec's unit checks."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from zoo.dwp.dwp import (
    curriculum_sigma,
    dwp_loss,
    dwp_sample_weights,
    perturbable_weights,
    perturbed_accuracy,
    realisation_logits,
    sample_realisations,
)
from zoo.dwp.module import DWPModule


def _logits(k=4, batch=16, classes=10, seed=0):
    return torch.randn(k, batch, classes, generator=torch.Generator().manual_seed(seed)) * 3


def test_sample_weights_by_hand():
    # K = 2 realisations, B = 2 samples, 2 classes, label 0 for both.
    logits = torch.tensor([[[2.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 0.0]]])
    targets = torch.tensor([0, 0])
    alpha, affinity, disagreement = dwp_sample_weights(logits, targets, lam=0.5, temperature=0.5)
    assert affinity.tolist() == [1.0, 0.5]
    p = torch.softmax(logits, -1)
    p_bar = p.mean(0)
    kl = [sum(float((p[k, i] * (p[k, i] / p_bar[i]).log()).sum()) for k in range(2)) / 2 for i in range(2)]
    expected_d = [0.0 + kl[0], 0.5 + kl[1]]
    assert disagreement.tolist() == pytest.approx(expected_d, abs=1e-6)
    soft = [math.exp(d / 0.5) for d in expected_d]
    expected_alpha = [0.5 + 0.5 * 2 * s / sum(soft) for s in soft]
    assert alpha.tolist() == pytest.approx(expected_alpha, abs=1e-6)


def test_mean_alpha_is_one():
    targets = torch.randint(10, (16,), generator=torch.Generator().manual_seed(1))
    for lam, temperature in ((0.5, 0.5), (1.0, 0.1), (0.2, 3.0)):
        alpha, _, _ = dwp_sample_weights(_logits(), targets, lam, temperature)
        assert alpha.mean().item() == pytest.approx(1.0, abs=1e-6)
        assert (alpha >= 1 - lam - 1e-6).all()


def test_lambda_zero_is_noise_injection_averaged_over_k():
    logits = _logits().requires_grad_()
    targets = torch.randint(10, (16,), generator=torch.Generator().manual_seed(2))
    loss, stats = dwp_loss(logits, targets, lam=0.0, temperature=0.5)
    expected = torch.stack([F.cross_entropy(logits[k], targets) for k in range(4)]).mean()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert torch.equal(stats.alpha, torch.ones(16))


def test_alpha_is_detached():
    logits = _logits().requires_grad_()
    targets = torch.randint(10, (16,))
    loss, stats = dwp_loss(logits, targets, lam=0.5, temperature=0.5)
    assert not stats.alpha.requires_grad
    loss.backward()
    # d loss / d logits equals the alpha-weighted CE gradient: alpha enters as a constant.
    manual = logits.detach().clone().requires_grad_()
    ce = F.cross_entropy(manual.reshape(64, 10), targets.repeat(4), reduction="none").view(4, 16)
    (ce * stats.alpha).mean().backward()
    assert torch.allclose(logits.grad, manual.grad, atol=1e-7)


def _small_net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.GroupNorm(2, 4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 26 * 26, 10))


def test_sigma_zero_gives_identical_realisations_and_binary_disagreement():
    net = _small_net()
    params = dict(net.named_parameters())
    perturbed = sample_realisations(params, perturbable_weights(net), 0.0, "additive", 4)
    x = torch.randn(8, 1, 28, 28)
    logits = realisation_logits(net, x, perturbed)
    assert all(torch.equal(logits[0], logits[k]) for k in range(4))
    _, affinity, disagreement = dwp_sample_weights(logits, torch.randint(10, (8,)), 0.5, 0.5)
    assert torch.allclose(disagreement, 1 - affinity, atol=1e-6)
    assert set(disagreement.round().tolist()) <= {0.0, 1.0}


def test_only_linear_and_conv_weights_are_perturbed():
    assert perturbable_weights(_small_net()) == ["0.weight", "4.weight"]


def test_vmap_matches_loop():
    net = _small_net()
    params = dict(net.named_parameters())
    perturbed = sample_realisations(
        params, perturbable_weights(net), 0.3, "additive", 3, torch.Generator().manual_seed(0)
    )
    x = torch.randn(5, 1, 28, 28)
    assert torch.allclose(
        realisation_logits(net, x, perturbed), realisation_logits(net, x, perturbed, vectorize=False), atol=1e-5
    )


def test_batchnorm_backbone_falls_back_to_a_loop():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4 * 26 * 26, 10)).train()
    perturbed = sample_realisations(dict(net.named_parameters()), perturbable_weights(net), 0.2, "additive", 2)
    assert realisation_logits(net, torch.randn(4, 1, 28, 28), perturbed).shape == (2, 4, 10)


def test_training_step_leaves_stored_weights_clean_and_reaches_them():
    module = DWPModule(mode="dwp", backbone="mlp", channels=(32,), sigma_train=0.5, k=3)
    before = {k: v.clone() for k, v in module.state_dict().items()}
    x, y = torch.randn(16, 1, 28, 28), torch.randint(10, (16,))
    loss = module.training_step((x, y), 0)
    assert all(torch.equal(before[k], v) for k, v in module.state_dict().items())
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in module.parameters())


def test_noise_injection_and_standard_steps():
    x, y = torch.randn(16, 1, 28, 28), torch.randint(10, (16,))
    for mode in ("standard", "noise_injection"):
        module = DWPModule(mode=mode, backbone="mlp", channels=(32,))
        assert torch.isfinite(module.training_step((x, y), 0))


def test_curriculum():
    assert curriculum_sigma(0.3, 0, 100, 0.3) == 0.0
    assert curriculum_sigma(0.3, 15, 100, 0.3) == pytest.approx(0.15)
    assert curriculum_sigma(0.3, 90, 100, 0.3) == 0.3
    assert curriculum_sigma(0.3, 0, 100, 0.0) == 0.3


def test_perturbed_accuracy_is_reproducible_and_clean_at_zero():
    net = _small_net().eval()
    batches = [(torch.randn(20, 1, 28, 28), torch.randint(10, (20,)))]
    with torch.no_grad():
        clean = (net(batches[0][0]).argmax(-1) == batches[0][1]).float().mean().item()
    assert perturbed_accuracy(net, batches, 0.0, "additive", [0]) == [pytest.approx(clean)]
    assert perturbed_accuracy(net, batches, 0.5, "additive", [1, 2]) == perturbed_accuracy(
        net, batches, 0.5, "additive", [1, 2]
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "dropout"}, "mode must be one of"),
        ({"k": 1}, "k must be >= 2"),
        ({"noise_form": "uniform"}, "noise_form"),
        ({"backbone": "vgg"}, "unknown backbone"),
        ({"temperature": 0.0}, "temperature > 0"),
        ({"channels": (16, 32, 64)}, "4 stage widths"),
    ],
)
def test_bad_arguments_say_what_to_do(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DWPModule(**kwargs)


def test_eval_images_setting_says_what_to_do(monkeypatch):
    from zoo.dwp.evaluate import DEFAULT_EVAL_IMAGES, eval_images

    monkeypatch.delenv("ZOO_DWP_EVAL_IMAGES", raising=False)
    assert eval_images() == DEFAULT_EVAL_IMAGES
    monkeypatch.setenv("ZOO_DWP_EVAL_IMAGES", "10000")
    assert eval_images() == 10000
    for bad in ("0", "20000", "all"):
        monkeypatch.setenv("ZOO_DWP_EVAL_IMAGES", bad)
        with pytest.raises(ValueError, match="integer from 1 to 10000"):
            eval_images()


def test_criteria_pick_the_most_severe_level_and_can_fail():
    from zoo.dwp.evaluate import SIGMAS, criteria

    def arm(accs):
        values = {f"acc_sigma_{s:g}": a for s, a in zip(SIGMAS, accs, strict=True)}
        return {**values, "drift_range": 0.01, "energy_cim_uJ": 1.0, "energy_digital_uJ": 2.0}

    standard = arm((0.9, 0.8, 0.55, 0.3, 0.1))  # drops >= 30 points from 0.3 on: the most severe such level is 0.7
    injection = arm((0.88, 0.85, 0.8, 0.6, 0.4))
    good = criteria({"dwp": arm((0.89, 0.85, 0.8, 0.6, 0.3)), "standard": standard, "noise_injection": injection})
    assert good["severe_sigma"] == 0.7 and good["dwp_minus_standard_at_severe"] == pytest.approx(0.2)
    assert good["pass_dwp_beats_standard_by_15"] and not good["pass_dwp_within_3_of_noise_injection"]
    bad = criteria({"dwp": arm((0.89, 0.85, 0.8, 0.6, 0.2)), "standard": standard, "noise_injection": injection})
    assert not bad["pass_dwp_beats_standard_by_15"]
