"""Policies: OFUL, phased elimination, the FairLinBandit wrapper, LinNash's constants, MABWiser agreement."""

import math

import numpy as np
import pytest

from zoo.fair_lin_bandit.elimination import LinNashElimination, PhasedElimination
from zoo.fair_lin_bandit.fair import FairLinBandit, linnash, linnash_part1_length, linnash_part1_width, phase1_length
from zoo.fair_lin_bandit.instances import build_instance, check_instance
from zoo.fair_lin_bandit.oful import OFUL
from zoo.fair_lin_bandit.policies import run_episode, simulate


def _batch(arms, mu, copies=1):
    return np.repeat(np.asarray(arms, float)[None], copies, 0), np.repeat(np.asarray(mu, float)[None], copies, 0)


def test_oful_finds_the_best_of_two_orthogonal_arms():
    arms, mu = _batch(np.eye(2), [0.3, 0.8], copies=4)
    out = simulate(OFUL(2000), arms, mu, 2000, np.random.default_rng(0))
    assert (out["chosen"][:, -500:] == 1).mean() > 0.95
    assert (out["chosen"][:, :20] == 0).any()  # it did explore the other arm


def test_phased_elimination_never_pulls_an_eliminated_arm():
    instance = build_instance("phishing", 3)
    arms, mu = _batch(instance.arms, instance.mu, copies=3)
    policy = PhasedElimination(20_000)
    chosen = simulate(policy, arms, mu, 20_000, np.random.default_rng(1))["chosen"]
    eliminated_any = False
    for b in range(3):
        eliminated = set(policy.eliminated_log[b])
        eliminated_any |= bool(eliminated)
        # the log is in elimination order; an arm eliminated at round t must not appear after t
        for arm in eliminated:
            last_pull = np.flatnonzero(chosen[b] == arm)
            assert not policy.active[b, arm]
            assert len(last_pull) == 0 or last_pull[-1] < np.flatnonzero(~np.isin(chosen[b], [arm]))[-1]
        late = chosen[b, -2000:]
        assert not np.isin(late, list(eliminated)).any()
    assert eliminated_any, "no arm was eliminated: the test would pass vacuously"


def test_phased_elimination_pulls_only_active_arms_within_each_phase():
    instance = build_instance("shuttle", 0)
    arms, mu = _batch(instance.arms, instance.mu)
    policy = PhasedElimination(20_000)
    rng = np.random.default_rng(2)
    rows = np.arange(1)
    for _ in range(20_000):
        index = policy.select(arms)
        assert policy.active[0, index[0]], "pulled an arm that is no longer active"
        policy.update(arms[rows, index], (rng.random(1) < mu[rows, index]).astype(float))
    assert policy.active.sum() < arms.shape[1]


def test_fair_ucb_with_p_one_and_no_phase1_equals_oful():
    instance = build_instance("solarflare", 2)
    arms, mu = _batch(instance.arms, instance.mu, copies=2)
    plain = simulate(OFUL(3000), arms, mu, 3000, np.random.default_rng(5))
    wrapped = FairLinBandit(OFUL(3000), 3000, p=1.0, length=0, rng=np.random.default_rng(99))
    fair = simulate(wrapped, arms, mu, 3000, np.random.default_rng(5))
    np.testing.assert_array_equal(plain["chosen"], fair["chosen"])
    # and with a Phase 1 the two differ (so the equality above is not vacuous)
    with_phase1 = simulate(FairLinBandit(OFUL(3000), 3000, p=1.0), arms, mu, 3000, np.random.default_rng(5))
    assert (with_phase1["chosen"] != plain["chosen"]).any()


def test_our_oful_matches_mabwiser_linucb_with_a_fixed_beta():
    mabwiser = pytest.importorskip("mabwiser.mab", reason="MABWiser is not installed (pip install mabwiser)")
    from mabwiser.mab import LearningPolicy

    num_arms, horizon, alpha = 5, 300, 0.7
    means = np.linspace(0.1, 0.9, num_arms)
    noise = np.random.default_rng(3).normal(0, 0.3, size=horizon)
    ours = OFUL(horizon, ridge=1.0, beta=alpha)
    theirs = mabwiser.MAB(list(range(num_arms)), LearningPolicy.LinUCB(alpha=alpha, l2_lambda=1.0), seed=0)
    arms = np.eye(num_arms)[None]
    first = list(range(num_arms))  # one pull each, so no tie decides the first rounds
    rewards = [means[a] + noise[i] for i, a in enumerate(first)]
    theirs.fit(first, rewards, contexts=[[1.0]] * num_arms)
    for a, r in zip(first, rewards, strict=True):
        ours.update(arms[:, a], np.array([r]))
    picks_ours, picks_theirs = [], []
    for t in range(num_arms, horizon):
        mine = int(ours.select(arms)[0])
        other = int(theirs.predict([[1.0]]))
        picks_ours.append(mine)
        picks_theirs.append(other)
        reward = means[mine] + noise[t]
        ours.update(arms[:, mine], np.array([reward]))
        theirs.partial_fit([other], [means[other] + noise[t]], contexts=[[1.0]])
    assert picks_ours == picks_theirs
    assert len(set(picks_ours)) > 1


