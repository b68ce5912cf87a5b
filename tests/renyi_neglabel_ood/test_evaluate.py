"""The evaluation: one shared pass per seed measures every arm; claims fall back to tier 1 without tier 2."""

from __future__ import annotations

import copy

from zoo.eval import Run
from zoo.eval.engine import evaluation, measure_task
from zoo.eval.published import published_result, read_published, result_of
from zoo.renyi_neglabel_ood.evaluate import PROTOCOL

NAME = "renyi_neglabel_ood"


def test_a_tier1_seed_measures_every_arm_in_one_pass():
    run = Run(PROTOCOL, NAME, 3, PROTOCOL.resolve({"tier1_images": 60}), evaluation(NAME).entries)
    scores = measure_task(PROTOCOL, run, ("neglabel",))  # any arm of the pass measures them all
    assert set(scores) == set(PROTOCOL.arms)
    assert all(set(metrics) == {"tier1_auroc_clean", "tier1_auroc_contam10"} for metrics in scores.values())
    for arm in ("renyi_no_neg", "mcm"):  # no negative enters their score, so neither does the contamination
        assert scores[arm]["tier1_auroc_clean"] == scores[arm]["tier1_auroc_contam10"]


def test_claims_read_the_result_and_use_tier_2_where_it_was_measured():
    ev = evaluation(NAME)
    result = published_result(ev)
    before = copy.deepcopy(result)
    ids = [claim.id for claim in PROTOCOL.claims(result)]
    assert result == before
    assert ids[-1] == "renyi_beats_mcm_tier2_auroc_mean" and "tier2_headroom_best_baseline" in ids
    record = read_published(ev)
    tier1 = [{**p, "scores": {k: v for k, v in p["scores"].items() if k.startswith("tier1")}} for p in record["pieces"]]
    claims = result_of(ev, record, tier1)["claims"]
    assert [c["id"] for c in claims][-1] == "renyi_beats_mcm_tier1_auroc_clean" and len(claims) == 4
