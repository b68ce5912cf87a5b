"""``zoo eval visual_persuasion`` through the harness: one judge module per seed, random search at CVPO's calls,
claims that can fail."""

from __future__ import annotations

import copy

import pytest

import zoo
from zoo.eval import Run
from zoo.eval.engine import evaluation, measure_task
from zoo.eval.published import published_result
from zoo.eval.result import summarise
from zoo.visual_persuasion.evaluate import PROTOCOL, claims


class HeadsRun(Run):
    """A Run whose fits are the published heads, recording what it was asked to fit instead of training."""

    def __init__(self, seed, **overrides):
        super().__init__(PROTOCOL, "visual_persuasion", seed, PROTOCOL.resolve(overrides),
                         evaluation("visual_persuasion").entries)  # fmt: skip
        self.trained = []

    def fit(self, recipe, overrides=()):
        self.trained.append((recipe, list(overrides)))
        return self.published("cvpo")


def test_the_published_seed_scores_the_published_heads_and_other_seeds_refit_the_heads_only(hf_offline):
    assert HeadsRun(0).uses_published("cvpo") and not HeadsRun(1).uses_published("cvpo")
    assert not HeadsRun(0, items=2).uses_published("cvpo")  # items is a recipe key: the heads are refit
    from zoo.visual_persuasion.evaluate import _judges

    run = HeadsRun(1)
    assert _judges(run) is _judges(run)  # one judge module per seed, shared by every arm
    assert run.trained == [("recipes/visual_persuasion/cvpo.yaml", ["--model.init_args.optimise=false"])] * 2


def test_cvpo_and_random_search_share_a_pass_with_equal_calls_per_item(hf_offline):
    run = HeadsRun(1, items=2, trials=10, bootstrap=100)
    scores = measure_task(PROTOCOL, run, ("random_search",))  # asking for one arm measures the shared pass
    assert set(scores) == {"cvpo", "random_search"}
    assert scores["random_search"]["judge_calls"] == scores["cvpo"]["judge_calls"] > 0
    assert scores["random_search"]["judge_calls_unique"] <= scores["random_search"]["judge_calls"]
    assert {"cvpo", "random_search", "true_sensitivities", "head_out_of_bag_r2"} <= set(run.extras)
    assert len(run.extras["cvpo"]["p_per_item"]) == len(run.extras["random_search"]["theta_per_item"]) == 2


def _with(result, arm, seed, **scores):
    changed = copy.deepcopy(result)
    changed["per_seed"][arm][seed].update(scores)
    changed["arms"][arm] = summarise(changed["per_seed"][arm])
    return {c.id: c for c in claims(changed)}


def test_the_headroom_gate_holds_on_every_seed_and_unequal_budgets_fail():
    card = published_result(evaluation("visual_persuasion"))
    found = {c.id: c for c in claims(card)}
    assert found["random_search_headroom"].holds and found["equal_judge_calls"].holds
    assert found["random_search_headroom"].kind == "headroom"
    # one easy seed fails the gate although the mean stays below 0.90
    easy = _with(card, "random_search", "0", p_beats_original=0.93)
    assert not easy["random_search_headroom"].holds and easy["random_search_headroom"].value == pytest.approx(0.93)
    assert not _with(card, "random_search", "1", judge_calls=1000.0)["equal_judge_calls"].holds  # mean +~40%
    assert {c.kind for c in claims(card)} == {"paper", "validity", "headroom"}
    assert zoo.get_entry("visual_persuasion").pretrained_cfg.has_weights


def test_the_ceiling_gate_fails_when_one_seed_has_no_room():
    card = published_result(evaluation("visual_persuasion"))
    found = {c.id: c for c in claims(card)}
    assert found["ceiling_headroom"].kind == "headroom" and found["ceiling_headroom"].arm == "reference_best_of_n"
    rooms = [card["per_seed"]["reference_best_of_n"][s]["p_beats_original"] - v["p_beats_original"]
             for s, v in card["per_seed"]["random_search"].items()]  # fmt: skip
    assert found["ceiling_headroom"].value == pytest.approx(min(rooms), abs=1e-6)  # the worst seed is the value
    roomy = copy.deepcopy(card)
    for seed, scores in roomy["per_seed"]["reference_best_of_n"].items():
        scores["p_beats_original"] = roomy["per_seed"]["random_search"][seed]["p_beats_original"] + 0.2
    roomy["arms"]["reference_best_of_n"] = summarise(roomy["per_seed"]["reference_best_of_n"])
    assert {c.id: c for c in claims(roomy)}["ceiling_headroom"].holds
    searched = roomy["per_seed"]["random_search"]["1"]["p_beats_original"]
    crowded = _with(roomy, "reference_best_of_n", "1", p_beats_original=searched + 0.05)
    assert not crowded["ceiling_headroom"].holds  # one seed without room fails the gate, whatever the mean
    assert crowded["ceiling_headroom"].value == pytest.approx(0.05, abs=1e-6)


def test_the_spearman_interval_by_hand():
    from zoo.visual_persuasion.evaluate import t_interval

    low, high = t_interval([0.0, 1.0, 2.0])  # mean 1, SD 1, t(0.975, 2) = 4.3027: 1 +- 4.3027 / sqrt(3)
    assert low == pytest.approx(1 - 2.48417, abs=1e-4) and high == pytest.approx(1 + 2.48417, abs=1e-4)
    assert t_interval([0.4]) == (0.4, 0.4)
