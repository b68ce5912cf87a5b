"""The sketch interface and its statistics, the exact counter, and the non-robust baselines.

Every sketch takes updates one at a time (``inc(key, delta)``, ``reset(key)``: what an adaptive adversary
drives) or as chunks (``update_batch(ops, keys, deltas)``: the vectorised path, numpy over the whole chunk)
and publishes ``estimate()`` of ``F = sum_x f(v_x)`` for the statistic ``f`` it was built for:

* ``"card"``: cardinality, ``f(v) = 1[v > 0]`` (L_0);
* ``"sum"``: ``f(v) = v`` (L_1);
* ``"lp"``: ``f(v) = v**q`` for ``q`` in ``(0, 1)`` (values clipped at ``value_cap`` in the robust sketch).

This module holds the truth (:class:`ExactSketch`) and the non-robust baselines, the hash-sampling
:class:`HashThresholdSketch` and DataSketches' :class:`ThetaSketch`; the robust sketch is
:class:`~zoo.resettable_sketch.robust.RobustSketch` (its parameters from
:func:`~zoo.resettable_sketch.calibration.calibrate`). The state of :class:`ExactSketch`, :class:`HashThresholdSketch`
and ``RobustSketch`` is a dict of numpy arrays of fixed shapes (``arrays``), random-generator state included
(:mod:`zoo.resettable_sketch.rng_state`), so a LightningModule can hold it in tensor buffers and checkpoint or
resume a sketch mid-stream. See ``zoo/resettable_sketch/__init__`` for the paper and the reconstruction choices.
"""

from __future__ import annotations

import numpy as np

from zoo.resettable_sketch.rng_state import MASK64
from zoo.resettable_sketch.table import INC, RESET, KeyTable, check_updates, group_updates, segmented_cumsum

STATS = ("card", "sum", "lp")


def check_stat(stat: str, q: float) -> None:
    """Raise a one-line ValueError for an unknown statistic or an exponent outside (0, 1)."""
    if stat not in STATS:
        raise ValueError(f"stat must be one of {STATS} (cardinality, sum, L_q moment), got {stat!r}")
    if stat == "lp" and not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1) for stat='lp' (use 'card' for q=0 and 'sum' for q=1), got {q}")


def stat_values(stat: str, values: np.ndarray, q: float = 0.5) -> np.ndarray:
    """``f(v)`` elementwise, as float64."""
    values = np.asarray(values, dtype=np.float64)
    if stat == "card":
        return (values > 0).astype(np.float64)
    if stat == "sum":
        return values
    return np.power(values, q)  # 0**q = 0 for q > 0


# ----------------------------------------------------------------------------------------------- exact


