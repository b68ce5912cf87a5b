"""CVPO's loop (equilibrium, only the loser changes, consistency), the cached judge, bad inputs, the analysis."""

from __future__ import annotations

import numpy as np
import pytest

from tests.visual_persuasion.conftest import HEADS, pixel_encoder
from zoo.visual_persuasion import optimise
from zoo.visual_persuasion.editor import ParametricEditor
from zoo.visual_persuasion.judge import CachedJudge, ConstantJudge, UtilityJudge
from zoo.visual_persuasion.pipeline import ArmSettings, clustered_ci_low, head_to_head, optimise_items

MEAN, STD = np.zeros(7), np.ones(7)


def judge(seed=0, temperature=0.2, cache_features=True, heads=slice(0, 3)):
    return UtilityJudge(HEADS[heads], np.zeros(len(HEADS[heads])), 0.1, temperature, seed, encoder=pixel_encoder,
                        cache_features=cache_features)  # fmt: skip


def run_cvpo(item, the_judge, seed=0, **kwargs):
    ctx = optimise.ItemContext(item, ParametricEditor(), the_judge, np.random.default_rng(seed), MEAN, STD)
    return optimise.run_lockstep([optimise.cvpo(ctx, optimise.Proposer(0.15, 0.1), **kwargs)], the_judge)[0]


def test_equilibrium_stops_below_051_only_after_round_10(items):
    # every contest of a pure-position-bias judge is a tie (score 0.5 < 0.51): the run stops exactly at round 10
    tied = run_cvpo(items[0], ConstantJudge(position_bias=2.0))
    assert tied.rounds == 10 and all(step["score"] == 0.5 for step in tied.trace)
    # three identical near-deterministic judges without position bias never tie: the run goes to max_rounds
    unanimous = UtilityJudge(HEADS[[0, 0, 0]], np.zeros(3), 0.0, 1e-4, 0, encoder=pixel_encoder)
    decisive = run_cvpo(items[0], unanimous)
    assert decisive.rounds == 30 and all(step["score"] >= 0.51 for step in decisive.trace)
    for outcome in (tied, decisive):
        for step in outcome.trace[:-1]:
            assert step["round"] < 10 or step["score"] >= 0.51  # no earlier stop was skipped


def test_only_the_loser_changes_in_a_round(items):
    outcome = run_cvpo(items[3], judge())
    assert len(outcome.trace) > 10
    for before, after in zip(outcome.trace[:-1], outcome.trace[1:], strict=True):
        winner, loser = before["winner"], 1 - before["winner"]
        assert np.array_equal(before["thetas"][winner], after["thetas"][winner])
        assert not np.array_equal(before["thetas"][loser], after["thetas"][loser])


def test_cvpo_never_counts_an_order_inconsistent_vote(items):
    from zoo.visual_persuasion import contest as contest_module

    seen = []
    original = contest_module.contest

    def spy(*args, **kwargs):
        result = original(*args, **kwargs)
        seen.append(result)
        return result

    optimise.contest, saved = spy, optimise.contest
    try:
        run_cvpo(items[5], judge(temperature=0.5))
    finally:
        optimise.contest = saved
    assert seen and any(None in r.votes for r in seen)  # inconsistent judges did occur
    for r in seen:
        counted = [v for v in r.votes if v is not None]
        if r.tie_break:
            assert not counted or counted.count(0) == counted.count(1)
        else:
            assert r.score == pytest.approx(counted.count(r.winner) / len(counted))


def test_the_cached_judge_equals_the_uncached_one(items):
    plain = run_cvpo(items[7], judge(cache_features=False))
    cached_judge = CachedJudge(judge())
    cached = run_cvpo(items[7], cached_judge)
    assert np.array_equal(plain.best.theta, cached.best.theta) and plain.calls == cached.calls
    assert [s["score"] for s in plain.trace] == [s["score"] for s in cached.trace]
    assert cached_judge.misses < cached_judge.requests  # CVPO re-judges identical pairs


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"num_candidates": 0}, "num_candidates"), ({"min_rounds": 10, "max_rounds": 5}, "max_rounds")],
)
def test_bad_cvpo_settings_are_rejected(items, kwargs, match):
    with pytest.raises(ValueError, match=match):
        run_cvpo(items[0], judge(), **kwargs)


def test_every_arm_runs_and_random_search_spends_the_budget(items):
    few = items[:2]
    settings = ArmSettings(max_rounds=12, oracle_steps=2)
    cvpo, _, _ = optimise_items("cvpo", few, judge(), MEAN, STD, settings, 0)
    budgets = [o.calls for o in cvpo]
    random, _, _ = optimise_items("random_search", few, judge(), MEAN, STD, settings, 0, budgets=budgets)
    assert all(abs(r.calls - b) <= 6 for r, b in zip(random, budgets, strict=True))
    learning = ArmSettings(max_rounds=12, oracle_steps=2, cvpo_learn=True, cvpo_winner_base=True, best_of_n=4)
    learned, _, _ = optimise_items("cvpo", few, judge(), MEAN, STD, learning, 0)
    assert all(o.best.ssim >= 0.5 and o.calls > 0 for o in learned)
    for arm in (
        "original",
        "vfd",
        "oracle_gradient",
        "cvpo_no_consistency",
        "cvpo_random_proposer",
        "reference_best_of_n",
    ):
        outcomes, _, _ = optimise_items(arm, few, judge(), MEAN, STD, settings, 0)
        assert all(o.best.ssim >= 0.5 for o in outcomes), arm
    with pytest.raises(ValueError, match="unknown arm"):
        optimise_items("textgrad", few, judge(), MEAN, STD, settings, 0)