def test_linnash_constants_by_hand():
    # Sources (module.py, item 7): T~ = 3 sqrt(T d nu log(T K)), T' = 2/3 T~ doubling and the NCB multiplier 6 from
    # dhruv-sarkar/LinNash (main.py); the Part I rule gamma - 16 sqrt(3 gamma ...) from NP-Hardest/FairLinBandit
    # (algorithms/linnash.py) with the finite-arm d log(T K) in place of its d**2.5 log T.
    # T = 20,000, d = 10, K = 200: log(T K) = log(4e6) = 15.2018; T~ = ceil(3 sqrt(2e5 * 15.2018)) = 5231
    assert linnash_part1_length(20_000, 10, 200) == 5231
    # Part I width 16 sqrt(3 gamma d log(TK) / T~) at gamma = 0.9: 16 sqrt(3 * 0.9 * 10 * 15.2018 / 5231)
    assert float(linnash_part1_width(np.array(0.9), 10, 5231, 20_000, 200)) == pytest.approx(4.4818, abs=1e-3)
    # Part II: T' = 2/3 T~ = 3487.33; NCB width 6 sqrt(0.9 * 10 * 15.2018 / 3487.33) = 1.1884
    part2 = LinNashElimination(20_000, first_length=2 * 5231 / 3)
    assert float(part2.width(np.array(0.9), 10, 200, 2 * 5231 / 3)) == pytest.approx(1.1884, abs=1e-3)
    policy = linnash(20_000, 10, 200, np.random.default_rng(0))
    assert policy.fixed_length == 5231 and policy.base.first_length == pytest.approx(3487.33, abs=0.01)
    assert policy.sampler == "linnash" and policy.ridge == 0.0 and not policy.share_phase1


def test_linnash_part1_round_robin_by_hand():
    # Arms e1, e2 and (0.6, 0.3) inside their hull: the design is (1/2, 1/2, 0). With T~ = 30 each design arm gets
    # ceil(1/2 * 30 / 3) = 5 round-robin pulls, alternating e1, e2; a fair coin sends the other rounds uniform.
    arms = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.3]])
    mu = arms @ np.array([0.2, 0.6])
    policy = FairLinBandit(
        LinNashElimination(1000, 20.0), 1000, rng=np.random.default_rng(3), width="linnash", length=30,
        ridge=0.0, share_phase1=False, sampler="linnash",
    )  # fmt: skip
    batch_arms, batch_mu = _batch(arms, mu, copies=3)
    design_pulls, probs = [], []
    for _ in range(30):
        before = policy.rr_count.copy() if policy.length is not None else np.zeros((3, 2), int)
        chosen = policy.select(batch_arms)
        probs.append(policy.last_probs.copy())
        step = policy.rr_count - before
        pulled = [(b, policy.rr_arm[b, step[b].argmax()]) for b in range(3) if step[b].any()]
        assert all(chosen[b] == arm for b, arm in pulled)  # a round-robin round pulls the arm it counts
        design_pulls += [arm for _, arm in pulled]
        policy.update(batch_arms[np.arange(3), chosen], np.ones(3))
    assert np.array_equal(policy.rr_cap, np.full((3, 2), 5)) and np.array_equal(policy.rr_count, policy.rr_cap)
    # while the round robin is pending, P(x) = 1/2 * 1/3 + 1/2 [x = next design arm]; once done, uniform
    assert np.allclose(probs[0], [[1 / 6 + 0.5, 1 / 6, 1 / 6]] * 3)
    assert np.allclose(probs[-1], 1 / 3)
    assert sorted(set(design_pulls)) == [0, 1]


def test_phase1_length_by_hand():
    # ceil(sqrt(20000 * 10 * log(4e6))) = ceil(1743.66) = 1744; p = -5 multiplies by sqrt(6)
    assert phase1_length(20_000, 10, 200, p=0.0) == 1744
    assert phase1_length(20_000, 10, 200, p=-5.0) == math.ceil(1743.6604 * math.sqrt(6))
    assert phase1_length(20_000, 10, 200, p=0.5, c1=0.5) == 872


def test_fair_exploration_keeps_every_round_above_a_floor():
    instance = build_instance("shuttle", 0)
    out = run_episode("fair_pe", instance.arms, instance.mu, 2000, seed=0, replicates=2)
    length = phase1_length(2000, 10, 200)
    phase1 = out["expected"][:, :length]
    assert np.allclose(phase1, phase1[0, 0])  # a fixed mixture: its expectation is the same every round
    assert phase1[0, 0] > instance.best / instance.arms.shape[1]


# ------------------------------------------------------------------------------------------- bad inputs


def test_p_above_one_is_rejected():
    with pytest.raises(ValueError, match="p <= 1"):
        FairLinBandit(OFUL(100), 100, p=1.5)


