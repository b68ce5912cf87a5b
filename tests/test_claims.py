"""The harness's claim arithmetic (zoo._eval): thresholds reached exactly hold, misses fail."""

import pytest

from zoo._eval import Claim, beats


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
