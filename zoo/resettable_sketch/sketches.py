"""Sketches for resettable streams: the exact counter, the non-robust baselines and the robust sketch.

Every sketch takes updates one at a time (``inc(key, delta)``, ``reset(key)``: what an adaptive adversary
drives) or as chunks (``update_batch(ops, keys, deltas)``: the vectorised path, numpy over the whole chunk)
and publishes ``estimate()`` of ``F = sum_x f(v_x)`` for the statistic ``f`` it was built for:

* ``"card"``: cardinality, ``f(v) = 1[v > 0]`` (L_0);
* ``"sum"``: ``f(v) = v`` (L_1);
* ``"lp"``: ``f(v) = v**q`` for ``q`` in ``(0, 1)`` (values clipped at ``value_cap`` in the robust sketch).

The state of :class:`ExactSketch`, :class:`HashThresholdSketch` and :class:`RobustSketch` is a dict of
numpy arrays of fixed shapes (``arrays``), random-generator state included, so a LightningModule can hold
it in tensor buffers and checkpoint or resume a sketch mid-stream. See ``zoo/resettable_sketch/__init__``
for the paper and the reconstruction choices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from zoo.resettable_sketch.hashtable import STAT_CODES, HashTable, apply_updates
from zoo.resettable_sketch.table import INC, RESET, KeyTable, check_updates, group_updates, segmented_cumsum
from zoo.resettable_sketch.tree import BinaryTreeCounter, allocate_tree, levels_for

STATS = ("card", "sum", "lp")
_MASK64 = (1 << 64) - 1


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


# --------------------------------------------------------------------------------------- generator state


def pack_rng(rng: np.random.Generator, out: np.ndarray) -> None:
    """Write a PCG64 generator's state into an int64[6] array (two 128-bit words, the buffered uint32)."""
    state = rng.bit_generator.state
    words = []
    for value in (state["state"]["state"], state["state"]["inc"]):
        words += [value & _MASK64, value >> 64]
    words += [state["has_uint32"], state["uinteger"]]
    out[:] = np.array(words, dtype=np.uint64).view(np.int64)


def unpack_rng(packed: np.ndarray) -> np.random.Generator:
    """The PCG64 generator whose state :func:`pack_rng` wrote."""
    w = [int(x) for x in np.asarray(packed, dtype=np.int64).view(np.uint64)]
    rng = np.random.Generator(np.random.PCG64())
    rng.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": w[0] | (w[1] << 64), "inc": w[2] | (w[3] << 64)},
        "has_uint32": w[4],
        "uinteger": w[5],
    }
    return rng


def seeded_rng_state(seed: int) -> np.ndarray:
    """int64[6] holding the state of ``np.random.default_rng(seed)``."""
    out = np.zeros(6, np.int64)
    pack_rng(np.random.default_rng(seed), out)
    return out


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
    z = keys.astype(np.int64).view(np.uint64) ^ np.uint64(salt & _MASK64)
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

    def update(self, op: int, key: int, delta: int = 1) -> None:
        if self.sampled(np.array([key]))[0]:
            self.inner.update(op, key, delta)

    def inc(self, key: int, delta: int = 1) -> None:
        self.update(INC, key, delta)

    def reset(self, key: int) -> None:
        self.update(RESET, key, 0)

    def update_batch(self, ops, keys, deltas=None) -> None:
        ops, keys, deltas = check_updates(ops, keys, deltas)
        keep = self.sampled(keys)
        self.inner.update_batch(ops[keep], keys[keep], deltas[keep])


# ------------------------------------------------------------------------------------------ calibration


@dataclass(frozen=True)
class Calibration:
    """The space-bounded sketch's parameters for a target accuracy (see :func:`calibrate`).

    Attributes:
        alpha: Target relative error.
        z: Normal quantile the error must stay within (2: about 95% of the published outputs).
        eps: Privacy parameter of each binary tree.
        horizon: Updates the tree is sized for.
        levels: Tree levels ``L``.
        sensitivity: l1 effect of one coin assumed (4: the worst case of cardinality, ``4 - 2 rate``).
        noise_std: Worst-case standard deviation of the published count's noise, ``L**1.5 s sqrt(2) / eps``.
        count: The count ``N`` (in rate units) from which the error is within ``alpha`` at ``z`` sigmas.
        k: Stored keys at which the rate halves, ``2 * count`` (a halving leaves about ``k / 2`` stored keys).
        rate: Initial sampling rate.
        f_min: The true count from which the guarantee is calibrated to hold (the warm-up), ``count / rate``.
    """

    alpha: float
    z: float
    eps: float
    horizon: int
    levels: int
    sensitivity: float
    noise_std: float
    count: int
    k: int
    rate: float
    f_min: int


