"""The evaluation: every arm is a simulation that records its reward curves for every seed; the claims' kinds."""

from __future__ import annotations

import pytest

import zoo
from zoo._errors import NoPretrainedWeightsError
from zoo._inference import PretrainedMixin
from zoo.eval import Run
from zoo.eval.engine import evaluation, measure_task
from zoo.eval.result import assemble
from zoo.fair_lin_bandit.evaluate import PROTOCOL, claims
from zoo.fair_lin_bandit.module import FairLinBanditModule

SMALL = {"horizons": [200, 400], "datasets": ["phishing", "synthetic_decoy"], "num_arms": 20, "replicates": 1}


def test_module_mixes_in_the_pretrained_hooks_and_has_no_weights():
    assert issubclass(FairLinBanditModule, PretrainedMixin)
    for name in zoo.list_models("fair_lin_bandit"):
        assert zoo.get_entry(name).pretrained_cfg.notes.startswith("A bandit algorithm has no learned weights")
        with pytest.raises(NoPretrainedWeightsError, match="no learned weights"):
            zoo.load(name, pretrained=True)


def test_every_arm_is_simulated_and_records_its_curves_on_any_seed():
    assert all(spec.measure is not None for spec in PROTOCOL.arm_specs)
    run = Run(PROTOCOL, "fair_lin_bandit", 7, PROTOCOL.resolve(SMALL), evaluation("fair_lin_bandit").entries)
    scores = measure_task(PROTOCOL, run, ("fair_ucb",))["fair_ucb"]
    curves = run.extras["reward_curves"]["fair_ucb"]
    assert set(curves) == {"phishing", "synthetic_decoy"} and len(curves["synthetic_decoy"]) == 100
    assert scores["nash_regret_400"] == scores["rp_0_400"]
    assert scores["rp_0_400"] == pytest.approx(
        (scores["nash_regret_400_phishing"] + scores["nash_regret_400_synthetic_decoy"]) / 2
    )
    per_instance = (scores["rp_m5_400_phishing"] + scores["rp_m5_400_synthetic_decoy"]) / 2
    assert scores["rp_m5_400"] == pytest.approx(per_instance)
    assert {"rp_1_200_synthetic_decoy", "rp_m1_400_phishing", "rp_m5_400_realised", "nash_regret_200"} <= set(scores)
    assert scores["active_arms_400"] == 20  # OFUL inside fair_ucb eliminates nothing


def _pieces(seeds=(0, 1, 2)):
    datasets = PROTOCOL.settings["datasets"].default
    metrics = {"nash_regret_20k": 0.3, "active_arms_20k": 200.0}
    metrics |= {f"nash_regret_20k_{name}": 0.3 for name in datasets}
    metrics |= {f"rp_{tag}_20k_{name}": 0.3 for tag in ("1", "m1", "m5") for name in datasets}
    metrics |= {f"rp_{tag}_{h}": 0.3 for tag in ("1", "0p5", "0", "m1", "m5") for h in ("2k", "20k")}
    return [{"arm": arm, "seed": s, "scores": dict(metrics)} for arm in PROTOCOL.arms for s in seeds]


def _claims(pieces, seeds=(0, 1, 2)):
    result = assemble(PROTOCOL, "fair_lin_bandit.fair_pe", pieces, PROTOCOL.resolve(), seeds=list(seeds))
    return {claim.id: claim for claim in claims(result)}


def _set(pieces, arm, metric, values):
    for piece, value in zip((p for p in pieces if p["arm"] == arm), values, strict=True):
        piece["scores"][metric] = value