class ExactSketch:
    """The truth: every active key's value, and ``F`` maintained incrementally (linear space).

    Args:
        stat: ``"card"``, ``"sum"`` or ``"lp"``.
        q: Exponent of ``"lp"``.
        capacity: Fixed number of key slots, or None to grow as needed.
        arrays: State arrays to work in (from :meth:`allocate`); fresh ones by default.
    """

    def __init__(self, stat: str = "card", q: float = 0.5, capacity: int | None = None, arrays=None):
        check_stat(stat, q)
        self.stat, self.q = stat, q
        self.arrays = arrays if arrays is not None else self.allocate(capacity or 1024)
        a = self.arrays
        self.table = KeyTable(a["table_keys"], a["table_values"], a["table_size"], growable=arrays is None)

    @staticmethod
    def allocate(capacity: int) -> dict[str, np.ndarray]:
        """Zeroed state arrays with ``capacity`` key slots."""
        return {
            "table_keys": np.zeros(capacity, np.int64),
            "table_values": np.zeros(capacity, np.int64),
            "table_size": np.zeros((), np.int64),
            "total": np.zeros((), np.float64),
        }

    def estimate(self) -> float:
        return float(self.arrays["total"])

    get_estimate = estimate

    def stored_keys(self) -> int:
        return self.table.size

    def moves(self, keys: np.ndarray) -> np.ndarray:
        """Whether Inc(key, 1) of each *fresh* key raises the estimate (always; it is then stored)."""
        return np.ones(len(keys), dtype=bool)

    def _f(self, value: int) -> float:
        return float(stat_values(self.stat, np.array([value]), self.q)[0])

    def update(self, op: int, key: int, delta: int = 1) -> None:
        """One update: ``op`` is :data:`INC` or :data:`RESET`."""
        old = self.table.get(key)
        new = old + delta if op == INC else 0
        if new != old:
            self.table.set(key, new)
            self.arrays["total"][...] += self._f(new) - self._f(old)

    def inc(self, key: int, delta: int = 1) -> None:
        self.update(INC, key, delta)

    def reset(self, key: int) -> None:
        self.update(RESET, key, 0)

    def update_batch(self, ops, keys, deltas=None, trajectory: bool = False) -> np.ndarray | None:
        """Apply a chunk; with ``trajectory=True`` return ``F`` after every update (float64, stream order)."""
        ops, keys, deltas = check_updates(ops, keys, deltas)
        if not len(keys):
            return np.zeros(0) if trajectory else None
        g = group_updates(ops, keys, deltas)
        initial = self.table.lookup(g.unique_keys)[g.group_id]
        increments = np.where(g.is_reset, 0, g.deltas)
        after = np.where(g.first_segment, initial, 0) + segmented_cumsum(increments, g.seg_start)
        before = g.previous(after, initial)
        change = stat_values(self.stat, after, self.q) - stat_values(self.stat, before, self.q)
        self.table.commit(g.unique_keys, after[g.last_index])
        start = float(self.arrays["total"])
        self.arrays["total"][...] = start + change.sum()
        if trajectory:
            return start + np.cumsum(g.to_stream_order(change))
        return None


# ------------------------------------------------------------------------------------- hash threshold


def uniform_hash(keys: np.ndarray, salt: int) -> np.ndarray:
    """A fixed pseudo-random map of int64 keys to [0, 1) (splitmix64 finaliser of ``key ^ salt``)."""
    z = keys.astype(np.int64).view(np.uint64) ^ np.uint64(salt & MASK64)
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53


class HashThresholdSketch:
    """The non-robust baseline: keep key ``x`` iff ``h(x) < rate`` for a fixed hash ``h`` (theta / bottom-k style).

    Sampled keys are tracked exactly (so this is also the *count-based* sampler for Sum and L_q: sampled keys
    keep their counts); the estimate is the exact statistic of the sampled keys divided by ``rate``.
    Deterministic given the hash, so an adversary that sees the estimate learns which keys are sampled.

    Args:
        stat: ``"card"``, ``"sum"`` or ``"lp"``.
        rate: Sampling rate ``p`` in (0, 1].
        q: Exponent of ``"lp"``.
        seed: Salt of the hash.
        capacity: Fixed number of key slots, or None to grow as needed.
        arrays: State arrays (from :meth:`allocate`).
    """

    def __init__(self, stat="card", rate=0.2, q=0.5, seed=0, capacity: int | None = None, arrays=None):
        if not 0.0 < rate <= 1.0:
            raise ValueError(f"rate must be in (0, 1], got {rate}")
        self.rate, self.salt = rate, int(seed) * 0x5851F42D4C957F2D + 0x14057B7EF767814F
        self.inner = ExactSketch(stat, q, capacity, arrays)
        self.arrays = self.inner.arrays

    @staticmethod
    def allocate(capacity: int) -> dict[str, np.ndarray]:
        return ExactSketch.allocate(capacity)

    def sampled(self, keys: np.ndarray) -> np.ndarray:
        """Whether each key is in the sample."""
        return uniform_hash(np.asarray(keys, dtype=np.int64), self.salt) < self.rate

    def estimate(self) -> float:
        return self.inner.estimate() / self.rate

    get_estimate = estimate

    def stored_keys(self) -> int:
        return self.inner.stored_keys()

    def moves(self, keys: np.ndarray) -> np.ndarray:
        """Whether Inc(key, 1) of each *fresh* key raises the estimate: exactly the sampled keys (then stored)."""
        return self.sampled(keys)

    def update(self, op: int, key: int, delta: int = 1) -> None:
        if self.sampled(np.array([key]))[0]:
            self.inner.update(op, key, delta)

    def inc(self, key: int, delta: int = 1) -> None:
        self.update(INC, key, delta)

    def reset(self, key: int) -> None:
        self.update(RESET, key, 0)

    def update_batch(self, ops, keys, deltas=None, trajectory: bool = False) -> np.ndarray | None:
        """Apply a chunk; with ``trajectory=True`` return the estimate after every update (stream order)."""
        ops, keys, deltas = check_updates(ops, keys, deltas)
        keep = self.sampled(keys)
        start = self.inner.estimate()
        inner = self.inner.update_batch(ops[keep], keys[keep], deltas[keep], trajectory=trajectory)
        if not trajectory:
            return None
        last = np.cumsum(keep) - 1  # the last sampled update at or before each position
        return np.where(last >= 0, inner[np.maximum(last, 0)] if len(inner) else start, start) / self.rate


