"""Resettable update streams and the adaptive adversary.

A stream is three int64 arrays ``(ops, keys, deltas)`` in stream order (ops: 0 = Inc, 1 = Reset).

* :func:`churn_stream`: keys arrive one per step (Inc by a Geometric(1/2) amount); with probability
  ``reset_prob`` a key is later reset after a Geometric lifetime, and every key gets Poisson(``touch_rate``)
  further Incs while it lives. Activations use fresh keys, so no key is re-activated (this keeps
  DataSketches' theta A-not-B emulation exact). Active keys grow by about ``1 - reset_prob`` per step.
* :func:`bursty_stream`: a ramp-up to ``peak`` active keys, mass resets down to ``floor``, then more
  arrivals: the prefix maximum stays at the peak, which is what the error guarantee is relative to.
* :func:`word_stream`: Inc(word, 1) for every word of the Wikipedia articles in gensim's test data; after
  each article, every word whose current occurrences all came from that article is reset with
  probability ``unlearn_prob`` (an unlearning request). Words recur after resets. ``repeats`` passes over the
  text with fresh ids per pass give a longer stream with more distinct active keys.
* :class:`Adversary`: inserts a fresh key, reads the estimate, and learns from it whether the insertion moved
  the estimate. ``mode="hide"`` resets the keys that moved it: against a sketch whose sampling is a fixed
  function of the key (or whose output is exact) this resets exactly the sampled keys, so the estimate stays
  near 0 while the true count grows. ``mode="inflate"`` resets the keys that did *not* move it: only sampled
  keys stay active, so a non-robust estimate is ``1 / rate`` times the true count.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from zoo.resettable_sketch.table import INC, RESET

_GOLDEN = 0x9E3779B97F4A7C15


def scramble(ids: np.ndarray, seed: int) -> np.ndarray:
    """A bijection of int64 ids (odd multiplier mod 2**64, plus a seed), so key order is not arrival order."""
    with np.errstate(over="ignore"):
        z = ids.astype(np.int64).view(np.uint64) * np.uint64(_GOLDEN) + np.uint64(seed * 2 + 1)
    return z.view(np.int64)


def _sorted_events(times, ops, keys, deltas, length):
    order = np.lexsort((ops, times))  # at equal times an Inc comes before a Reset
    return ops[order][:length].astype(np.int8), keys[order][:length], deltas[order][:length]


def churn_stream(
    length: int,
    seed: int = 0,
    reset_prob: float = 0.3,
    touch_rate: float = 0.5,
    mean_lifetime: float = 2000.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random churn with ``length`` updates (see the module docstring).

    Args:
        length: Number of updates.
        seed: Seed of the stream.
        reset_prob: Fraction of keys that are reset during their life.
        touch_rate: Mean number of extra Incs per key.
        mean_lifetime: Mean steps between a key's arrival and its reset.
    """
    rng = np.random.default_rng([seed, 11])
    steps = int(length / (1 + reset_prob + touch_rate)) + 64
    while True:
        arrive = np.arange(steps, dtype=np.float64)
        dies = rng.random(steps) < reset_prob
        life = rng.geometric(1.0 / mean_lifetime, size=steps).astype(np.float64)
        end = np.where(dies, arrive + life, np.inf)
        touches = rng.poisson(touch_rate, size=steps)
        owner = np.repeat(np.arange(steps), touches)
        span = np.minimum(end[owner], steps) - arrive[owner]
        touch_time = arrive[owner] + rng.random(len(owner)) * span
        reset_owner = np.flatnonzero(end < steps)
        times = np.concatenate([arrive, touch_time, end[reset_owner]])
        if len(times) >= length:
            break
        steps = int(steps * 1.5) + 64
    ids = np.concatenate([np.arange(steps), owner, reset_owner])
    ops = np.concatenate([np.zeros(steps + len(owner), np.int8), np.ones(len(reset_owner), np.int8)])
    deltas = np.where(ops == INC, rng.geometric(0.5, size=len(ops)), 0).astype(np.int64)
    return _sorted_events(times, ops, scramble(ids, seed), deltas, length)


