"""The question sets: the test split never changes, the declared validation set is what issue 20's decision says."""

import hashlib
import json
from dataclasses import asdict

import pytest

pytest.importorskip("countryinfo")

from zoo.prefetch_rag import corpus as C  # noqa: E402
from zoo.prefetch_rag import data as D  # noqa: E402
from zoo.prefetch_rag.lead_ins import LEAD_INS  # noqa: E402

# sha256 of the questions as JSON. The test split changed once on purpose: on 2026-12-04 the held-out lead-in pools
# grew from 2 long + 1 short to 6 + 2 per attribute (zoo/prefetch_rag/lead_ins.py; with the old pools it was 8cb0e2...,
# the validation sets 463866... (stage 2), 2cc555... (120 + 180) and 0e1cab... (30 + 60))
TEST_SPLIT_SHA256 = "3af516cb701ab19b0fb42ccac2e6163006f8cdd905a5740671748ed8f9b3e975"  # test_questions(60, 30, 30)
# the fifth release's test_questions(100, 50): its first 60 single-domain questions are the sixth release's
OLD_TEST_SPLIT_SHA256 = "1d8f40b14af990ccb25e5f40ecae10c1ee04127e7fda8f1c593df27ce48aa011"
SELECTION_SHA256 = "8abbb6314d34fbfdb31bd940b45e66bc54e3cacb56b87f2154389988154d5070"  # stage 2's 30 + 20
# the declared validation set, pinned before any run on it
DECLARED_SHA256 = "5b24e4c9969b08cf07895b2b4fc7c3569d5ad776768ffe09ab78b15419311c70"  # 120 + 180
EARLIER_SHA256 = "0ad1999bd78d636f7e23ff23f91f92e883b2f8958388665ebf364767341eed33"  # its first 30 + 60


def _digest(questions) -> str:
    return hashlib.sha256(json.dumps([asdict(q) for q in questions]).encode()).hexdigest()


def test_test_questions_are_unchanged():
    from zoo.prefetch_rag.evaluate import PROTOCOL, test_questions

    n_single, n_multi, n_hop = (PROTOCOL.settings[k].default for k in ("n_single", "n_multi", "n_hop"))
    assert (n_single, n_multi, n_hop) == (60, 30, 30)
    questions = test_questions(n_single, n_multi, n_hop)
    assert _digest(questions) == TEST_SPLIT_SHA256
    old = test_questions(100, 50)
    assert _digest(old) == OLD_TEST_SPLIT_SHA256 and questions[:60] == old[:60]
    assert [q.multi for q in questions] == [False] * 60 + [True] * 60


def test_stage2_selection_set_is_the_one_theta_was_chosen_on():
    selection = D.selection_questions(30, 20)
    assert _digest(selection) == SELECTION_SHA256
    assert selection[:40] == C.question_set("val", 30, 10, seed=1)  # the 30 + 10 of the earliest sessions


def test_declared_validation_set():
    full = D.validation_questions()
    single, multi = full[: D.VAL_SINGLE], full[D.VAL_SINGLE :]
    assert (len(single), len(multi)) == (120, 180)
    assert not any(q.multi for q in single) and all(q.multi for q in multi)
    assert single[:30] == D.selection_questions(30, 20)[:30]  # the first 30 single-domain questions did not change
    assert D.validation_questions(30, 20) == full[:30] + multi[:20] and D.validation_questions(10, 0) == full[:10]
    # the earlier declared set (30 + 60) is a prefix of each part
    assert D.validation_questions(30, 60) == single[:30] + multi[:60]
    assert _digest(D.validation_questions(30, 60)) == EARLIER_SHA256
    # fresh: none of the 180 is one of the 20 multi-domain questions stage 2 chose theta and keep_blocks on
    assert not set(multi) & set(D.selection_questions(30, 20)[30:])
    assert len(set(multi)) == 180
    assert _digest(full) == DECLARED_SHA256