def test_claims_kinds_and_the_per_seed_headroom_gate():
    pieces = _pieces()
    uniform = [p for p in pieces if p["arm"] == "uniform"]
    uniform[1]["scores"]["nash_regret_20k_yeast_decoy"] = 0.01  # the mean over seeds stays above 0.05, one does not
    found = _claims(pieces)
    assert found["uniform_headroom"].kind == "headroom" and not found["uniform_headroom"].holds
    # fair_ucb is a method variant: its claims are the paper's too, and the harness accepts them as such
    assert all(c.kind == "paper" and c.arm == "fair_ucb" for i, c in found.items() if i.startswith("fair_ucb"))
    result = assemble(PROTOCOL, "fair_lin_bandit.fair_pe", pieces, PROTOCOL.resolve(), seeds=[0, 1, 2])
    assert "fair_ucb" in result["settings"]["method_variants"] and "oful" in result["settings"]["references"]
    assert result["settings"]["baselines"] == ["linnash"] and "linnash_published" in result["settings"]["references"]
    assert all(c.kind == "paper" and c.arm == "fair_pe" for i, c in found.items() if i.startswith("fair_pe"))
    assert found["linnash_eliminates"].kind == "validity" and not found["linnash_eliminates"].holds  # 200 of 200


def test_oful_headroom_gate_fails_on_one_instance_and_seed():
    pieces = _pieces()
    for name in PROTOCOL.settings["datasets"].default:
        _set(pieces, "oful", f"rp_1_20k_{name}", [0.05] * 3)
        _set(pieces, "oful", f"rp_m5_20k_{name}", [0.5] * 3)
    assert _claims(pieces)["oful_rp_m5_headroom"].holds  # ratio 10 everywhere
    _set(pieces, "oful", "rp_m5_20k_phishing_decoy", [0.5, 0.09, 0.5])  # seed 1: ratio 1.8 on one instance
    gate = _claims(pieces)["oful_rp_m5_headroom"]
    assert gate.kind == "headroom" and not gate.holds and gate.value == pytest.approx(1.8)


def test_not_above_oful_within_the_spread_by_hand():
    pieces = _pieces()
    _set(pieces, "oful", "nash_regret_20k", [0.10, 0.10, 0.10])
    # excess of fair_ucb over oful per seed: 0.01, 0.03, -0.01: mean 0.01, sample std 0.02 -> 0.01 - 0.02 <= 0
    _set(pieces, "fair_ucb", "nash_regret_20k", [0.11, 0.13, 0.09])
    # fair_pe: 0.05, 0.06, 0.04 above: mean 0.05, std 0.01 -> 0.04 > 0, it is above
    _set(pieces, "fair_pe", "nash_regret_20k", [0.15, 0.16, 0.14])
    found = _claims(pieces)
    ucb, pe = found["fair_ucb_not_above_oful_nash_regret_20k"], found["fair_pe_not_above_oful_nash_regret_20k"]
    assert ucb.holds and ucb.value == pytest.approx(-0.01) and ucb.kind == "paper" and ucb.versus == "oful"
    assert not pe.holds and pe.value == pytest.approx(0.04)


def test_rp_m5_count_and_phase1_helps_count_instances_beyond_the_spread():
    pieces = _pieces()
    datasets = PROTOCOL.settings["datasets"].default
    for name in datasets[:3]:  # fair_ucb below oful by 0.2 +- 0.01 on three instances
        _set(pieces, "fair_ucb", f"rp_m5_20k_{name}", [0.09, 0.10, 0.11])
    _set(pieces, "fair_ucb", f"rp_m5_20k_{datasets[3]}", [0.0, 0.6, 0.3])  # below on the mean, not beyond spread
    found = _claims(pieces)
    assert found["fair_ucb_rp_m5_below_oful"].value == 3 and found["fair_ucb_rp_m5_below_oful"].holds
    assert found["fair_pe_rp_m5_below_oful"].value == 0 and not found["fair_pe_rp_m5_below_oful"].holds
    assert not found["fair_pe_phase1_helps"].holds
    _set(pieces, "fair_pe", f"rp_m1_20k_{datasets[4]}", [0.1, 0.12, 0.11])
    assert _claims(pieces)["fair_pe_phase1_helps"].value == 1