def bursty_stream(peak: int = 50_000, floor: int = 5_000, tail: int = 10_000, seed: int = 0):
    """Ramp up to ``peak`` active keys (with repeat Incs), reset all but ``floor``, then ``tail`` arrivals.

    Args:
        peak: Active keys at the top of the ramp.
        floor: Active keys left after the mass reset.
        tail: Fresh arrivals after the mass reset.
        seed: Seed of the stream.
    """
    rng = np.random.default_rng([seed, 12])
    touches = peak // 2
    ramp_ids = np.concatenate([np.arange(peak), rng.integers(0, peak, touches)])
    ramp_times = np.concatenate([np.arange(peak), rng.random(touches) * peak])  # a touch lands after its arrival
    ramp_times[peak:] = np.maximum(ramp_times[peak:], ramp_ids[peak:] + 0.5)
    order = np.argsort(ramp_times, kind="stable")
    ramp_ids = ramp_ids[order]
    reset_ids = rng.permutation(peak)[: peak - floor]
    tail_ids = np.arange(peak, peak + tail)
    ids = np.concatenate([ramp_ids, reset_ids, tail_ids])
    ops = np.concatenate([np.zeros(len(ramp_ids), np.int8), np.ones(len(reset_ids), np.int8), np.zeros(tail, np.int8)])
    deltas = np.where(ops == INC, rng.geometric(0.5, size=len(ops)), 0).astype(np.int64)
    return ops, scramble(ids, seed), deltas


@lru_cache(maxsize=1)
def article_word_ids() -> tuple[tuple[np.ndarray, ...], int]:
    """Word ids of every article of gensim's Wikipedia test data (ids by first appearance), and the vocabulary size."""
    from zoo.common.text import wikipedia_articles

    vocabulary: dict[str, int] = {}
    articles = []
    for article in wikipedia_articles():
        words = re.findall(r"[a-z0-9]+(?:'[a-z]+)?", article.text.lower())
        articles.append(np.fromiter((vocabulary.setdefault(w, len(vocabulary)) for w in words), np.int64, len(words)))
    return tuple(articles), len(vocabulary)


