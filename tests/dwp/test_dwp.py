"""The DWP rule against hand-computed values, and the spec's unit checks."""

from __future__ import annotations

import math
import re

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


def _eval_run(**overrides):
    from zoo.dwp.evaluate import PROTOCOL
    from zoo.eval import Run
    from zoo.eval.engine import evaluation

    return Run(PROTOCOL, "dwp", 0, PROTOCOL.resolve(overrides), evaluation("dwp").entries)


def measure(arm, run):
    from zoo.dwp.evaluate import PROTOCOL
    from zoo.eval.engine import measure_task

    return measure_task(PROTOCOL, run, (arm,))[arm]


def test_set_mismatch_and_sigmas_change_what_is_measured(monkeypatch):
    from zoo.dwp import evaluate

    # one programming, two times: the chip simulation of the wide backbone is the slow part of this test
    monkeypatch.setattr(evaluate, "PROGRAMMINGS", 1)
    monkeypatch.setattr(evaluate, "DRIFT_TIMES", {"1s": 1.0, "1y": 365 * 86400.0})

    cheap = {"eval_images": 20, "draws": 1, "sigmas": [0.7]}
    scores = measure("reference_untrained", _eval_run(mismatch="multiplicative", **cheap))
    sweep = sorted(k for k in scores if "sigma" in k)
    assert sweep == ["acc_mult_sigma_0", "acc_mult_sigma_0.7"]
    both = measure("reference_untrained", _eval_run(mismatch="both", **cheap))
    assert {"acc_sigma_0.7", "acc_mult_sigma_0.7"} <= set(both) and "acc_sigma_0.3" not in both
    assert {"acc_drift_1y", "drift_range", "energy_cim_uJ"} <= set(scores)


def test_bad_settings_are_one_line_errors():
    from zoo._errors import ZooError
    from zoo.dwp.evaluate import PROTOCOL

    for pairs, message in (
        (["colour=red"], "unknown setting 'colour'; valid keys: mismatch, sigmas, draws, eval_images"),
        (["mismatch=lognormal"], "expected one of additive, multiplicative, both"),
        (["eval_images=all"], "expected an integer"),
        (["draws=0"], "must be at least 1"),
        (["sigmas=0.2,-0.1"], "must be at least 0"),
    ):
        with pytest.raises(ZooError, match=re.escape(message)) as error:
            PROTOCOL.parse_overrides(pairs)  # what `zoo eval dwp --set ...` does first
        assert "\n" not in str(error.value)
    with pytest.raises(ZooError, match="the test split has 10000 images"):
        measure("reference_untrained", _eval_run(eval_images=20000))


def _result(accs: dict[str, tuple[float, ...]], sigmas=(0.1, 0.2, 0.3, 0.5, 0.7), seeds=3, drift=0.01, year=None):
    """A three-seed eval result with the given additive-sweep accuracies (levels 0, *sigmas) per arm."""
    from zoo.eval.result import summarise

    per_seed = {}
    for arm, values in accs.items():
        scores = {f"acc_sigma_{s:g}": a for s, a in zip((0.0, *sigmas), values, strict=True)}
        scores.update(drift_range=drift, energy_cim_uJ=1.0, energy_digital_int8_uJ=2.0)
        scores["acc_drift_1y"] = (year or {}).get(arm, values[0])
        # a small, seed-dependent wobble so the paired gains have a spread
        per_seed[arm] = {str(i): {k: v + 0.001 * i for k, v in scores.items()} for i in range(seeds)}
    arms = {arm: summarise(runs) for arm, runs in per_seed.items()}
    return {"settings": {"mismatch": "additive", "sigmas": list(sigmas)}, "arms": arms, "per_seed": per_seed}


_ACCS = {
    #                        0     0.1   0.2   0.3   0.5   0.7
    "standard": (0.90, 0.85, 0.58, 0.30, 0.10, 0.10),  # first lost 30 points at 0.2 (0.32), not 0.1 (0.05)
    "noise_injection": (0.89, 0.88, 0.80, 0.60, 0.30, 0.15),
    "noise_injection_k4": (0.88, 0.88, 0.81, 0.62, 0.32, 0.16),
    "dwp_no_diversity": (0.88, 0.88, 0.80, 0.61, 0.31, 0.15),
    "reference_untrained": (0.1,) * 6,
    "reference_class_means": (0.7, 0.69, 0.68, 0.67, 0.66, 0.64),
}


def test_severe_level_is_the_first_at_which_standard_lost_30_points():
    from zoo.dwp.evaluate import claims, severe_level

    result = _result({**_ACCS, "dwp": (0.885, 0.88, 0.84, 0.63, 0.35, 0.2)})
    assert severe_level(result, "acc_sigma") == (0.2, True)
    found = {c.id: c for c in claims(result)}
    assert found["dwp_beats_standard_acc_sigma_0.2"].value == pytest.approx(0.26)
    assert found["dwp_beats_standard_acc_sigma_0.2"].holds
    assert "first level at which standard training lost 30 points" in found["dwp_beats_standard_acc_sigma_0.2"].text
    assert "dwp_beats_standard_acc_sigma_0.7" not in found  # the old choice (the most severe level) is gone
    assert found["dwp_clean_within_2_of_standard"].holds  # 1.5 points below
    assert found["dwp_beats_noise_injection_k4_acc_sigma_0.2"].holds  # 3 points ahead at the severe level
    assert found["dwp_at_least_noise_injection_k4_every_acc_sigma"].holds
    assert found["dwp_beats_dwp_no_diversity_acc_sigma_0.2"].holds
    assert found["dwp_1y_at_least_standard"].holds is False  # 0.885 < 0.90
    # standard never loses 30 points: the largest level, and the claim text says so
    mild = {**_ACCS, "standard": (0.9, 0.89, 0.88, 0.8, 0.7, 0.65), "dwp": (0.9,) * 6}
    mild_result = _result(mild)
    assert severe_level(mild_result, "acc_sigma") == (0.7, False)
    assert "never lost 30 points" in {c.id: c for c in claims(mild_result)}["dwp_beats_standard_acc_sigma_0.7"].text


