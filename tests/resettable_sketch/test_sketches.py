"""The sketches: exactness at eps = inf and rate 1, unbiasedness, halving, resets, the attack, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from zoo._errors import ZooError
from zoo.resettable_sketch.robust import RobustSketch
from zoo.resettable_sketch.sketches import ExactSketch, HashThresholdSketch, ThetaSketch, stat_values
from zoo.resettable_sketch.streams import Adversary, churn_stream
from zoo.resettable_sketch.table import INC, RESET, KeyTable, check_updates


def _random_stream(n=6000, universe=800, reset_prob=0.25, seed=1):
    """Keys recur after resets (re-activations) and get several Incs while active."""
    rng = np.random.default_rng(seed)
    ops = (rng.random(n) < reset_prob).astype(np.int8)
    keys = rng.integers(0, universe, n) * 7919 - 10**6  # negative and positive ids
    deltas = np.where(ops == INC, rng.integers(0, 5, n), 0)  # Inc by 0 is allowed and changes nothing
    return ops, keys, deltas


def _brute_force(stat, stream, q=0.5, cap=None):
    values: dict[int, int] = {}
    for op, key, delta in zip(*(part.tolist() for part in stream)):
        values[key] = values.get(key, 0) + delta if op == INC else 0
    final = np.array(list(values.values()))
    return float(stat_values(stat, final if cap is None else np.minimum(final, cap), q).sum())


@pytest.mark.parametrize("stat", ["card", "sum", "lp"])
def test_exact_sketch_matches_brute_force_on_both_paths(stat):
    stream = _random_stream()
    truth = _brute_force(stat, stream)
    batch = ExactSketch(stat)
    trajectory = batch.update_batch(*stream, trajectory=True)
    single = ExactSketch(stat)
    for op, key, delta in zip(*(part.tolist() for part in stream)):
        single.update(op, key, delta)
    assert batch.estimate() == pytest.approx(truth) and single.estimate() == pytest.approx(truth)
    assert trajectory[-1] == pytest.approx(truth)
    assert trajectory[999] == pytest.approx(_brute_force(stat, tuple(p[:1000] for p in stream)))


@pytest.mark.parametrize("stat", ["card", "sum", "lp"])
@pytest.mark.parametrize("path", ["batch", "single"])
def test_robust_is_exact_with_infinite_eps_and_rate_one(stat, path):
    stream = _random_stream()
    sketch = RobustSketch(stat, rate=1.0, eps=None, capacity=4096, horizon=1024, value_cap=10**6)
    if path == "batch":
        for start in range(0, len(stream[0]), 777):  # uneven chunks, trees roll over on the way
            sketch.update_batch(*(part[start : start + 777] for part in stream))
    else:
        for op, key, delta in zip(*(part.tolist() for part in stream)):
            sketch.update(op, key, delta)
    assert sketch.estimate() == pytest.approx(_brute_force(stat, stream), rel=1e-12)
    exact = ExactSketch(stat)
    exact.update_batch(*stream)
    assert sketch.stored_keys() == exact.stored_keys()  # rate 1 stores every active key
    hash_sketch = HashThresholdSketch(stat, rate=1.0)
    hash_sketch.update_batch(*stream)
    assert hash_sketch.estimate() == pytest.approx(_brute_force(stat, stream), rel=1e-12)


@pytest.mark.parametrize(("stat", "k"), [("card", None), ("card", 120), ("sum", 120), ("lp", None)])
def test_robust_estimator_is_unbiased(stat, k):
    """Mean over seeds (eps = inf, so only the sampling varies) is within 4 standard errors of the truth."""
    stream = _random_stream(n=3000, universe=600)
    truth = _brute_force(stat, stream, cap=8 if stat == "lp" else None)  # L_q clips values at value_cap
    estimates = []
    for seed in range(300):
        sketch = RobustSketch(stat, rate=0.2, eps=None, k=k, capacity=1024, value_cap=8, seed=seed)
        for start in range(0, 3000, 1000):
            sketch.update_batch(*(part[start : start + 1000] for part in stream))
        estimates.append(sketch.estimate())
    estimates = np.asarray(estimates)
    assert abs(estimates.mean() - truth) < 4 * estimates.std() / np.sqrt(len(estimates))
    if k is not None:
        assert sketch.rate < 0.2  # halving happened


def test_per_update_path_is_unbiased_too():
    stream = _random_stream(n=1000, universe=200)
    truth = _brute_force("card", stream)
    estimates = []
    for seed in range(120):
        sketch = RobustSketch("card", rate=0.25, eps=None, k=30, capacity=256, seed=seed)
        for op, key, delta in zip(*(part.tolist() for part in stream)):
            sketch.update(op, key, delta)
        estimates.append(sketch.estimate())
    estimates = np.asarray(estimates)
    assert abs(estimates.mean() - truth) < 4 * estimates.std() / np.sqrt(len(estimates))
    assert sketch.rate < 0.25  # halving happened on the per-update path too


def test_reset_of_an_unsampled_key_leaves_the_state_unchanged():
    sketch = RobustSketch("card", rate=0.5, eps=None, seed=3)
    for key in range(200):
        sketch.inc(key)
    stored = set(sketch.table.items()[0].tolist())
    unsampled = next(key for key in range(200) if key not in stored)
    before = {name: array.copy() for name, array in sketch.arrays.items() if not name.startswith("tree")}
    estimate = sketch.estimate()
    sketch.reset(unsampled)
    sketch.update_batch([RESET, RESET], [unsampled, 10**9], [0, 0])
    for name, array in before.items():
        if name not in ("time", "rng_state"):  # the clock always advances; no coin is drawn for a reset
            np.testing.assert_array_equal(sketch.arrays[name], array, err_msg=name)
    assert sketch.estimate() == estimate


def test_halving_keeps_each_key_with_probability_one_half():
    """Keys stored with c = 1 survive a halving with probability exactly 1/2 (binomial test)."""
    sketch = RobustSketch("card", rate=1.0, eps=None, capacity=8192, seed=5)
    sketch.update_batch(np.zeros(4000, np.int8), np.arange(4000), np.ones(4000, np.int64))
    assert sketch.stored_keys() == 4000
    sketch.halve()
    kept = sketch.stored_keys()
    assert abs(kept - 2000) < 4 * np.sqrt(4000 * 0.25)
    assert sketch.rate == 0.5 and sketch.epoch == 1
    assert sketch.estimate() == pytest.approx(kept / 0.5)  # every kept key still has c = 1


def test_sum_halving_thins_units_binomially():
    sketch = RobustSketch("sum", rate=1.0, eps=None, capacity=2048, seed=6)
    sketch.update_batch(np.zeros(1000, np.int8), np.arange(1000), np.full(1000, 8))
    sketch.halve()
    units = sketch.table.items()[1].sum()
    assert abs(units - 4000) < 4 * np.sqrt(8000 * 0.25)
    assert sketch.estimate() == pytest.approx(units / 0.5)


def test_halving_bounds_the_stored_keys():
    stream = churn_stream(60_000, seed=2)
    sketch = RobustSketch("card", rate=0.5, eps=1.0, k=500, capacity=1024, seed=0)
    for start in range(0, 60_000, 8192):
        sketch.update_batch(*(part[start : start + 8192] for part in stream))
    assert int(sketch.arrays["max_stored"]) <= 501
    assert sketch.epoch >= 4
    assert sketch.privacy_spent() == float(sketch.arrays["trees"]) >= sketch.epoch + 1  # eps = 1 per tree


def test_stored_keys_track_rate_times_active_keys_on_single_inc_activations():
    sketch = RobustSketch("card", rate=0.2, eps=1.0, seed=0)
    sketch.update_batch(np.zeros(20_000, np.int8), np.arange(20_000), np.ones(20_000, np.int64))
    assert abs(sketch.stored_keys() - 4000) < 4 * np.sqrt(20_000 * 0.16)


def test_the_attack_breaks_fixed_hashes_and_exact_outputs_but_not_the_robust_sketch():
    probes = 6000
    hashed = Adversary().run(HashThresholdSketch("card", 0.5, seed=0), probes)
    theta = Adversary().run(ThetaSketch(lg_k=9, seed=1), probes)
    exact_output = Adversary().run(RobustSketch("card", rate=0.5, eps=None, seed=0), probes)
    robust = Adversary().run(RobustSketch("card", rate=0.5, eps=1.0, seed=0, horizon=8192), probes)
    assert hashed.final_error() >= 0.9 and theta.final_error() >= 0.9
    assert exact_output.final_error() >= 0.9  # fresh coins alone do not help when the output is exact
    assert robust.final_error() < 0.35
    assert robust.truth[-1] > 0.3 * probes  # the adversary could not single out the sampled keys


def test_keytable_round_trip_and_capacity_error():
    table = KeyTable.allocate(4)
    table.commit(np.array([3, 7, 9]), np.array([1, 2, 3]))
    table.set(5, 4)
    assert table.items()[0].tolist() == [3, 5, 7, 9]
    table.set(7, 0)
    assert table.items()[0].tolist() == [3, 5, 9] and table.keys[3] == 0  # unused slots are zero
    table.set(8, 1)
    with pytest.raises(ZooError, match="larger `capacity`"):
        table.set(10, 1)


def test_bad_inputs_give_clear_errors():
    with pytest.raises(ValueError, match="0 \\(Inc\\) or 1 \\(Reset\\)"):
        check_updates([2], [1], [1])
    with pytest.raises(ValueError, match=">= 0"):
        check_updates([0], [1], [-1])
    with pytest.raises(ValueError, match="integers"):
        check_updates([0], [1.5], [1])
    with pytest.raises(ValueError, match="one length"):
        check_updates([0, 0], [1], [1])
    with pytest.raises(ValueError, match="rate must be"):
        RobustSketch(rate=0.0)
    with pytest.raises(ValueError, match="eps must be"):
        RobustSketch(eps=-1.0)
    with pytest.raises(ValueError, match="raise capacity"):
        RobustSketch(k=10, capacity=8)
    with pytest.raises(ValueError, match="power of two"):
        RobustSketch(capacity=1000)
    with pytest.raises(ValueError, match="stat must be"):
        RobustSketch(stat="median")
    with pytest.raises(ValueError, match="q must be in"):
        ExactSketch("lp", q=1.0)
    with pytest.raises(ValueError, match=">= 0"):
        RobustSketch().update(INC, 1, -3)


def test_hash_table_kernel_matches_a_dict_with_deletions_and_negative_keys():
    from zoo.resettable_sketch.hashtable import HashTable, apply_updates

    table = HashTable(np.zeros(1024, np.int64), np.zeros(1024, np.int64), np.zeros((), np.int64))
    rng = np.random.default_rng(0)
    keys = rng.integers(-400, 400, 30_000)
    ops = (rng.random(30_000) < 0.3).astype(np.int8)
    ones = np.ones(30_000, np.int64)
    change = np.zeros(30_000)
    applied, size = apply_updates(
        table.keys, table.values, 0, table.shift, ops, keys, ones, ones, 1, 1.0, 0.5, 64, 10**9, change
    )  # fmt: skip (Sum at rate 1: every unit sampled, values = counts)
    truth: dict[int, int] = {}
    for op, key in zip(ops.tolist(), keys.tolist(), strict=True):
        truth[key] = 0 if op else truth.get(key, 0) + 1
    truth = {k: v for k, v in truth.items() if v}
    stored_keys, stored_values = table.items()
    assert applied == 30_000 and size == len(truth)
    assert dict(zip(stored_keys.tolist(), stored_values.tolist(), strict=True)) == truth
    assert change.sum() == sum(truth.values())
    assert all(table.get(k) == v for k, v in truth.items()) and table.get(10**9) == 0


def test_calibration_by_hand():
    from zoo.resettable_sketch.calibration import calibrate, table_capacity

    cal = calibrate(alpha=0.1, eps=1.0, horizon=(1 << 20) - 1, z=2.0)
    sigma = 20**1.5 * 4 * 2**0.5  # L = 20 levels, worst-case popcount, s = 4
    assert cal.levels == 20 and cal.noise_std == pytest.approx(sigma) and round(sigma) == 506
    n_star = (4 + (16 + 4 * 0.01 * 4 * sigma**2) ** 0.5) / (2 * 0.01)  # z**2 = 4, alpha**2 = 0.01
    assert cal.count == int(np.ceil(n_star)) == 10_322 and cal.k == 20_644 and cal.rate == 1.0
    assert cal.f_min == 10_322 and table_capacity(cal.k) == 32768
    assert 2 * (cal.noise_std**2 / cal.count**2 + 1 / cal.count) ** 0.5 == pytest.approx(0.1, rel=1e-3)
    later = calibrate(alpha=0.1, f_min=40_000)  # a later warm-up starts at a lower rate
    assert later.rate == pytest.approx(10_322 / 40_000) and later.f_min == 40_000
    with pytest.raises(ValueError, match="must be > 0"):
        calibrate(alpha=0.0)


def test_the_registry_headline_is_the_calibrated_space_bounded_sketch():
    import zoo
    from zoo.resettable_sketch.calibration import calibrate, table_capacity
    from zoo.resettable_sketch.evaluate import ALPHA

    args = zoo.get_entry("resettable_sketch.robust").model_args
    cal = calibrate(alpha=ALPHA)
    assert (args["k"], args["rate"], args["horizon"]) == (cal.k, cal.rate, cal.horizon)
    assert args["capacity"] == table_capacity(cal.k) and args["eps"] == cal.eps
    assert zoo.get_entry("resettable_sketch.robust_unbounded").model_args["k"] is None


def test_stored_keys_never_exceed_k_on_either_path():
    ops, keys, deltas = churn_stream(40_000, seed=4)
    batch = RobustSketch("card", rate=1.0, k=500, capacity=1024, horizon=4096, seed=1)
    batch.update_batch(ops, keys, deltas)
    one = RobustSketch("card", rate=1.0, k=500, capacity=1024, horizon=4096, seed=1)
    for op, key, delta in zip(ops[:8000].tolist(), keys[:8000].tolist(), deltas[:8000].tolist(), strict=True):
        one.update(op, key, delta)
        assert one.stored_keys() < 500
    assert batch.max_stored_keys() == 500 == one.max_stored_keys() and batch.rate < 1 / 16
