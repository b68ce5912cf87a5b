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
    assert scores["reference_pixel_stats"] == {}  # no pixels in tier 1
    tier1 = {"tier1_auroc_clean", "tier1_auroc_contam"}
    assert all(set(scores[arm]) == tier1 for arm in PROTOCOL.arms if arm not in ("neglabel", "reference_pixel_stats"))
    assert set(scores["neglabel"]) == tier1 | {"tier1_contam_share", "tier1_val_drop"}
    assert scores["neglabel"]["tier1_contam_share"] in PROTOCOL.resolve({})["contamination_grid"]
    for arm in ("renyi_no_neg", "mcm"):  # no negative enters their score, so neither does the contamination
        assert scores[arm]["tier1_auroc_clean"] == scores[arm]["tier1_auroc_contam"]


def test_claims_read_the_result_and_use_tier_2_where_it_was_measured():
    ev = evaluation(NAME)
    result = published_result(ev)
    before = copy.deepcopy(result)
    ids = [claim.id for claim in PROTOCOL.claims(result)]
    assert result == before
    assert ids[-1] == "renyi_beats_mcm_tier2_auroc_semantic" and "tier2_headroom_best_baseline" in ids
    assert {"tier2_headroom_pixel_stats", "tier2_contamination_bites", "tier1_contamination_bites"} <= set(ids)
    record = read_published(ev)
    tier1 = [{**p, "scores": {k: v for k, v in p["scores"].items() if k.startswith("tier1")}} for p in record["pieces"]]
    claims = result_of(ev, record, tier1)["claims"]
    assert [c["id"] for c in claims][-1] == "renyi_beats_mcm_tier1_auroc_clean" and len(claims) == 5


def test_the_gates_fail_when_one_unit_fails():
    result = published_result(evaluation(NAME))
    gates = {c.id: c for c in PROTOCOL.claims(result)}
    assert gates["tier2_headroom_pixel_stats"].kind == "headroom"
    broken = copy.deepcopy(result)
    seed = next(iter(broken["per_seed"]["reference_pixel_stats"]))
    broken["per_seed"]["reference_pixel_stats"][seed]["tier2_val_auroc_icons_val"] = 0.9  # one set of one seed
    broken["per_seed"]["neglabel"][seed]["tier2_val_drop"] = 0.01
    gates = {c.id: c for c in PROTOCOL.claims(broken)}
    assert not gates["tier2_headroom_pixel_stats"].holds and gates["tier2_headroom_pixel_stats"].value == 0.9
    assert not gates["tier2_contamination_bites"].holds and gates["tier2_contamination_bites"].value == 0.01