# ------------------------------------------------------------------------------------ DataSketches theta


class ThetaSketch:
    """Apache DataSketches' theta sketch, made resettable the only way its API allows: ``A not B``.

    Incs go into sketch ``A``, resets into sketch ``B``; the estimate is ``|A \\ B|`` by ``theta_a_not_b``.
    Exact emulation of cardinality only when no key is re-activated after a reset (true for the procedural
    streams here, whose activations use fresh keys); not applicable to Sum or to re-activated keys.

    Args:
        lg_k: log2 of the nominal number of retained hashes.
        seed: Hash seed (DataSketches' default is 9001).
    """

    def __init__(self, lg_k: int = 12, seed: int = 9001):
        import datasketches

        self.seed = seed % (1 << 16) or 9001
        self.inserted = datasketches.update_theta_sketch(lg_k, seed=self.seed)
        self.removed = datasketches.update_theta_sketch(lg_k, seed=self.seed)
        self._a_not_b = datasketches.theta_a_not_b(seed=self.seed)
        self._cached: float | None = None
        self._compact: dict[int, object] = {}  # ordered compact copies of A (INC) and B (RESET), until changed

    def estimate(self) -> float:
        if self._cached is None:  # A-not-B of *ordered compact* sketches: on update sketches in exact mode it is slow
            for op, sketch in ((INC, self.inserted), (RESET, self.removed)):
                if op not in self._compact:
                    self._compact[op] = sketch.compact(True)
            self._cached = self._a_not_b.compute(self._compact[INC], self._compact[RESET], True).get_estimate()
        return self._cached

    get_estimate = estimate

    def stored_keys(self) -> int:
        return self.inserted.num_retained + self.removed.num_retained

    def update(self, op: int, key: int, delta: int = 1) -> None:
        """One update; the cached estimate is kept when the update left the sketch unchanged (a hash above
        theta or already retained: then neither the retained count nor theta moves), which is most updates
        once the sketch samples, so an adversary's per-probe reads stay cheap (same outputs as recomputing)."""
        sketch = self.inserted if op == INC else self.removed
        before = (sketch.num_retained, sketch.theta64)
        sketch.update(int(key))
        if (sketch.num_retained, sketch.theta64) != before:
            self._cached = None
            self._compact.pop(op, None)

    def inc(self, key: int, delta: int = 1) -> None:
        self.update(INC, key, delta)

    def reset(self, key: int) -> None:
        self.update(RESET, key, 0)

    def update_batch(self, ops, keys, deltas=None) -> None:
        """DataSketches has no batch API: one Python call per update (its fastest path from Python)."""
        ops, keys, _ = check_updates(ops, keys, deltas)
        inserted, removed = self.inserted.update, self.removed.update
        for key in keys[ops == INC].tolist():
            inserted(key)
        for key in keys[ops == RESET].tolist():
            removed(key)
        self._cached = None
        self._compact.clear()


__all__ = [
    "INC",
    "RESET",
    "STATS",
    "ExactSketch",
    "HashThresholdSketch",
    "ThetaSketch",
    "stat_values",
    "uniform_hash",
]
