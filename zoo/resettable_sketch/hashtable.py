"""The robust sketch's key table (open addressing in fixed int64 arrays) and its compiled update kernel.

The table is two int64 arrays of a power-of-two capacity, ``keys`` and ``values``; a slot is empty iff its value
is 0 (stored counts are >= 1), so any int64 is a valid key. Linear probing from a Fibonacci hash; deletion
shifts the following run back (no tombstones), so the layout depends only on the sequence of operations and a
checkpointed table reloads bit-identical. The load stays <= 3/4 (the sketch halves its rate before that).

:func:`apply_updates` runs a chunk of updates *sequentially* (stream order, exactly the per-update semantics)
with the coins drawn beforehand in bulk by numpy, and writes every update's change of the count ``N``. It is
compiled with numba when numba is installed (tens of millions of updates per second); without numba the same
Python code runs, bit-identical and slow. Both the vectorised path (``update_batch``) and the one-key path
(``inc``/``reset``) go through it.
"""

from __future__ import annotations

import numpy as np

try:  # numba is in the `sketch` extra; the plain-Python fallback gives identical results, slowly
    from numba import njit

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised only without the extra
    HAVE_NUMBA = False

    def njit(*args, **kwargs):
        if args and callable(args[0]):
            return args[0]
        return lambda function: function


STAT_CODES = {"card": 0, "sum": 1, "lp": 2}
_GOLDEN = 0x9E3779B97F4A7C15 - (1 << 64)  # as a signed int64: the product wraps mod 2**64


@njit(cache=True)
def _home(key, shift):
    """Fibonacci hashing: bits ``shift..63`` of ``key * golden`` (mod 2**64); masking makes ``>>`` logical."""
    return (key * _GOLDEN >> shift) & ((1 << (64 - shift)) - 1)


@njit(cache=True)
def _find(tkeys, tvals, key, shift):
    """The slot holding ``key``, or the empty slot where it would go."""
    mask = tkeys.shape[0] - 1
    i = _home(key, shift)
    while tvals[i] != 0 and tkeys[i] != key:
        i = (i + 1) & mask
    return i


@njit(cache=True)
def _delete(tkeys, tvals, i, shift):
    """Empty slot ``i`` and shift the rest of its probe run back (backward-shift deletion)."""
    mask = tkeys.shape[0] - 1
    j = i
    while True:
        j = (j + 1) & mask
        if tvals[j] == 0:
            break
        home = _home(tkeys[j], shift)
        stays = (i < home <= j) if i <= j else (i < home or home <= j)
        if not stays:
            tkeys[i] = tkeys[j]
            tvals[i] = tvals[j]
            i = j
    tkeys[i] = 0
    tvals[i] = 0


@njit(cache=True)
def _weight(count, stat, rate, q, cap):
    """``w(c)`` in rate units (see ``RobustSketch.weights``)."""
    if count == 0:
        return 0.0
    if stat == 1:
        return float(count)
    if stat == 0:
        return 1.0 if count == 1 else rate
    now = float(min(count, cap)) ** q
    before = float(min(count - 1, cap)) ** q if count > 1 else 0.0
    return rate * now + (1.0 - rate) * (now - before)


@njit(cache=True)
def apply_updates(tkeys, tvals, size, shift, ops, keys, deltas, draws, stat, rate, q, cap, threshold, change):
    """Apply updates in stream order until the table holds ``threshold`` keys.

    Args:
        tkeys, tvals: The table (modified in place).
        size: Keys stored now.
        shift: ``64 - log2(capacity)``.
        ops, keys, deltas: The updates (0 = Inc, 1 = Reset).
        draws: Per update, the drawn randomness: Sum, the sampled units of the Inc; sample-and-hold, the index
            of the first successful coin (``units`` or fewer means the key is stored). Unused for resets and
            for Incs of stored keys (drawn anyway, never reused).
        stat: 0 card, 1 sum, 2 lp.
        rate, q, cap: The sketch's rate, L_q exponent and value cap.
        threshold: Stop right after the update that makes the table hold this many keys.
        change: Output, the change of the count ``N`` at every applied update.

    Returns:
        ``(applied, size)``: updates applied and keys stored after them.
    """
    n = ops.shape[0]
    for t in range(n):
        key = keys[t]
        i = _find(tkeys, tvals, key, shift)
        old = tvals[i]
        new = 0
        if ops[t] == 0:
            d = deltas[t]
            if stat == 1:
                new = old + draws[t]
            else:
                units = (1 if d > 0 else 0) if stat == 0 else d
                if old > 0:
                    new = old + units
                elif units > 0 and draws[t] <= units:
                    new = units - draws[t] + 1
        change[t] = _weight(new, stat, rate, q, cap) - _weight(old, stat, rate, q, cap)
        if new != old:
            if old == 0:
                tkeys[i] = key
                tvals[i] = new
                size += 1
            elif new == 0:
                _delete(tkeys, tvals, i, shift)
                size -= 1
            else:
                tvals[i] = new
        if size >= threshold:
            return t + 1, size
    return n, size


@njit(cache=True)
def _insert_all(tkeys, tvals, keys, values, shift):
    for t in range(keys.shape[0]):
        i = _find(tkeys, tvals, keys[t], shift)
        tkeys[i] = keys[t]
        tvals[i] = values[t]


@njit(cache=True)
def _get(tkeys, tvals, key, shift):
    return tvals[_find(tkeys, tvals, key, shift)]


class HashTable:
    """int64 keys with a positive int64 value each, in fixed power-of-two arrays (views of tensor buffers).

    Args:
        keys: int64 array, length a power of two >= 2.
        values: int64 array of the same length (0 = empty slot).
        size: 0-d int64 array holding the number of stored keys.
    """

    def __init__(self, keys: np.ndarray, values: np.ndarray, size: np.ndarray):
        capacity = len(keys)
        if capacity < 2 or capacity & (capacity - 1):
            raise ValueError(f"the key table's capacity must be a power of two >= 2, got {capacity}")
        self.keys, self.values, self._size = keys, values, size
        self.shift = 64 - (capacity.bit_length() - 1)

    @property
    def size(self) -> int:
        return int(self._size)

    @property
    def capacity(self) -> int:
        return len(self.keys)

    def get(self, key: int) -> int:
        """The value of one key (0 if absent)."""
        return int(_get(self.keys, self.values, np.int64(key), self.shift))

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """Copies of the stored keys and their values, in slot order."""
        used = self.values != 0
        return self.keys[used].copy(), self.values[used].copy()

    def replace(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Replace the content by distinct ``keys`` with positive ``values``."""
        if len(keys) > self.capacity * 3 // 4:
            raise ValueError(f"{len(keys)} keys exceed 3/4 of the table's capacity {self.capacity}")
        self.keys[:] = 0
        self.values[:] = 0
        _insert_all(self.keys, self.values, np.asarray(keys, np.int64), np.asarray(values, np.int64), self.shift)
        self._size[...] = len(keys)


def warm_up() -> None:
    """Compile the kernels now (numba caches them on disk, so this is quick after the first time)."""
    table = HashTable(np.zeros(4, np.int64), np.zeros(4, np.int64), np.zeros((), np.int64))
    table.replace(np.array([3], np.int64), np.array([1], np.int64))
    table.get(3)
    one = np.zeros(1, np.int64)
    apply_updates(table.keys, table.values, 1, table.shift, one.astype(np.int8), one, one + 1, one + 1, 0, 0.5, 0.5,
                  64, 3, np.zeros(1))  # fmt: skip