def test_validation_questions_share_nothing_with_training_or_test():
    split = C.country_split()
    questions = D.validation_questions() + D.selection_questions(30, 20)
    countries = {s.country for q in questions for s in q.slots}
    assert countries <= set(split["val"])
    assert not countries & set(split["lm"] + split["heads"] + split["test"])
    lead_ins = {seg.text for q in questions for seg, slot in zip(q.segments[1:], q.segments[2:]) if slot.is_slot}
    val_pool = {t for pools in LEAD_INS.values() for t in pools["val"] + pools["val_short"]}
    other = {t for pools in LEAD_INS.values() for k in ("train", "train_short", "test", "test_short") for t in pools[k]}
    assert len(lead_ins) > 5 and lead_ins <= val_pool and not lead_ins & other


def test_the_bpe_never_sees_a_held_out_lead_in():
    from zoo.prefetch_rag.lm import tokenizer_texts

    texts = set(tokenizer_texts())
    pools_out = ("val", "val_short", "test", "test_short")
    held_out = {t for pools in LEAD_INS.values() for k in pools_out for t in pools[k]}
    training = {t for pools in LEAD_INS.values() for t in pools["train"] + pools["train_short"]}
    assert training <= texts and not held_out & texts


def test_headroom_gates_hold_at_their_thresholds_and_fail_one_slot_below():
    from zoo.prefetch_rag.tune import headroom_gates

    def record(em_multi_sync, em_multi_single):
        return {
            "sync_active": {"em_single": 0.433, "em_multi": em_multi_sync},
            "references": {"no_retrieval": {"em": 0.0}, "single_shot": {"em_multi": em_multi_single}},
        }

    assert 0.35 - 0.25 < 0.10  # float rounding: a gap of exactly 24 of 240 slots must still hold
    assert headroom_gates(record(0.35, 0.25))["hold"]
    below = headroom_gates(record(0.35, 0.25 + 1 / 240))
    assert not below["hold"] and below["headroom_em_multi"] == pytest.approx(0.1 - 1 / 240)
    assert not headroom_gates({**record(0.6, 0.2), "sync_active": {"em_single": 0.19, "em_multi": 0.6}})["hold"]


def test_tuned_arms_get_as_many_trials_as_sync_active_and_tuning_json_follows_the_grids():
    from pathlib import Path

    import yaml

    from zoo._recipes import resolve_recipe
    from zoo.prefetch_rag import tune as T

    recipe = yaml.safe_load(Path(resolve_recipe("prefetch_rag/countries")).read_text())["model"]["init_args"]
    sync_trials = len(recipe["theta_grid"]) * len(recipe["keep_grid"])  # sync_active's theta x keep_blocks
    assert {arm: len(grid) for arm, grid in T.GRIDS.items()} == dict.fromkeys(T.GRIDS, sync_trials)
    assert sync_trials == T.TRIALS
    for arm, grid in T.GRIDS.items():
        assert len({tuple(sorted(c.items())) for c in grid}) == len(grid), arm  # no config twice
        assert all(c.keys() == grid[0].keys() for c in grid), arm  # the card lists one value set per key
    assert {c["confirm"] for c in T.GRIDS["prefetch"]} == {True, False}  # the served rule is a tuned choice
    assert {c["tau"] for c in T.GRIDS["always_prefetch"]} == {0.0}  # no predictor decision in any trial
    record = T.load()  # the shipped tuning.json was run with these grids and the recipe's stage 2
    assert len(record["theta_choice"]["trials"]) == sync_trials
    assert record["retrieval_ms"] == T.RETRIEVAL_MS
    for arm in T.GRIDS:
        grid = T.grid(arm, record)
        trials = [{k: t[k] for k in grid[0]} for t in record["arms"][arm]["trials"]]
        assert trials == grid, arm
        assert record["arms"][arm]["best"] in grid, arm
    served = {k: record["arms"]["prefetch"]["best"][k] for k in T.SERVED}
    for arm in ("telerag", "piperag"):  # measured on prefetch's chosen served rule
        assert {k: record["arms"][arm]["best"][k] for k in T.SERVED} == served


