"""The long streams of the space claim: repeated word passes, the vectorised attack, theta's cached estimate."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.resettable_sketch.evaluate import attack, long_attacks
from zoo.resettable_sketch.robust import RobustSketch
from zoo.resettable_sketch.sketches import ExactSketch, HashThresholdSketch, ThetaSketch
from zoo.resettable_sketch.streams import Adversary, article_word_ids, word_stream
from zoo.resettable_sketch.table import INC


def test_word_passes_reuse_the_text_with_fresh_ids_and_their_own_unlearning():
    one = word_stream(seed=4, max_articles=3)
    two = word_stream(seed=4, max_articles=3, repeats=2)
    vocabulary = article_word_ids()[1]
    n = len(one[0])
    assert all(np.array_equal(a, b[:n]) for a, b in zip(one, two, strict=True))  # pass 0 is the one-pass stream
    first, second = (two[0][:n] == INC), (two[0][n:] == INC)
    assert np.array_equal(two[1][n:][second], one[1][first] + vocabulary)  # the same tokens, shifted ids
    assert two[1][n:].min() >= vocabulary  # no id of pass 1 was seen in pass 0
    active = ExactSketch("card").update_batch(*two, trajectory=True)
    assert active[-1] > 1.8 * ExactSketch("card").update_batch(*one, trajectory=True)[-1]
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        word_stream(max_articles=1, repeats=0)


def _table(sketch):
    inner = getattr(sketch, "inner", sketch)
    return [part.copy() for part in inner.table.items()], float(inner.arrays["total"])


@pytest.mark.parametrize("mode", ["hide", "inflate"])
@pytest.mark.parametrize(
    "make",
    [
        lambda: HashThresholdSketch("card", 0.3, seed=2),
        lambda: HashThresholdSketch("sum", 0.5, seed=1),
        lambda: ExactSketch("card"),
        lambda: ExactSketch("sum"),
    ],
    ids=["hash_card", "hash_sum", "exact_card", "exact_sum"],
)
def test_the_vectorised_attack_equals_the_probe_loop(make, mode):
    looped, vectorised = make(), make()
    for sketch in (looped, vectorised):  # some state first: the attack continues a stream
        sketch.update_batch(np.zeros(50, np.int8), np.arange(50), np.ones(50, np.int64))
    slow, fast = Adversary(mode=mode), Adversary(mode=mode)
    for n in (2000, 300):  # twice: the second attack continues from the first one's keys and counts
        a, b = slow.run(looped, n, vectorise=False), fast.run(vectorised, n)
        for field in ("estimates", "truth", "stored"):
            assert np.array_equal(getattr(a, field), getattr(b, field)), field
        assert (a.resets, a.updates) == (b.resets, b.updates)
        if isinstance(looped, HashThresholdSketch):  # both branches of the adversary were taken
            assert 0 < a.resets < n
    assert slow.state_dict() == fast.state_dict()
    assert looped.estimate() == vectorised.estimate() and looped.stored_keys() == vectorised.stored_keys()
    (keys_a, values_a), total_a = _table(looped)
    (keys_b, values_b), total_b = _table(vectorised)
    assert np.array_equal(keys_a, keys_b) and np.array_equal(values_a, values_b) and total_a == total_b


def test_the_vectorised_attack_is_only_for_key_determined_sketches():
    robust = RobustSketch("card", rate=0.5, eps=1.0, seed=0, horizon=4095)
    assert not hasattr(robust, "moves") and not hasattr(ThetaSketch(9), "moves")
    assert long_attacks("robust", robust) and long_attacks("hash_threshold", HashThresholdSketch("card", 0.5))
    assert not long_attacks("robust_noiseless", robust) and not long_attacks("datasketches_theta", ThetaSketch(9))
    # a positive threshold changes which probes count as moved: the loop plays it
    looped = Adversary(threshold=5.0).run(HashThresholdSketch("card", 0.5, seed=0), 200)
    assert looped.resets == 0  # a sampled key raises the estimate by 2 < 5: nothing is reset


class _RecomputingTheta(ThetaSketch):
    """Theta as before the cache: every update drops the cached estimate."""

    def update(self, op, key, delta=1):
        (self.inserted if op == INC else self.removed).update(int(key))
        self._cached = None
        self._compact.pop(op, None)


@pytest.mark.parametrize("mode", ["hide", "inflate"])
def test_theta_keeps_its_estimate_only_while_the_sketch_is_unchanged(mode):
    cached = Adversary(mode=mode).run(ThetaSketch(lg_k=6, seed=3), 3000)
    recomputed = Adversary(mode=mode).run(_RecomputingTheta(lg_k=6, seed=3), 3000)
    assert np.array_equal(cached.estimates, recomputed.estimates) and cached.resets == recomputed.resets
    assert np.array_equal(cached.stored, recomputed.stored)


def test_attack_metrics_score_the_last_half_and_the_space_against_exact_counting():
    scores, result = attack(HashThresholdSketch("card", 0.5, seed=0), "inflate", 400, f_min=10)
    error = np.abs(result.estimates - result.truth) / result.prefix_max
    assert scores["frac_probes_within_0.15_last_half_inflate"] == (error[200:] <= 0.15).mean() == 0.0
    assert scores["exact_keys_inflate"] == result.truth.max() == scores["max_stored_keys_inflate"]
    assert scores["space_ratio_inflate"] == 1.0  # it stores every key that stays: no saving on this attack
