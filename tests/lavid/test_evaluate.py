"""The evaluation: a piece trains the arm's students on its seed's data, and the claims only read the result."""

from __future__ import annotations

import copy

import pytest

from zoo.eval import Run
from zoo.eval.engine import evaluation, measure_task
from zoo.eval.published import published_result
from zoo.lavid.evaluate import PROTOCOL

SMALL = {"shots": [1], "spurious_seeds": 2, "spurious_size": 100, "test_limit": 100}


def _run(seed: int) -> Run:
    return Run(PROTOCOL, "lavid", seed, PROTOCOL.resolve(SMALL), evaluation("lavid").entries)


def test_a_piece_has_the_spurious_metrics_only_on_the_first_spurious_seeds():
    run = _run(1)  # seeds[:2] = (0, 1): seed 1 runs the composite set too
    scores = measure_task(PROTOCOL, run, ("ce",))["ce"]
    assert set(scores) == {"acc_1shot", "worst_group_acc", "avg_acc_spurious"}
    assert 0.0 <= scores["worst_group_acc"] <= scores["avg_acc_spurious"] <= 1.0
    assert len(run.extras["ce_group_accs"]) == 4 and run.extras["ce_compute_s"] > 0
    later = _run(2)
    assert set(measure_task(PROTOCOL, later, ("ce",))["ce"]) == {"acc_1shot"}
    assert set(later.extras) == {"ce_compute_s"}  # the published weights are scored on seed 0 only


@pytest.mark.parametrize("name", ["lavid", "lavid.ce"])
def test_claims_leave_the_result_as_they_found_it(name):
    result = published_result(evaluation(name))
    before = copy.deepcopy(result)
    claims = PROTOCOL.claims(result)
    assert result == before
    assert {c.kind for c in claims} == {"paper", "headroom", "validity"}
    compute = next(c for c in claims if c.id == "eval_compute_minutes")
    seconds = sum(v for extras in result["extras"].values() for k, v in extras.items() if k.endswith("_compute_s"))
    assert compute.value == pytest.approx(seconds / 60) and compute.value > 0  # every piece's recorded seconds
    assert compute.holds == (compute.value <= 40) and compute.kind == "validity"