def test_phase1_longer_than_the_horizon_is_rejected():
    instance = build_instance("phishing", 0)
    with pytest.raises(ValueError, match="longer than the horizon"):
        run_episode("fair_pe", instance.arms, instance.mu, 50, seed=0, replicates=1, c1=5.0)


def test_fewer_than_two_arms_is_rejected():
    with pytest.raises(ValueError, match="K >= 2"):
        run_episode("oful", np.ones((1, 3)), np.ones(1) * 0.5, 10, seed=0)
    with pytest.raises(ValueError, match="K >= 2"):
        build_instance("phishing", 0, num_arms=1)


def test_nonpositive_means_with_nonpositive_p_name_the_floor():
    with pytest.raises(ValueError, match="floor"):
        check_instance(np.eye(3), None, np.array([0.5, 0.0, 0.2]), p=0.0)
    check_instance(np.eye(3), None, np.array([0.5, 0.0, 0.2]), p=1.0)  # average regret is fine with 0


def test_dimension_mismatch_is_rejected():
    with pytest.raises(ValueError, match="does not match"):
        check_instance(np.eye(3), np.ones(4), np.full(3, 0.5))


def test_unknown_phase1_sampler_or_width_is_rejected():
    with pytest.raises(ValueError, match="sampler must be"):
        FairLinBandit(OFUL(100), 100, sampler="john")
    with pytest.raises(ValueError, match="width must be"):
        FairLinBandit(OFUL(100), 100, width="hoeffding")


# ------------------------------------------------------------------------ scaled LinNash, Phase 1 off


def _easy_instance(seed=0, num_arms=20, dim=3):
    """A small instance with wide gaps: arms on the positive orthant of the sphere, means from 0.01 to 0.9."""
    rng = np.random.default_rng(seed)
    arms = np.abs(rng.standard_normal((num_arms, dim)))
    arms /= np.linalg.norm(arms, axis=1, keepdims=True)
    theta = np.array([1.0, 0.05, 0.05])
    raw = arms @ theta
    mu = np.maximum(0.9 * raw / raw.max(), 0.01)
    return arms, mu


def test_scaled_linnash_eliminates_arms_where_the_published_constants_do_not():
    arms, mu = _easy_instance()
    batch_arms, batch_mu = _batch(arms, mu, copies=2)
    kept = {}
    for scale in (1.0, 0.1):
        policy = linnash(4000, 3, len(arms), np.random.default_rng(0), multiplier=1.0, width_scale=scale)
        out = simulate(policy, batch_arms, batch_mu, 4000, np.random.default_rng(1))
        kept[scale] = out["active"]
        late = out["chosen"][:, -500:]
        assert policy.active()[np.arange(2)[:, None], late].all()  # never pulls an eliminated arm
    assert (kept[1.0] == len(arms)).all(), "the published constants eliminate no arm on this instance"
    assert (kept[0.1] < len(arms)).all(), "the scaled constants eliminate at least one arm"
    best = int(np.argmax(mu))
    assert policy.active()[:, best].all()  # and not the best one


def test_linnash_width_scale_multiplies_both_constants():
    part2 = LinNashElimination(20_000, first_length=2 * 5231 / 3, width_scale=0.25)
    assert float(part2.width(np.array(0.9), 10, 200, 2 * 5231 / 3)) == pytest.approx(0.25 * 1.1884, abs=1e-3)
    assert float(linnash_part1_width(np.array(0.9), 10, 5231, 20_000, 200, scale=0.25)) == pytest.approx(
        0.25 * 4.4818, abs=1e-3
    )
    policy = linnash(20_000, 10, 200, np.random.default_rng(0), width_scale=0.25)
    assert policy.linnash_scale == 0.25 and policy.base.width_scale == 0.25
    with pytest.raises(ValueError, match="width_scale"):
        LinNashElimination(100, 10.0, width_scale=0.0)


def test_c1_zero_is_phase1_off_and_the_base_alone():
    instance = build_instance("solarflare_decoy", 2)
    arms, mu = _batch(instance.arms, instance.mu, copies=2)
    plain = simulate(OFUL(2000), arms, mu, 2000, np.random.default_rng(5))
    fair = simulate(FairLinBandit(OFUL(2000), 2000, c1=0.0), arms, mu, 2000, np.random.default_rng(5))
    np.testing.assert_array_equal(plain["chosen"], fair["chosen"])
    assert phase1_length(20_000, 10, 200, c1=0.0) == 0
    with pytest.raises(ValueError, match="c1 must be >= 0"):
        FairLinBandit(OFUL(100), 100, c1=-0.1)


def test_simulate_reports_the_arms_left():
    instance = build_instance("phishing", 3)
    arms, mu = _batch(instance.arms, instance.mu, copies=2)
    policy = PhasedElimination(5000)
    out = simulate(policy, arms, mu, 5000, np.random.default_rng(1))
    np.testing.assert_array_equal(out["active"], policy.active.sum(axis=1))
    assert (out["active"] < 200).all()
    assert (simulate(OFUL(50), arms, mu, 50, np.random.default_rng(1))["active"] == 200).all()