def word_stream(seed: int = 0, unlearn_prob: float = 0.5, max_articles: int | None = None, repeats: int = 1):
    """Word-token stream with unlearning resets (see the module docstring).

    Args:
        seed: Seed of the unlearning coins.
        unlearn_prob: Probability that an eligible word is reset after its article.
        max_articles: Use only the first articles (None: all of them).
        repeats: Passes over the articles; pass ``r`` uses fresh ids (``word id + r * vocabulary size``) and its
            own unlearning coins, so the distinct active keys grow about ``repeats``-fold (pass 0 is the
            ``repeats=1`` stream).
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    articles, vocabulary_size = article_word_ids()
    articles = articles[:max_articles]
    rng = np.random.default_rng([seed, 13])
    parts = []
    for offset in range(0, repeats * vocabulary_size, vocabulary_size):
        values = np.zeros(vocabulary_size, np.int64)
        for words in articles:
            counts = np.bincount(words, minlength=vocabulary_size)
            values += counts
            present = np.flatnonzero(counts)
            eligible = present[values[present] == counts[present]]  # all current occurrences are from this article
            unlearned = eligible[rng.random(len(eligible)) < unlearn_prob]
            values[unlearned] = 0
            parts.append((np.zeros(len(words), np.int8), words + offset, np.ones(len(words), np.int64)))
            parts.append((np.ones(len(unlearned), np.int8), unlearned + offset, np.zeros(len(unlearned), np.int64)))
    ops, keys, deltas = (np.concatenate([p[i] for p in parts]) for i in range(3))
    return ops, keys, deltas


@dataclass
class AttackResult:
    """What an attack did: the published estimate and the true count after every probe.

    Attributes:
        estimates: Published estimate after each probe (after the reset, if any).
        truth: True active count after each probe.
        resets: How many probes were reset.
        stored: Keys the sketch stored after each probe (empty if it cannot tell).
        updates: Updates the attack made (an Inc per probe plus its resets).
        seconds: Wall time of the attack, sketch and adversary together.
    """

    estimates: np.ndarray
    truth: np.ndarray
    resets: int
    stored: np.ndarray = field(default_factory=lambda: np.zeros(0))
    updates: int = 0
    seconds: float = 0.0

    @property
    def prefix_max(self) -> np.ndarray:
        return np.maximum.accumulate(np.maximum(self.truth, 1))

    def final_error(self) -> float:
        """``|F_hat - F| / max_{t' <= T} F`` at the end of the attack."""
        return float(abs(self.estimates[-1] - self.truth[-1]) / self.prefix_max[-1])


ATTACKS = ("hide", "inflate")


@dataclass
class Adversary:
    """An adaptive attack on resettable sketches: probe with fresh keys, learn which ones move the estimate.

    Args:
        threshold: A probe moved the estimate if it rose by more than this (0: any rise).
        next_key: First fresh key id (the probes are ``next_key, next_key + 1, ...``).
        mode: ``"hide"`` resets the probes that moved the estimate (deflates a non-robust estimate);
            ``"inflate"`` resets those that did not (only "sampled" keys stay active: inflates it).
    """

    threshold: float = 0.0
    next_key: int = 1 << 40
    active: int = 0
    peak: int = 0
    mode: str = "hide"

    def __post_init__(self):
        if self.mode not in ATTACKS:
            raise ValueError(f"mode must be one of {ATTACKS}, got {self.mode!r}")

    def probe(self, sketch, key: int) -> bool:
        """Insert ``key``, read the estimate, reset the key or keep it by the mode; returns whether it was reset."""
        before = sketch.estimate()
        sketch.inc(key, 1)
        moved = sketch.estimate() > before + self.threshold
        reset = moved if self.mode == "hide" else not moved
        if reset:
            sketch.reset(key)
        else:
            self.active += 1
            self.peak = max(self.peak, self.active)
        return reset

    def run(self, sketch, n: int, vectorise: bool = True) -> AttackResult:
        """Play ``n`` probes against ``sketch`` (anything with ``estimate``, ``inc`` and ``reset``).

        With ``vectorise`` (the default), a sketch whose response to a fresh key is a fixed function of the key
        (it has ``moves(keys)``: sampling by a hash, or exact counting) is attacked in one pass: which probes
        move the estimate is known in advance, so the whole adaptive stream is built at once and fed through
        ``update_batch(..., trajectory=True)``. The result and the sketch's final state equal the probe-by-probe
        loop's (``vectorise=False``), which every other sketch plays.
        """
        if vectorise and n > 0 and self.threshold == 0 and hasattr(sketch, "moves"):
            return self._run_vectorised(sketch, n)
        estimates, truth, resets = np.empty(n), np.empty(n), 0
        count = getattr(sketch, "stored_keys", None)
        stored = np.zeros(n if count else 0, np.int64)
        started = time.perf_counter()
        for i in range(n):
            resets += self.probe(sketch, self.next_key)
            self.next_key += 1
            estimates[i], truth[i] = sketch.estimate(), self.active
            if count:
                stored[i] = count()
        return AttackResult(estimates, truth, resets, stored, n + resets, time.perf_counter() - started)

    def _run_vectorised(self, sketch, n: int) -> AttackResult:
        """The attack on a key-determined sketch: a fresh key moves the estimate iff ``sketch.moves`` says so,
        and then (and only then) the sketch stores it."""
        started = time.perf_counter()
        probes = self.next_key + np.arange(n, dtype=np.int64)
        moved = np.asarray(sketch.moves(probes), dtype=bool)
        reset = moved if self.mode == "hide" else ~moved
        sizes = 1 + reset.astype(np.int64)  # an Inc, then a Reset for the probes the mode resets
        ends = np.cumsum(sizes) - 1  # each probe's last update
        ops = np.zeros(int(ends[-1]) + 1, np.int8)
        ops[ends[reset]] = RESET
        keys = np.repeat(probes, sizes)
        stored_before = sketch.stored_keys()
        estimates = sketch.update_batch(ops, keys, (ops == INC).astype(np.int64), trajectory=True)[ends]
        kept = ~reset
        truth = (self.active + np.cumsum(kept)).astype(np.float64)
        stored = stored_before + np.cumsum(moved & kept)
        self.active = int(truth[-1])
        self.peak = max(self.peak, int(truth.max()))
        self.next_key += n
        resets = int(reset.sum())
        return AttackResult(estimates, truth, resets, stored, n + resets, time.perf_counter() - started)

    def state_dict(self) -> dict:
        return {
            "threshold": self.threshold, "next_key": self.next_key, "active": self.active, "peak": self.peak,
            "mode": self.mode,
        }  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        self.threshold, self.next_key = state["threshold"], state["next_key"]
        self.active, self.peak = state["active"], state["peak"]
        self.mode = state.get("mode", "hide")


__all__ = [
    "ATTACKS",
    "INC",
    "RESET",
    "Adversary",
    "AttackResult",
    "bursty_stream",
    "churn_stream",
    "scramble",
    "word_stream",
]