def test_original_against_itself_is_one_half(items):
    all_heads = judge(heads=slice(0, 4))
    p = head_to_head(all_heads, items, list(items), 100, 0, (0, 1, 2))
    assert abs(p.mean() - 0.5) <= 0.02  # exactly 0.5 in expectation: both orders cancel the position bias


def test_clustered_bootstrap_interval():
    per_item = np.array([0.9] * 16 + [0.7] * 16)
    low = clustered_ci_low(per_item, 0)
    assert 0.74 < low < 0.8  # mean 0.8, item SD 0.1 over 32 items: 0.8 - 1.96 * 0.1 / sqrt(32) = 0.765


def test_revealed_preferences_recover_a_known_choice_model():
    from scipy.stats import spearmanr

    from zoo.visual_persuasion.optimise import Observation
    from zoo.visual_persuasion.preferences import autointerp, revealed_preferences

    rng = np.random.default_rng(0)
    beta = np.array([2.0, -1.0, 0.5, 1.0, 3.0, -2.0])
    observations = []
    for pair in range(400):
        delta = rng.normal(size=6)
        for _ in range(6):
            p = 1 / (1 + np.exp(-(0.3 + delta @ beta)))
            observations.append(Observation(delta, bool(rng.random() < p), pair.to_bytes(4, "little"), (pair,)))
    fit = revealed_preferences(observations)
    assert np.allclose(fit["coef"], beta, atol=0.35) and fit["position_bias"] == pytest.approx(0.3, abs=0.2)
    assert spearmanr(fit["coef"], beta).statistic == pytest.approx(1.0)
    assert fit["pairs"] == 400 and np.all(fit["se"] > 0)
    themes = autointerp(observations, fit["coef"])
    assert themes["top_themes"] == ["larger subject (closer framing)", "brighter lighting", "less cluttered background"]
    assert sum(c["size"] for c in themes["clusters"]) == 2000


def test_the_learned_direction_follows_the_contest_outcomes_by_hand():
    learned = optimise.LearnedDirection(decay=0.5)
    assert learned.direction() is None
    e0, e1, zero = np.eye(7)[0], np.eye(7)[1], np.zeros(7)
    learned.update(2 * e0, zero, 0.75)  # unit difference e0, weight 2 * 0.75 - 1 = 0.5
    assert np.allclose(learned.vector, 0.5 * e0) and np.allclose(learned.direction(), e0)
    learned.update(zero, e1, 1.0)  # the winner is -e1 away: 0.5 * (0.5 e0) + 1.0 * (-e1)
    assert np.allclose(learned.vector, 0.25 * e0 - e1)
    assert np.allclose(learned.direction(), 0.25 * e0 - e1)  # largest coordinate scaled to 1
    before = learned.vector.copy()
    learned.update(e0, zero, 0.5)  # a tie-break carries no evidence, only the decay
    assert np.allclose(learned.vector, 0.5 * before) and learned.updates == 3
    learned.update(e0, e0, 1.0)  # identical edits: nothing to learn
    assert learned.updates == 3
    with pytest.raises(ValueError, match="decay"):
        optimise.LearnedDirection(decay=1.5)


def test_the_learning_proposer_moves_along_what_it_learned():
    learned = optimise.LearnedDirection()
    learned.update(np.full(7, 0.6), np.full(7, 0.4), 1.0)
    base, rng = np.full(7, 0.5), np.random.default_rng(0)
    moved = optimise.Proposer(step=0.2, noise=0.0, learn=True).propose(base, rng, None, None, learned)
    assert np.allclose(moved, 0.7)  # base + step * (1, ..., 1), no mask
    # the random proposer (the ablation) ignores it: a masked random-sign step
    random = optimise.Proposer(step=0.2, noise=0.0, learn=True, use_feedback=False).propose(base, rng, None, None,
                                                                                            learned)  # fmt: skip
    assert not np.allclose(random, 0.7) and np.sum(np.abs(random - base) > 1e-9) < 7
    # without anything learned the learning proposer is the sign proposer
    fresh = optimise.Proposer(step=0.2, noise=0.0, learn=True).propose(base, np.random.default_rng(1), None, None,
                                                                       optimise.LearnedDirection())  # fmt: skip
    assert np.sum(np.abs(fresh - base) > 1e-9) < 7


def test_best_of_n_picks_the_highest_true_utility(items):
    def brightness(images):
        return np.array([float(np.mean(image)) for image in images])

    ctx = optimise.ItemContext(items[0], ParametricEditor(), judge(), np.random.default_rng(3), MEAN, STD)
    outcome = optimise.run_lockstep([optimise.best_of_n(ctx, brightness, 8)], ctx.judge)[0]
    assert outcome.calls == 8 and outcome.rendered == 8 and outcome.rounds == 8 and outcome.best.ssim >= 0.5
    # the same draws, rendered again: the pick is their brightest
    rng = np.random.default_rng(3)
    again = optimise.ItemContext(items[0], ParametricEditor(), judge(), rng, MEAN, STD)
    images = [again.render(rng.uniform(0.0, 1.0, 7)).image for _ in range(8)]
    assert np.array_equal(outcome.best.image, images[int(np.argmax(brightness(images)))])
    with pytest.raises(ValueError, match="n must be"):
        next(optimise.best_of_n(ctx, brightness, 0))
