"""The issue's acceptance, reproduced by the full evaluation (5 seeds; about ten minutes of CPU): slow.

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
def test_the_issue_acceptance(result):
    claims = {claim["id"]: claim for claim in result["claims"]}
    for arm in ("hash_threshold", "datasketches_theta"):
        assert claims[f"{arm}_hide_broken"]["holds"] and claims[f"{arm}_inflate_broken"]["holds"], arm
    assert claims["robust_hide_within"]["holds"] and claims["robust_inflate_within"]["holds"]
    assert claims["robust_space"]["holds"] and claims["robust_beats_reference_exact_max_stored_keys"]["holds"]
    assert claims["robust_throughput_vs_theta"]["holds"]
    arms = result["arms"]
    for arm in ("robust", "robust_unbounded", "hash_threshold", "datasketches_theta", "reference_exact"):
        for stream in ("hide", "inflate", "words"):
            for metric in ("rel_err_final", "max_stored_keys", "updates_per_s"):
                assert f"{metric}_{stream}" in arms[arm], (arm, stream, metric)
    assert "frac_probes_within_0.15_after_warmup_words" in arms["robust"]


def test_settings_change_what_is_measured():
    small = {"churn_length": 2000, "throughput_length": 20_000, "attack_probes": 300, "word_articles": 3}
    arms = ["reference_exact", "hash_threshold"]
    low = run_eval("resettable_sketch", seeds=[0], overrides={**small, "hash_rate": 0.05}, arms=arms)
    high = run_eval("resettable_sketch", seeds=[0], overrides={**small, "hash_rate": 0.5}, arms=arms)
    assert low["settings"]["hash_rate"] == 0.05 and low["settings"]["overrides"]["churn_length"] == 2000
    assert low["arms"]["hash_threshold"]["max_stored_keys"] < high["arms"]["hash_threshold"]["max_stored_keys"]
    # the exact reference does not sample: its memory does not depend on the rate
    assert low["arms"]["reference_exact"]["max_stored_keys"] == high["arms"]["reference_exact"]["max_stored_keys"]


@pytest.mark.parametrize(
    ("pair", "message"), [("speed=1", "unknown setting 'speed'"), ("rate=fast", "expected a number")]
)
def test_bad_settings_are_one_line_errors(pair, message):
    with pytest.raises(ZooError, match=message):
        run_eval("resettable_sketch", seeds=[0], overrides=[pair], arms=["reference_exact"])