def test_each_arm_is_measured_with_its_own_tuned_values():
    from zoo.prefetch_rag.decoder import Hyper
    from zoo.prefetch_rag.tune import chosen_hyper

    record = {
        "arms": {
            "telerag": {"best": {"interval": 8}},
            "piperag": {"best": {"staleness": 4}},
            "prefetch": {"best": {"tau": 0.3, "rho": 0.5, "confirm": False, "monitor_anchor": "head"}},
        }
    }
    base = Hyper(confirm=True, rho=0.6)
    telerag = chosen_hyper(base, record, arm="telerag")  # tuned on base's served rule and rho: measured on them
    assert (telerag.interval, telerag.confirm, telerag.rho, telerag.tau) == (8, True, 0.6, base.tau)
    for arm in ("prefetch", "prefetch_no_monitor"):  # the ablations keep prefetch's constants
        hyper = chosen_hyper(base, record, arm=arm)
        assert (hyper.tau, hyper.rho, hyper.confirm, hyper.monitor_anchor, hyper.interval) == (
            0.3, 0.5, False, "head", base.interval)  # fmt: skip
    assert chosen_hyper(base, record, arm="sync_active") == base
    record["arms"]["always_prefetch"] = {"best": {"tau": 0.0, "rho": 0.2, "candidates": 64}}
    always = chosen_hyper(base, record, arm="always_prefetch")  # its own trial, not prefetch's tau
    assert (always.tau, always.rho, always.candidates, always.delta) == (0.0, 0.2, 64, base.delta)
    assert chosen_hyper(base, record).tau == 0.3  # the summary keeps prefetch's values
    merged = chosen_hyper(base, record)
    assert (merged.interval, merged.staleness, merged.confirm) == (8, 4, False)


def test_tele_and_pipe_rag_trials_carry_prefetchs_chosen_served_rule():
    from zoo.prefetch_rag import tune as T

    best = {"tau": 0.3, "rho": 0.4, "candidates": 64, "confirm": True, "confirm_theta": 3.0, "rerank": "text"}
    record = {"arms": {"prefetch": {"best": best}}}
    for arm, key in (("telerag", "interval"), ("piperag", "staleness")):
        grid = T.grid(arm, record)
        assert [c[key] for c in grid] == [c[key] for c in T.GRIDS[arm]]
        assert all(c.keys() == set(T.SERVED) | {key} for c in grid)  # prefetch's tau is no TeleRAG constant
        assert all((c["rho"], c["candidates"], c["rerank"]) == (0.4, 64, "text") for c in grid)
    assert T.grid("prefetch", record) is T.GRIDS["prefetch"]


def test_hop_questions_switch_country_before_every_slot():
    import random

    split = C.country_split()
    questions = C.hop_questions("test", 5, seed=0)
    assert [q.question for q in questions] == [q.question for q in C.hop_questions("test", 5, seed=0)]
    for q in questions:
        countries = [s.country for s in q.slots]
        assert len(countries) == 4 and q.multi and set(countries) <= set(split["test"])
        assert all(a != b for a, b in zip(countries, countries[1:]))  # a switch at every slot
        assert countries[0] == countries[2] and countries[1] == countries[3]
        assert len({(s.country, s.attribute) for s in q.slots}) == 4  # no fact asked twice
        switches = [s.text for s in q.segments if s.text.startswith("Next, consider")]
        assert switches == [C.SWITCH.format(c=c) for c in countries[1:]]
        assert all(s.text == C.facts()[s.country][s.attribute] for s in q.slots)
    with pytest.raises(ValueError, match="two different"):
        C.hop_question("Peru", "Peru", random.Random(0), "val")
    with pytest.raises(ValueError, match="n_slots"):
        C.hop_question("Peru", "Chile", random.Random(0), "val", n_slots=11)


def test_latency_headroom_gate_on_validation_fails_one_point_below_forty_percent():
    from zoo.prefetch_rag.tune import HEADROOM_WAIT, headroom_gates

    def record(share):
        return {
            "sync_active": {"em_single": 0.433, "em_multi": 0.4, "wait_share": share},
            "references": {"no_retrieval": {"em": 0.0}, "single_shot": {"em_multi": 0.2}},
        }

    assert HEADROOM_WAIT == 0.40
    assert headroom_gates(record(0.40))["hold"] and headroom_gates(record(0.40))["thresholds"][-1] == 0.40
    assert not headroom_gates(record(0.39))["hold"]
