"""``reference_tanimoto_expand`` (BOBA's design, then expansion from the best labels by Tanimoto) and the tuning
helpers of the many-rounds comparison."""

from __future__ import annotations

import numpy as np
import pytest

from zoo._errors import ZooError
from zoo.boba.bandit import Campaign, CampaignConfig, CountingOracle, count_of
from zoo.boba.evaluate_reference import HitSimilarity, expansion_scores, tanimoto_expand
from zoo.boba.tune import choose_rounds, many_rounds_overrides, many_rounds_trials


def _bits(*on: tuple[int, ...]) -> np.ndarray:
    """Packed 2048-bit fingerprints with the given on-bits, one row per tuple."""
    dense = np.zeros((len(on), 2048), np.uint8)
    for row, bits in enumerate(on):
        dense[row, list(bits)] = 1
    return np.packbits(dense, axis=1)


def test_expansion_scores_are_max_and_mean_tanimoto_to_the_hits():
    fps = _bits((0, 1), (0, 1, 2, 3), (2, 3), (4,))
    similarity = HitSimilarity(fps)
    # Tanimoto to molecule 0 {0,1}: 1, 2/4, 0, 0; to molecule 2 {2,3}: 0, 2/4, 1, 0
    candidates = np.array([1, 3])
    np.testing.assert_allclose(expansion_scores(similarity, np.array([0, 2]), candidates, "max"), [0.5, 0.0])
    np.testing.assert_allclose(expansion_scores(similarity, np.array([0]), np.array([1, 2, 3]), "mean"), [0.5, 0, 0])
    np.testing.assert_allclose(expansion_scores(similarity, np.array([0, 2]), np.array([1, 3]), "mean"), [0.5, 0.0])
    with pytest.raises(ZooError, match="aggregate must be one of max, mean"):
        expansion_scores(similarity, np.array([0]), candidates, "sum")
    with pytest.raises(ZooError, match="at least one labelled hit"):
        expansion_scores(similarity, np.array([], np.int64), candidates, "max")


def _toy(size=400, arms=20):
    rng = np.random.default_rng(5)
    fps = np.packbits(rng.random((size, 2048)) < 0.02, axis=1)
    scores = rng.random(size)
    arm_ids = rng.permutation(np.arange(size) % arms)
    return fps, scores, arm_ids


def test_same_design_as_a_boba_campaign_of_the_seed_and_the_same_budget():
    fps, scores, arm_ids = _toy()
    config = CampaignConfig(rounds=3, batch_fraction=0.025, initial_fraction=0.05)
    for seed in (0, 4):
        campaign = Campaign(arm_ids, CountingOracle(scores), config, seed=seed)
        campaign.initialise()
        record = tanimoto_expand(fps, scores, arm_ids, config, seed, hits=3)
        np.testing.assert_array_equal(record["labelled"][:20], campaign.labelled)
        assert record["oracle_calls"] == 20 + 3 * 10 == len(set(record["labelled"].tolist()))
        assert record["batch"] == count_of(0.025, 400) == 10


def test_each_round_takes_the_unlabelled_molecules_nearest_to_the_best_labels():
    fps, scores, arm_ids = _toy()
    config = CampaignConfig(rounds=1, batch_fraction=0.025, initial_fraction=0.05)
    record = tanimoto_expand(fps, scores, arm_ids, config, seed=1, hits=2, aggregate="max")
    design, batch = record["labelled"][:20], record["labelled"][20:]
    queries = design[np.argsort(-scores[design])[:2]]
    unlabelled = np.setdiff1d(np.arange(400), design)
    similarity = HitSimilarity(fps)
    nearest = np.maximum(similarity(int(queries[0])), similarity(int(queries[1])))[unlabelled]
    threshold = np.sort(nearest)[::-1][9]  # the 10th largest: every chosen one reaches it, no other exceeds it
    chosen = np.isin(unlabelled, batch)
    assert chosen.sum() == 10 and nearest[chosen].min() >= threshold and nearest[~chosen].max() <= threshold


def test_bad_reference_settings_are_refused():
    fps, scores, arm_ids = _toy()
    config = CampaignConfig(rounds=1, batch_fraction=0.025, initial_fraction=0.05)
    with pytest.raises(ZooError, match="hits must be >= 1"):
        tanimoto_expand(fps, scores, arm_ids, config, 0, hits=0)
    with pytest.raises(ZooError, match="aggregate must be one of"):
        tanimoto_expand(fps, scores, arm_ids, config, 0, aggregate="median")
    big = CampaignConfig(rounds=2, batch_fraction=0.6, initial_fraction=0.1)
    with pytest.raises(ZooError, match="batch of 240 is larger than the unlabelled pool of 120"):
        tanimoto_expand(fps, scores, arm_ids, big, 0)


def test_many_rounds_spend_the_recipes_oracle_calls_in_equal_batches():
    args = dict(arg.lstrip("-").split("=") for arg in many_rounds_overrides(18))
    assert args["model.init_args.rounds"] == "18" and args["model.init_args.epochs_per_round"] == "10"
    assert count_of(float(args["model.init_args.batch_fraction"]), 45540) * 18 == 954 == 6 * count_of(0.0035, 45540)
    args = dict(arg.lstrip("-").split("=") for arg in many_rounds_overrides(9))
    assert count_of(float(args["model.init_args.batch_fraction"]), 45540) == 106
    with pytest.raises(ValueError, match="7 rounds do not divide"):
        many_rounds_overrides(7)


def test_rounds_and_c_are_chosen_by_the_largest_validation_gap_of_ucb_over_greedy_at_the_same_rounds():
    trials = many_rounds_trials()
    assert len(trials) == 6 and trials[4] == {"rounds": 18, "arm_rule": "ucb", "exploration": 0.2}
    recall = {(9, "ucb", 0.5): 0.60, (9, "greedy", 0.5): 0.58, (18, "ucb", 0.5): 0.55, (18, "greedy", 0.5): 0.45,
              (18, "ucb", 0.2): 0.58, (18, "ucb", 0.05): 0.40}  # fmt: skip
    results = {
        str(i): {seed: {"recall": recall[c["rounds"], c["arm_rule"], c.get("exploration", 0.5)]} for seed in "01"}
        for i, c in enumerate(trials)
    }
    chosen = choose_rounds(trials, results)
    assert (chosen["rounds"], chosen["exploration"], chosen["seeds"]) == (18, 0.2, 2)
    assert chosen["validation_gap"] == pytest.approx(0.13)  # 0.58 - 0.45, not 0.60 - 0.58 at R = 9
    del results[str(trials.index({"rounds": 18, "arm_rule": "greedy"}))]  # no greedy at 18: only R = 9 pairs
    assert choose_rounds(trials, results) == {"rounds": 9, "exploration": 0.5, "validation_gap": 0.02, "seeds": 2}
    assert choose_rounds(trials, {}) is None