def test_claims_can_fail():
    from zoo.dwp.evaluate import claims

    # clean accuracy bought with robustness, and no lead over the compute-matched arms
    bad = {c.id: c for c in claims(_result({**_ACCS, "dwp": (0.85, 0.86, 0.81, 0.62, 0.31, 0.15)}, drift=0.05))}
    assert not bad["dwp_clean_within_2_of_standard"].holds
    assert not bad["dwp_at_least_noise_injection_k4_every_acc_sigma"].holds  # 4 points below clean
    assert not bad["dwp_beats_noise_injection_k4_acc_sigma_0.2"].holds
    assert not bad["dwp_beats_dwp_no_diversity_acc_sigma_0.2"].holds  # 1 point < 2
    assert not bad["dwp_drift_range"].holds
    assert bad["cim_over_int8_digital_energy"].holds


def test_tuned_values_are_the_recipes_and_the_k4_arm():
    """The recipes and noise_injection_k4's overrides carry the validation choice of zoo/dwp/tuning.json."""
    import json

    import yaml

    from zoo.dwp.evaluate import PROTOCOL, TUNING_FILE, k4_overrides

    state = json.loads(TUNING_FILE.read_text())
    chosen = state["selection"]["chosen"]
    assert {t["arm"] for t in state["trials"]} == {"dwp", "standard", "noise_injection", "noise_injection_k4"}
    trials = {arm: sum(t["arm"] == arm for t in state["trials"]) for arm in chosen}
    assert len(set(trials.values())) == 1, f"every tuned arm gets the same budget: {trials}"
    for arm, recipe in (("dwp", "fashion_mnist"), ("noise_injection", "noise_injection"), ("standard", "standard")):
        with open(f"recipes/dwp/{recipe}.yaml") as handle:
            args = yaml.safe_load(handle)["model"]["init_args"]
        assert {key: args[key] for key in chosen[arm]} == chosen[arm], recipe
    k4 = PROTOCOL.arm("noise_injection_k4")
    assert k4.base == "noise_injection" and k4.fit_overrides(None) == k4_overrides()
    # the values the card's noise_injection_k4 was trained with
    assert dict(arg[2:].split("=") for arg in k4_overrides()) == {
        "model.init_args.k": "4",
        "model.init_args.sigma_train": "0.1",
        "model.init_args.curriculum": "0.0",
        "model.init_args.lr": "0.01",
    }
    ablation = PROTOCOL.arm("dwp_no_diversity")
    assert (ablation.base, tuple(ablation.overrides)) == ("dwp", ("--model.init_args.lam=0.0",))


def test_matched_precision_energy_constants():
    from zoo.dwp.energy import INT8_MAC_PJ, digital_energy_model, matched_precision_energy
    from zoo.quant.cim import EnergyModel

    assert pytest.approx(0.3) == INT8_MAC_PJ  # Horowitz 2014: 0.2 pJ 8-bit multiply + 0.1 pJ 32-bit add
    int8, fp32 = digital_energy_model(8), digital_energy_model(32)
    assert (int8.sram_word_pj, int8.dram_word_pj) == (pytest.approx(1.25), pytest.approx(160.0))
    default = EnergyModel()  # fp32 equals zoo.quant.cim's Horowitz defaults
    assert (fp32.digital_mac_pj, fp32.sram_word_pj, fp32.dram_word_pj) == pytest.approx(
        (default.digital_mac_pj, default.sram_word_pj, default.dram_word_pj)
    )
    with pytest.raises(ValueError, match="8 \\(int8\\) or 32"):
        digital_energy_model(16)
    energy = matched_precision_energy(DWPModule(backbone="mlp", channels=(32,)).net)
    assert 0 < energy["energy_cim_uJ"] < energy["energy_digital_int8_uJ"] < energy["energy_digital_fp32_uJ"]
    assert energy["energy_adc_breakeven_pJ"] > 2.0  # the assumed 2 pJ per conversion is below break-even


def test_noise_injection_k4_is_dwp_without_diversity():
    """Same seed, same draws: noise injection with K = 4 and DWP with lambda = 0 compute the same loss."""
    x, y = torch.randn(16, 1, 28, 28), torch.randint(10, (16,))
    losses = []
    for mode in ("noise_injection", "dwp"):
        torch.manual_seed(0)
        module = DWPModule(mode=mode, backbone="mlp", channels=(32,), k=4, lam=0.0, curriculum=0.0)
        torch.manual_seed(1)
        losses.append(module.training_step((x, y), 0))
    assert torch.equal(losses[0], losses[1])


def test_the_figure_draws_every_validation_trial_of_tuning_json():
    """The trade-off panel reads the trials from zoo/dwp/tuning.json (no copy of them travels in the extras)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from zoo.dwp.evaluate import TUNED, plot
    from zoo.eval.engine import evaluation
    from zoo.eval.published import published_result

    fig, axes = plt.subplots(1, 5)
    try:
        plot(published_result(evaluation("dwp")), list(axes))
        drawn = sum(len(points.get_offsets()) for points in axes[3].collections)
    finally:
        plt.close(fig)
    assert drawn == len(TUNED["trials"]) == 4 * 9
