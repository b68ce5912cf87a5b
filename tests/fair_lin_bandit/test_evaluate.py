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

SMALL = {"horizons": [200, 400], "datasets": ["phishing", "synthetic"], "num_arms": 20, "replicates": 1}


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
    assert set(curves) == {"phishing", "synthetic"} and len(curves["synthetic"]) == 100
    assert scores["nash_regret_400"] == scores["rp_0_400"]
    assert scores["rp_0_400"] == pytest.approx(
        (scores["nash_regret_400_phishing"] + scores["nash_regret_400_synthetic"]) / 2
    )
    assert {"rp_m5_200_synthetic", "rp_m5_400_realised", "nash_regret_200"} <= set(scores)


def test_claims_kinds_and_the_per_seed_headroom_gate():
    metrics = {"nash_regret_20k": 0.3, "rp_m5_20k_synthetic": 0.1}
    metrics |= {f"nash_regret_20k_{name}": 0.3 for name in PROTOCOL.settings["datasets"].default}
    metrics |= {f"rp_{tag}_{h}": 0.3 for tag in ("1", "0p5", "0", "m1", "m5") for h in ("2k", "20k")}
    pieces = [{"arm": arm, "seed": s, "scores": dict(metrics)} for arm in PROTOCOL.arms for s in (0, 1, 2)]
    uniform = [p for p in pieces if p["arm"] == "uniform"]
    uniform[1]["scores"]["nash_regret_20k_yeast"] = 0.01  # the mean over seeds stays above 0.05, one seed does not
    result = assemble(PROTOCOL, "fair_lin_bandit.fair_pe", pieces, PROTOCOL.resolve(), seeds=[0, 1, 2])
    found = {claim.id: claim for claim in claims(result)}
    assert found["uniform_headroom"].kind == "headroom" and not found["uniform_headroom"].holds
    # fair_ucb is a method variant: its claims are the paper's too, and the harness accepts them as such
    assert all(c.kind == "paper" and c.arm == "fair_ucb" for i, c in found.items() if i.startswith("fair_ucb"))
    assert "fair_ucb" in result["settings"]["method_variants"] and "oful" in result["settings"]["references"]
    assert all(c.kind == "paper" and c.arm == "fair_pe" for i, c in found.items() if i.startswith("fair_pe"))
