"""The harness's claim arithmetic (zoo.eval.claims): thresholds reached exactly hold, misses fail."""

import pytest

from zoo.eval import Claim, beats


def test_a_gap_of_exactly_the_threshold_holds_despite_float_rounding():
    gap = 0.35 - 0.25  # 0.09999999999999998 in floats
    assert gap < 0.10
    assert Claim.at_least("gap", "gap >= 0.10", gap, 0.10).holds
    assert Claim.at_most("ratio", "ratio <= 0.3", 0.1 + 0.2, 0.3).holds  # 0.30000000000000004


@pytest.mark.parametrize("miss", [1e-6, 1e-3])
def test_a_real_miss_still_fails(miss):
    assert not Claim.at_least("gap", "gap >= 0.10", 0.10 - miss, 0.10).holds
    assert not Claim.at_most("ratio", "ratio <= 0.3", 0.3 + miss, 0.3).holds
    assert not Claim.at_least("big", "x >= 1000", 1000 - 1e-3, 1000).holds


def test_beats_at_exactly_the_margin_holds_and_inside_the_seed_spread_fails():
    def result(arm_scores, other_scores):
        seeds = range(len(arm_scores))
        return {
            "per_seed": {
                "a": {s: {"acc": v} for s, v in zip(seeds, arm_scores, strict=True)},
                "b": {s: {"acc": v} for s, v in zip(seeds, other_scores, strict=True)},
            }
        }

    exact = beats(result([0.35, 0.45, 0.55], [0.25, 0.35, 0.45]), "acc", "a", "b", margin=0.10)
    assert exact.holds and exact.value == pytest.approx(0.10)
    noisy = beats(result([0.9, 0.5, 0.7], [0.5, 0.6, 0.6]), "acc", "a", "b", margin=0.0)  # gains 0.4, -0.1, 0.1
    assert not noisy.holds


def test_strict_thresholds_written_one_nano_off_stay_strict():
    # Evaluations state "below 1" or "above 0" as thresholds 1 - 1e-9 or 1e-9 (pbsac, aporia, fair_lin_bandit):
    # the float allowance must stay far below that.
    assert not Claim.at_most("iid_lower", "coverage < 1", 1.0, 1 - 1e-9).holds
    assert not Claim.at_least("positive", "gain > 0", 0.0, 1e-9).holds
    assert Claim.at_least("positive", "gain > 0", 2e-9, 1e-9).holds


def _two_arm_result(method_values, other_values, method="m"):
    per_seed = {
        method: {str(s): {"acc": v} for s, v in enumerate(method_values)},
        "ref": {str(s): {"acc": v} for s, v in enumerate(other_values)},
    }
    from zoo.eval.result import summarise

    return {"per_seed": per_seed, "arms": {arm: summarise(runs) for arm, runs in per_seed.items()}}


def test_a_gate_fails_when_one_unit_fails_although_the_mean_passes():
    units = {"dataset 0": 0.765, "dataset 1": 0.809, "dataset 2": 0.776}  # mean 0.783 <= 0.80
    gate = Claim.gate("majority_headroom", "majority vote <= 0.80", units, 0.80, at_most=True)
    assert gate.kind == "headroom" and not gate.holds and gate.value == pytest.approx(0.809)
    assert "dataset 1 0.809" in gate.text
    assert Claim.gate("ok", "x <= 0.81", units, 0.81, at_most=True).holds
    assert not Claim.gate("low", "x >= 0.77", units, 0.77).holds and Claim.gate("hi", "x >= 0.7", units, 0.7).holds


def test_claim_kinds_are_checked_and_a_paper_claim_must_involve_the_method():
    from zoo._errors import ZooError
    from zoo.eval.result import _check_claims

    with pytest.raises(ZooError, match="kind 'result'"):
        Claim("x", "x", 1.0, 0.0, True, kind="result")
    result = _two_arm_result([0.9, 0.91, 0.92], [0.5, 0.5, 0.5])
    result["settings"] = {"method": "m", "references": ["ref"]}
    control = Claim.at_least("control", "the control scores 1", 1.0, 1.0, versus="ref", arm="ref")  # kind: paper
    result["claims"] = [vars(beats(result, "acc", "m", "ref")), vars(control)]
    with pytest.raises(ZooError, match="'control' is of kind paper but does not involve the method 'm'"):
        _check_claims(result)
    result["claims"][1]["kind"] = "validity"
    _check_claims(result)


def test_beats_pairs_only_the_seeds_where_both_arms_measured_the_metric():
    result = _two_arm_result([0.9, 0.91, 0.92], [0.5, 0.5, 0.5])
    del result["per_seed"]["ref"]["2"]["acc"]
    claim = beats(result, "acc", "m", "ref")
    assert "over 2 seeds" in claim.text and claim.value == pytest.approx(0.405)
    assert claim.arm == "m" and claim.versus == "ref" and claim.kind == "paper"
