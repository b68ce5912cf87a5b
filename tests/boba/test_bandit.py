"""The campaign's math: UCB1 order, rewards, initial design, acquisition and the inference and oracle counters."""

from __future__ import annotations

import math

import numpy as np
import pytest

from zoo._errors import ZooError
from zoo.boba.bandit import (
    Campaign,
    CampaignConfig,
    CountingOracle,
    acquire,
    arm_priority,
    arm_rewards,
    initial_design,
)


def test_ucb_pulls_unpulled_arms_first():
    rng = np.random.default_rng(0)
    means = np.array([0.9, 0.1, 0.8, 0.0, 0.3])
    pulls = np.array([3, 0, 2, 0, 1])
    order = arm_priority("ucb", means, pulls, exploration=0.5, rng=rng)
    assert set(order[:2]) == {1, 3}  # U = inf, although their means are the lowest
    # then by U_a = mean + c sqrt(2 ln N / n_a), N = 6: arm 2 (0.8 + 0.5 * 1.338 = 1.469), arm 0 (0.9 + 0.5 *
    # 1.093 = 1.447), arm 4 (0.3 + 0.5 * 1.893 = 1.246)
    u = means + 0.5 * np.sqrt(2 * math.log(6) / np.maximum(pulls, 1))
    assert list(order[2:]) == [2, 0, 4] == sorted([0, 2, 4], key=lambda a: -u[a])
    assert set(arm_priority("greedy", means, pulls, 0.5, rng)[:2]) == {1, 3}
    assert list(arm_priority("greedy", means, np.ones(5, int), 0.5, rng)) == [0, 2, 4, 1, 3]  # c = 0: the means


def test_arm_rewards_top_k_and_best():
    arm_ids = np.array([0, 0, 1, 1, 2, 2])
    labelled = np.array([0, 1, 2, 3, 4])
    values = np.array([0.9, 0.1, 0.8, 0.7, 0.2])
    # k = 2 (capped at half of 5 labels -> 3 would be allowed): top-2 threshold 0.8 -> arm 0: 1/2, arm 1: 1/2, arm 2: 0
    np.testing.assert_allclose(arm_rewards(arm_ids, labelled, values, 3, "topk", k=2), [0.5, 0.5, 0.0])
    # k = 10 is capped at ceil(5 / 2) = 3: threshold 0.7 -> arm 0: 1/2, arm 1: 2/2, arm 2: 0
    np.testing.assert_allclose(arm_rewards(arm_ids, labelled, values, 3, "topk", k=10), [0.5, 1.0, 0.0])
    # best, min-max over the labels (0.1 .. 0.9)
    np.testing.assert_allclose(arm_rewards(arm_ids, labelled, values, 3, "best", k=2), [1.0, 0.875, 0.125])


def test_initial_design_touches_every_arm_when_they_fit():
    arm_ids = np.repeat(np.arange(10), 20)
    design = initial_design(arm_ids, 15, np.random.default_rng(1))
    assert len(design) == len(set(design)) == 15
    assert set(arm_ids[design]) == set(range(10))


def test_acquisition_takes_the_best_ucb_and_refuses_a_batch_larger_than_the_pool():
    mean, std = np.array([0.1, 0.5, 0.3, 0.2]), np.array([0.5, 0.0, 0.1, 0.0])
    assert list(acquire(mean, std, 1.0, 2)) == [0, 1]  # 0.6, 0.5
    assert list(acquire(mean, std, 0.0, 2)) == [1, 2]  # greedy
    with pytest.raises(ZooError, match="batch of 5 is larger than the unlabelled pool of 4"):
        acquire(mean, std, 1.0, 5)


def _toy(strategy="boba", arm_rule="ucb", size=1000, arms=20, **kw):
    rng = np.random.default_rng(3)
    arm_ids = rng.permutation(np.arange(size) % arms)
    scores = rng.random(size)
    config = CampaignConfig(strategy=strategy, arm_rule=arm_rule, arm_fraction=0.1, rounds=3, **kw)
    return Campaign(arm_ids, CountingOracle(scores), config, seed=0), scores


def test_inference_counter_equals_the_summed_sizes_of_the_arms_scored():
    campaign, scores = _toy()
    campaign.initialise()
    seen = []

    def predict(indices):
        seen.append(len(indices))
        return scores[indices] * 0, np.ones(len(indices))

    for _ in range(3):
        free = campaign.unlabelled_per_arm()
        entry = campaign.round(predict)
        assert entry["scored"] == free[entry["arms"]].sum() == seen[-1]
        assert len(entry["arms"]) == 2  # m = 10% of 20 arms
    assert campaign.inferences == sum(seen)
    assert campaign.oracle_calls == 10 + 3 * 10 == len(set(campaign.labelled))
    design_arms = len(set(campaign.arm_ids[campaign.labelled[:10]]))  # 10 designs < 20 arms: not all touched
    assert campaign.pulls.sum() == design_arms + 3 * 2


def test_full_greedy_scores_every_unlabelled_molecule_and_random_scores_none():
    campaign, scores = _toy(strategy="full_greedy")
    campaign.initialise()
    campaign.round(lambda idx: (scores[idx], np.zeros(len(idx))))
    assert campaign.inferences == 1000 - 10
    assert campaign.full_library_inferences() == 990
    # a perfect surrogate takes the 10 best unlabelled molecules
    unlabelled_after_design = np.setdiff1d(np.arange(1000), campaign.labelled[:10])
    best = unlabelled_after_design[np.argsort(-scores[unlabelled_after_design])[:10]]
    assert set(campaign.labelled[10:]) == set(best)
    random, _ = _toy(strategy="random")
    random.initialise()
    random.round(None)
    assert random.inferences == 0 and random.oracle_calls == 20


def test_oracle_counts_every_call_and_refuses_a_repeat():
    oracle = CountingOracle(np.arange(5.0))
    assert list(oracle(np.array([1, 3]))) == [1.0, 3.0]
    assert oracle.calls == 2
    with pytest.raises(ZooError, match="twice"):
        oracle(np.array([3]))


def test_bad_campaign_settings_are_refused():
    with pytest.raises(ZooError, match="arm_rule must be one of"):
        CampaignConfig(arm_rule="eps")
    with pytest.raises(ZooError, match="batch_fraction must be in"):
        CampaignConfig(batch_fraction=0.0)
    campaign, _ = _toy(size=100, arms=5, batch_fraction=0.6, initial_fraction=0.5)
    campaign.initialise()
    with pytest.raises(ZooError, match="batch of 60 is larger than the unlabelled pool of 50"):
        campaign.round(lambda idx: (np.zeros(len(idx)), np.zeros(len(idx))))
