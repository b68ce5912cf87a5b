"""The adaptively robust sketch for resettable streams: fresh coins, the binary-tree mechanism, rate halving.

:class:`RobustSketch` implements the interface of :mod:`zoo.resettable_sketch.sketches` for cardinality, Sum and
L_q; :func:`~zoo.resettable_sketch.calibration.calibrate` picks its ``k`` and rate for a target accuracy. Its
state is a dict of fixed-shape numpy arrays (key table, counters, tree, generator state via
:mod:`zoo.resettable_sketch.rng_state`), so it can be checkpointed and resumed mid-stream.
"""

from __future__ import annotations

import math

import numpy as np

from zoo.resettable_sketch.calibration import table_capacity
from zoo.resettable_sketch.hashtable import STAT_CODES, HashTable, apply_updates
from zoo.resettable_sketch.rng_state import MASK64, pack_rng, unpack_rng
from zoo.resettable_sketch.sketches import check_stat
from zoo.resettable_sketch.table import INC, RESET, check_updates
from zoo.resettable_sketch.tree import BinaryTreeCounter, allocate_tree, levels_for


class RobustSketch:
    """Adaptively robust sketch for resettable streams (fresh coins + binary-tree mechanism + rate halving).

    * **Coins.** ``"card"`` and ``"lp"`` use *sample-and-hold*: an Inc of a key that is not stored flips fresh
      coins (one per Inc for cardinality, one per unit for L_q) and stores the key at the first success;
      a stored key counts what follows (``c_x``: Incs, or units, since it was stored). A Reset drops the key,
      so a re-activation flips new coins. ``"sum"`` samples every unit with a fresh coin and keeps
      ``c_x`` = its sampled units. No per-key state is kept for keys that are not stored.
    * **Randomness is never reused.** Every coin and every Laplace draw comes from the sketch's own generator
      (``self.rng``), which advances with every draw; :meth:`save_rng` writes its state into the arrays, so a
      checkpoint of the arrays continues the random stream where it stopped instead of restarting it.
    * **Estimator.** ``F_hat = N / rate`` where ``N = sum_x w(c_x)`` in *rate units*: ``w(c) = c`` for Sum and
      ``w(c) = rate * f(c) + (1 - rate) * (f(c) - f(c - 1))`` for sample-and-hold (the unbiased estimator of
      ``f(v)`` from ``c``; for cardinality ``w(1) = 1`` and ``w(c >= 2) = rate``).
    * **Privacy of the coins.** ``N`` changes by ``u_t`` at each update; the published value is the
      binary-tree mechanism's noisy prefix sum of ``u`` (see :mod:`.tree`), so the outputs are ``eps``-DP with
      respect to any one coin, whose l1 effect on ``u`` is the sensitivity ``4 - 2 rate`` (cardinality: a coin
      can move the storing time of one activation), 2 (Sum: +1 when sampled, -1 at the reset), or a bound
      computed from ``w`` (L_q). The tree clock advances on every update, used or not.
    * **Space.** When ``k`` keys are stored, the rate halves: Sum thins each key's units to ``Binomial(c, 1/2)``;
      sample-and-hold keeps a key's storing coin with probability 1/2, or else re-draws the first success among
      its ``c - 1`` later Incs at the new rate, which is exactly sample-and-hold at ``rate / 2``. A new epoch
      then starts: a fresh tree from ``N`` plus one Laplace draw. The table never holds more than ``k`` keys.
      A tree that fills up (``2**levels - 1`` updates) rolls over to a tree one level deeper the same way.
      :func:`~.calibration.calibrate` picks ``k`` and the rate for a target accuracy.
    * **Speed.** Both paths run :func:`~.hashtable.apply_updates` (numba-compiled) over an open-addressing
      table; the batch path draws a chunk's coins with one numpy call and adds the tree noise only at the
      nodes the chunk-end output uses.

    Args:
        stat: ``"card"``, ``"sum"`` or ``"lp"``.
        rate: Initial sampling rate ``p0`` in (0, 1].
        eps: Privacy parameter per tree; ``None`` (or ``inf``) publishes the exact ``N / rate``.
        k: Halve the rate when ``k`` keys are stored; ``None`` halves only at 3/4 of the table's capacity.
        capacity: Key slots of the table (a power of two; ``k`` must be at most 3/4 of it).
        horizon: Stream length the first tree is sized for (later trees grow).
        q: Exponent of ``"lp"``.
        value_cap: ``"lp"`` clips values at this cap so that one coin's effect (the sensitivity) is bounded.
        seed: Seed of the sketch's randomness (used only for a fresh sketch: given ``arrays``, the generator
            continues from the state saved in them).
        arrays: State arrays to work in (from :meth:`allocate`), e.g. views of tensor buffers.
    """

    def __init__(
        self,
        stat: str = "card",
        rate: float = 0.2,
        eps: float | None = 1.0,
        k: int | None = None,
        capacity: int = 65536,
        horizon: int = 32767,
        q: float = 0.5,
        value_cap: int = 64,
        seed: int = 0,
        arrays: dict[str, np.ndarray] | None = None,
    ):
        check_stat(stat, q)
        if not 0.0 < rate <= 1.0:
            raise ValueError(f"rate must be in (0, 1], got {rate}")
        if eps is not None and not eps > 0:
            raise ValueError(f"eps must be > 0 (or None for no noise), got {eps}")
        if capacity < 4 or capacity & (capacity - 1):
            raise ValueError(f"capacity must be a power of two >= 4, got {capacity}")
        if k is not None and not 1 <= k <= capacity * 3 // 4:
            raise ValueError(
                f"k must be in [1, 3/4 capacity] = [1, {capacity * 3 // 4}], got {k}; raise capacity "
                f"(table_capacity(k) = {table_capacity(max(k, 1))})"
            )
        if horizon < 1 or value_cap < 1:
            raise ValueError("horizon and value_cap must be >= 1")
        self.stat, self.q, self.eps, self.seed = stat, q, eps, seed
        self.value_cap, self.horizon = value_cap, horizon
        self._code = STAT_CODES[stat]
        self._lp_sensitivity: dict[float, float] = {}
        self.threshold = k if k is not None else capacity * 3 // 4
        fresh = arrays is None
        self.arrays = arrays if arrays is not None else self.allocate(capacity)
        a = self.arrays
        self.table = HashTable(a["table_keys"], a["table_values"], a["table_size"])
        self.tree = BinaryTreeCounter(a, eps)
        self.rng = unpack_rng(a["rng_state"]) if not fresh else np.random.default_rng(seed)
        self._one = (np.zeros(1, np.int8), np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64))
        self._one_change = np.zeros(1)
        if fresh:
            a["rate"][...] = rate
            self.tree.start(0.0, levels_for(horizon), self.sensitivity(), self.rng)
            self.save_rng()

    # ------------------------------------------------------------------------------------ state

    @staticmethod
    def allocate(capacity: int) -> dict[str, np.ndarray]:
        """Zeroed state arrays with ``capacity`` key slots."""
        return {
            "table_keys": np.zeros(capacity, np.int64),
            "table_values": np.zeros(capacity, np.int64),
            "table_size": np.zeros((), np.int64),
            "rate": np.zeros((), np.float64),
            "total": np.zeros((), np.float64),  # N, exact, in rate units
            "time": np.zeros((), np.int64),
            "epoch": np.zeros((), np.int64),
            "trees": np.ones((), np.int64),  # trees started so far: each is one eps-DP release
            "max_stored": np.zeros((), np.int64),
            "rng_state": np.zeros(6, np.int64),
            **allocate_tree(),
        }

    def save_rng(self) -> None:
        """Write the generator's state into the arrays (call before checkpointing the arrays)."""
        pack_rng(self.rng, self.arrays["rng_state"])

    def child_rng(self, salt: int = 0) -> np.random.Generator:
        """An independent generator for a hypothetical copy, seeded by hashing this one's state with ``salt``.

        This generator does not advance, and the child's stream (a SeedSequence of the state words, ``salt`` and
        a tag) shares no coin with the one this generator goes on to draw.
        """
        words = np.zeros(6, np.int64)
        pack_rng(self.rng, words)
        return np.random.default_rng([*(int(w) for w in words.view(np.uint64)), int(salt) & MASK64, 0xC0B1])

    @property
    def rate(self) -> float:
        return float(self.arrays["rate"])

    @property
    def time(self) -> int:
        return int(self.arrays["time"])

    @property
    def epoch(self) -> int:
        return int(self.arrays["epoch"])

    def stored_keys(self) -> int:
        return self.table.size

    def max_stored_keys(self) -> int:
        """The most keys the table has held at once."""
        return int(self.arrays["max_stored"])

    def privacy_spent(self) -> float:
        """Basic composition over the trees (epochs and roll-overs) started so far: ``eps * trees``."""
        return math.inf if self.eps is None else self.eps * int(self.arrays["trees"])

    # ------------------------------------------------------------------------------ the estimator

    def weights(self, counts: np.ndarray, rate: float | None = None) -> np.ndarray:
        """``w(c)`` in rate units for stored counts ``c`` (``w(0) = 0``)."""
        r = self.rate if rate is None else rate
        c = np.asarray(counts, dtype=np.int64)
        if self.stat == "sum":
            return c.astype(np.float64)
        if self.stat == "card":
            return np.where(c == 0, 0.0, np.where(c == 1, 1.0, r))
        cap = self.value_cap
        f_now = np.power(np.minimum(c, cap).astype(np.float64), self.q)
        f_before = np.power(np.minimum(np.maximum(c - 1, 0), cap).astype(np.float64), self.q)
        return np.where(c == 0, 0.0, r * f_now + (1.0 - r) * (f_now - f_before))

    def sensitivity(self, rate: float | None = None) -> float:
        """l1 effect of one coin on the increment sequence ``u`` (see the class docstring)."""
        r = self.rate if rate is None else rate
        if self.stat == "sum":
            return 2.0
        if self.stat == "card":
            return 4.0 - 2.0 * r
        if r not in self._lp_sensitivity:
            w = self.weights(np.arange(self.value_cap + 2), rate=r)
            path = w[1] + np.abs(np.diff(w[1:])).sum() + w.max()  # store, grow, reset: one activation's l1 path
            self._lp_sensitivity[r] = float(2.0 * path)  # a coin can swap one such path for another
        return self._lp_sensitivity[r]

    def estimate(self) -> float:
        """The published estimate of ``F``: the tree's noisy prefix of ``N``, over the current rate."""
        return self.tree.value() / self.rate

    get_estimate = estimate

    # ---------------------------------------------------------------------------------- updates

    def inc(self, key: int, delta: int = 1) -> None:
        self.update(INC, key, delta)

    def reset(self, key: int) -> None:
        self.update(RESET, key, 0)

    def update(self, op: int, key: int, delta: int = 1) -> None:
        """One update (the per-update path: what an adversary that reads every output drives)."""
        if delta < 0:
            raise ValueError("Inc deltas must be >= 0: the resettable model only increases a value or resets it")
        if op not in (INC, RESET):
            raise ValueError("op must be 0 (Inc) or 1 (Reset); see zoo.resettable_sketch.table.INC / RESET")
        if self.tree.capacity_left < 1:
            self._new_tree(self.tree.levels + 1)
        ops, keys, deltas, draws = self._one
        ops[0], keys[0], deltas[0] = op, key, delta
        draws[0] = self._draw_one(delta) if op == INC else 0
        self._apply(ops, keys, deltas, draws, self._one_change)
        change = float(self._one_change[0])
        self.arrays["total"][...] += change
        self.tree.add_one(change, self.rng)
        self.arrays["time"][...] += 1
        self._after_growth()

    def _draw_one(self, delta: int) -> int:
        r = self.rate
        if self.stat == "card":
            return 1 if self.rng.random() < r else 2
        if self.stat == "sum":
            return int(self.rng.binomial(delta, r)) if delta else 0
        return int(self.rng.geometric(r))

    def update_batch(self, ops, keys, deltas=None) -> None:
        """Apply a chunk of updates (the compiled path); the output is read at the chunk's end."""
        ops, keys, deltas = check_updates(ops, keys, deltas)
        n = len(keys)
        change = np.empty(n)
        start = 0
        while start < n:
            if self.tree.capacity_left < 1:
                self._new_tree(self.tree.levels + 1)
            stop = min(n, start + self.tree.capacity_left)
            draws = self._draw(ops[start:stop], deltas[start:stop])
            applied = self._apply(ops[start:stop], keys[start:stop], deltas[start:stop], draws, change[start:stop])
            part = change[start : start + applied]
            self.arrays["total"][...] += part.sum()
            self.tree.add(part, self.rng)
            self.arrays["time"][...] += applied
            self._after_growth()  # halves (with fresh coins for the rest of the chunk) once k keys are stored
            start += applied

    def _apply(self, ops, keys, deltas, draws, change) -> int:
        applied, size = apply_updates(
            self.table.keys, self.table.values, self.table.size, self.table.shift, ops, keys, deltas, draws,
            self._code, self.rate, float(self.q), self.value_cap, self.threshold, change,
        )  # fmt: skip
        self.arrays["table_size"][...] = size
        return applied

    def _draw(self, ops: np.ndarray, deltas: np.ndarray) -> np.ndarray:
        """Fresh randomness for every update of a chunk (unused for resets, never reused)."""
        r = self.rate
        if self.stat == "sum":
            return self.rng.binomial(np.where(ops == INC, deltas, 0), r)
        if self.stat == "card":  # only "first success <= 1 Inc?" matters: a Bernoulli(rate) coin per Inc
            return np.where(self.rng.random(len(ops)) < r, 1, 2)
        return self.rng.geometric(r, size=len(ops))

    # ------------------------------------------------------------------------------- space control

    def _after_growth(self) -> None:
        self.arrays["max_stored"][...] = max(int(self.arrays["max_stored"]), self.table.size)
        while self.table.size >= self.threshold:
            self.halve()

    def halve(self) -> None:
        """Halve the sampling rate, subsample the stored keys to match, and start a new epoch."""
        keys, counts = self.table.items()
        if self.stat == "sum":
            counts = self.rng.binomial(counts, 0.5)
        else:  # keep the storing coin w.p. 1/2, else the first success among the c - 1 later units/Incs
            keep = self.rng.random(len(counts)) < 0.5
            later = self.rng.geometric(self.rate / 2, size=len(counts))
            counts = np.where(keep, counts, np.where(later <= counts - 1, counts - later, 0))
        alive = counts > 0
        self.table.replace(keys[alive], counts[alive])
        self.arrays["rate"][...] = self.rate / 2
        self.arrays["epoch"][...] += 1
        self.arrays["total"][...] = self.weights(counts[alive]).sum()
        self._new_tree(levels_for(self.horizon))

    def _new_tree(self, levels: int) -> None:
        self.tree.start(float(self.arrays["total"]), levels, self.sensitivity(), self.rng)
        self.arrays["trees"][...] += 1