def calibrate(
    alpha: float = 0.15,
    eps: float = 1.0,
    horizon: int = (1 << 20) - 1,
    z: float = 2.0,
    sensitivity: float = 4.0,
    f_min: int | None = None,
) -> Calibration:
    """Choose ``k``, the initial rate and the warm-up ``F_min`` of the space-bounded sketch for accuracy ``alpha``.

    The published estimate is ``(N + noise) / p`` where ``N`` is the sampled count in rate units (``N ~ p F``)
    and ``noise`` is the binary-tree mechanism's prefix noise: a sum of at most ``L`` Laplace(``b``) node draws
    with ``b = L s / eps``, so its variance is at most ``L * 2 b**2`` (all ``L`` nodes used), i.e.
    ``sigma = L**1.5 * s * sqrt(2) / eps``. Sampling adds a relative variance of at most ``1 / N`` (Bernoulli
    coins: ``(1 - p) / (p F)``). The relative error is within ``alpha`` at ``z`` standard deviations when
    ``z * sqrt(sigma**2 / N**2 + 1 / N) <= alpha``, that is for ``N >= N* = (z**2 + sqrt(z**4 + 4 alpha**2 z**2
    sigma**2)) / (2 alpha**2)``. The count must stay above ``N*`` at all times after the warm-up:

    * a halving (triggered when ``k`` keys are stored) leaves about ``k / 2`` of them, so ``k = 2 N*``;
    * before any halving ``N = p0 F``, so the guarantee starts at ``F_min = N* / p0``. The default ``p0 = 1``
      stores every key until the budget is reached (exact counting, then sampling); pass ``f_min`` to start
      at ``p0 = N* / f_min`` instead.

    With the defaults (``alpha = 0.15``, ``eps = 1``, ``2**20 - 1`` updates, ``z = 2``, ``s = 4``): ``L = 20``,
    ``sigma = 506``, ``N* = 6,836``, ``k = 13,672``, ``p0 = 1``, ``F_min = 6,836``. The bound is on the error
    relative to the current ``F``; the spec's error is relative to the prefix maximum, which is larger, so it
    holds a fortiori. It is worst-case in the popcount (on average half the nodes are used) and in ``s``
    (``4 - 2p``), and it assumes cardinality's weights (``w = 1`` for a stored key seen once): a stream whose
    stored keys are mostly seen many times (words) keeps ``N`` below ``k / 2`` and errs more.

    Args:
        alpha: Target relative error (> 0).
        eps: Privacy parameter of each tree (> 0).
        horizon: Stream length the tree is sized for (sets ``L``).
        z: Standard deviations of headroom.
        sensitivity: One coin's l1 effect on the count sequence.
        f_min: Warm-up count; None: ``N*`` at ``p0 = 1``.

    Returns:
        The :class:`Calibration`.
    """
    if not (alpha > 0 and eps > 0 and z > 0 and sensitivity > 0 and horizon >= 1):
        raise ValueError("alpha, eps, z and sensitivity must be > 0 and horizon >= 1")
    levels = levels_for(horizon)
    sigma = levels**1.5 * sensitivity * math.sqrt(2.0) / eps
    count = math.ceil((z**2 + math.sqrt(z**4 + 4 * alpha**2 * z**2 * sigma**2)) / (2 * alpha**2))
    rate = 1.0 if f_min is None else min(1.0, count / f_min)
    return Calibration(
        alpha, z, eps, horizon, levels, sensitivity, sigma, count, 2 * count, rate, math.ceil(count / rate)
    )


def table_capacity(k: int) -> int:
    """The smallest power-of-two key table that holds ``k`` keys at load <= 3/4."""
    return 1 << max(1, math.ceil(math.log2(math.ceil(k * 4 / 3))))


# ------------------------------------------------------------------------------------------ the robust sketch


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
      :func:`calibrate` picks ``k`` and the rate for a target accuracy.
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
        return np.random.default_rng([*(int(w) for w in words.view(np.uint64)), int(salt) & _MASK64, 0xC0B1])

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
        (self.inserted if op == INC else self.removed).update(int(key))
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
    "Calibration",
    "RobustSketch",
    "ThetaSketch",
    "calibrate",
    "stat_values",
    "uniform_hash",
]
