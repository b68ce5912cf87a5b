"""The issue's acceptance, reproduced by the full evaluation (5 seeds; a minute or two of CPU): slow.

The default suite checks the protocol's settings cheaply instead (an override changes what is measured).
"""

from __future__ import annotations

import pytest

from zoo._errors import ZooError
from zoo._eval import run_eval


@pytest.fixture(scope="module")
def result():
    return run_eval("resettable_sketch.robust")


@pytest.mark.slow
def test_every_claim_holds_except_those_the_card_reports(result):
    claims = {claim["id"]: claim for claim in result["claims"]}
    for arm in ("hash_threshold", "datasketches_theta", "hash_threshold_sum", "robust_noiseless"):
        assert claims[f"{arm}_broken"]["holds"], arm
    assert claims["robust_attack_error"]["holds"] and claims["robust_beats_hash_threshold_rel_err_adaptive"]["holds"]
    assert claims["robust_beats_reference_exact_max_stored_keys"]["holds"]
    assert claims["robust_halving_space"]["holds"] and claims["robust_throughput_vs_theta"]["holds"]


@pytest.mark.slow
def test_memory_is_flat_with_halving(result):
    curves = result["extras"][str(result["seeds"][0])]["memory_curve"]
    halving, exact = curves["robust_halving"]["stored"], curves["reference_exact"]["stored"]
    assert halving[-1] <= result["settings"]["halving_k"] + 1
    assert exact[-1] > 20 * halving[-1]


def test_settings_change_what_is_measured():
    small = {"churn_length": 2000, "throughput_length": 20_000, "attack_probes": 300}
    arms = ["reference_exact", "hash_threshold"]
    low = run_eval("resettable_sketch", seeds=[0], overrides={**small, "rate": 0.05}, arms=arms)
    high = run_eval("resettable_sketch", seeds=[0], overrides={**small, "rate": 0.5}, arms=arms)
    assert low["settings"]["rate"] == 0.05 and low["settings"]["overrides"]["churn_length"] == 2000
    assert low["arms"]["hash_threshold"]["max_stored_keys"] < high["arms"]["hash_threshold"]["max_stored_keys"]
    # the exact reference does not sample: its memory does not depend on the rate
    assert low["arms"]["reference_exact"]["max_stored_keys"] == high["arms"]["reference_exact"]["max_stored_keys"]


@pytest.mark.parametrize(
    ("pair", "message"), [("speed=1", "unknown setting 'speed'"), ("rate=fast", "expected a number")]
)
def test_bad_settings_are_one_line_errors(pair, message):
    with pytest.raises(ZooError, match=message):
        run_eval("resettable_sketch", seeds=[0], overrides=[pair], arms=["reference_exact"])
