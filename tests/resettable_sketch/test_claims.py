"""The spec's acceptance, reproduced by the full evaluation (5 seeds; about fifteen minutes of CPU): slow.

The default suite checks the protocol cheaply instead: an override changes what is measured, every arm records
its attack traces on any seed, the registered baseline is the one the evaluation measures.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import zoo
from zoo._errors import ZooError
from zoo._recipes import resolve_recipe
from zoo.eval import Run
from zoo.eval.engine import Request, evaluation, measure, measure_task
from zoo.eval.result import assemble
from zoo.resettable_sketch.evaluate import HASH_RATE, PROTOCOL

NAME = "resettable_sketch.robust"
SMALL = {
    "churn_length": 2000,
    "throughput_length": 20_000,
    "attack_probes": 300,
    "side_attack_probes": 200,
    "word_articles": 3,
    "word_repeats": 2,
}


def _measure(request: Request) -> dict:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ZOO_EVAL_CACHE", "off")
        pieces = measure(NAME, request)
    settings = PROTOCOL.resolve(request.overrides)
    return assemble(
        PROTOCOL, NAME, pieces, settings, seeds=request.seeds or PROTOCOL.seeds, overrides=request.overrides
    )


@pytest.fixture(scope="module")
def result():
    return _measure(Request())


@pytest.mark.slow
def test_the_spec_acceptance(result):
    claims = {claim["id"]: claim for claim in result["claims"]}
    for arm in ("hash_threshold", "datasketches_theta"):
        assert claims[f"{arm}_hide_broken"]["holds"] and claims[f"{arm}_inflate_broken"]["holds"], arm
    assert claims["robust_hide_within"]["holds"] and claims["robust_inflate_within"]["holds"]
    assert claims["robust_space"]["holds"] and claims["robust_beats_reference_exact_max_stored_keys"]["holds"]
    assert claims["robust_throughput_vs_theta"]["holds"] and claims["streams_reach_10k"]["holds"]
    for mode in ("hide", "inflate"):
        assert claims[f"robust_{mode}_within_last_half"]["holds"]
    for stream in ("hide", "inflate", "words", "churn"):
        assert claims[f"robust_space_vs_exact_{stream}"]["holds"], stream
    arms = result["arms"]
    for arm in ("robust", "robust_unbounded", "hash_threshold", "datasketches_theta", "reference_exact"):
        for stream in ("hide", "inflate", "words"):
            for metric in ("rel_err_final", "max_stored_keys", "updates_per_s"):
                assert f"{metric}_{stream}" in arms[arm], (arm, stream, metric)
    assert "frac_probes_within_0.15_after_warmup_words" in arms["robust"]


def test_settings_change_what_is_measured():
    arms = ("reference_exact", "hash_threshold")
    low = _measure(Request(arms=arms, seeds=(0,), overrides={**SMALL, "hash_rate": 0.05}))
    high = _measure(Request(arms=arms, seeds=(0,), overrides={**SMALL, "hash_rate": 0.5}))
    assert low["settings"]["hash_rate"] == 0.05 and low["settings"]["overrides"]["churn_length"] == 2000
    assert low["arms"]["hash_threshold"]["max_stored_keys"] < high["arms"]["hash_threshold"]["max_stored_keys"]
    # the exact reference does not sample: its memory does not depend on the rate
    assert low["arms"]["reference_exact"]["max_stored_keys"] == high["arms"]["reference_exact"]["max_stored_keys"]
    assert low["arms"]["reference_exact"]["max_stored_keys_churn"] <= SMALL["churn_length"]


def test_every_arm_is_a_timed_sketch_that_records_its_traces_on_any_seed():
    assert all(spec.measure is not None and spec.timed for spec in PROTOCOL.arm_specs)
    run = Run(PROTOCOL, "resettable_sketch", 3, PROTOCOL.resolve(SMALL), evaluation(NAME).entries)
    measure_task(PROTOCOL, run, ("robust_noiseless",))
    for mode in ("hide", "inflate"):
        trace = run.extras[f"attack_trace_{mode}"]["robust_noiseless"]
        assert len(trace["probe"]) == len(trace["truth"]) == len(trace["estimate"]) == 60
    assert run.extras["calibration"]["k"] == 20644


def test_the_registered_baseline_runs_at_the_rate_the_evaluation_measures():
    entry = zoo.get_entry("resettable_sketch.hash_threshold")
    recipe = yaml.safe_load(Path(resolve_recipe(entry.pretrained_cfg.recipe)).read_text())["model"]["init_args"]
    assert entry.model_args["rate"] == recipe["rate"] == HASH_RATE == PROTOCOL.settings["hash_rate"].default


@pytest.mark.parametrize(
    ("pair", "message"), [("speed=1", "unknown setting 'speed'"), ("rate=fast", "expected a number")]
)
def test_bad_settings_are_one_line_errors(pair, message):
    with pytest.raises(ZooError, match=message):
        PROTOCOL.parse_overrides([pair])
