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
TEST_SPLIT_SHA256 = "1d8f40b14af990ccb25e5f40ecae10c1ee04127e7fda8f1c593df27ce48aa011"  # test_questions(100, 50)
SELECTION_SHA256 = "8abbb6314d34fbfdb31bd940b45e66bc54e3cacb56b87f2154389988154d5070"  # stage 2's 30 + 20
# the declared validation set, pinned before any run on it
DECLARED_SHA256 = "5b24e4c9969b08cf07895b2b4fc7c3569d5ad776768ffe09ab78b15419311c70"  # 120 + 180
EARLIER_SHA256 = "0ad1999bd78d636f7e23ff23f91f92e883b2f8958388665ebf364767341eed33"  # its first 30 + 60


def _digest(questions) -> str:
    return hashlib.sha256(json.dumps([asdict(q) for q in questions]).encode()).hexdigest()


def test_test_questions_are_unchanged():
    from zoo.prefetch_rag.evaluate import PROTOCOL, test_questions

    n_single, n_multi = PROTOCOL.settings["n_single"].default, PROTOCOL.settings["n_multi"].default
    assert (n_single, n_multi) == (100, 50)
    assert _digest(test_questions(n_single, n_multi)) == TEST_SPLIT_SHA256


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
    record = T.load()  # the shipped tuning.json was run with these grids and the recipe's stage 2
    assert len(record["theta_choice"]["trials"]) == sync_trials
    for arm, grid in T.GRIDS.items():
        trials = [{k: t[k] for k in grid[0]} for t in record["arms"][arm]["trials"]]
        assert trials == grid, arm
        assert record["arms"][arm]["best"] in grid, arm


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
    merged = chosen_hyper(base, record)
    assert (merged.interval, merged.staleness, merged.confirm) == (8, 4, False)
