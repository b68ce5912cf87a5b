"""Vectorised bookkeeping shared by every sketch: the update encoding, per-key segments of a chunk, and a
sorted int64 key table with a fixed-capacity layout (so a sketch's stored keys can live in tensor buffers).

A chunk of updates is three equal-length arrays in stream order: ``ops`` (:data:`INC` or :data:`RESET`),
``keys`` (int64 ids) and ``deltas`` (int64, >= 0; ignored for resets). Processing a chunk in one shot needs
the stream order *per key*: :func:`group_updates` sorts the chunk by key (stably, so time order is kept
inside a key) and cuts each key's run into *segments* at its resets; within a segment a key's value only
grows, so segmented cumulative sums give every intermediate value without a Python loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zoo._errors import ZooError

INC = 0
RESET = 1


def check_updates(ops, keys, deltas=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate a chunk of updates and return it as ``(ops int8, keys int64, deltas int64)`` numpy arrays.

    Args:
        ops: Operation codes, 0 = Inc, 1 = Reset.
        keys: Integer key ids.
        deltas: Non-negative integer increments (default 1 for every update).

    Raises:
        ValueError: On mismatched lengths, unknown op codes, non-integer keys or negative increments.
    """
    ops = np.asarray(ops.cpu() if hasattr(ops, "cpu") else ops)
    keys = np.asarray(keys.cpu() if hasattr(keys, "cpu") else keys)
    if deltas is None:
        deltas = np.ones(keys.shape, dtype=np.int64)
    deltas = np.asarray(deltas.cpu() if hasattr(deltas, "cpu") else deltas)
    if not (ops.ndim == keys.ndim == deltas.ndim == 1 and len(ops) == len(keys) == len(deltas)):
        raise ValueError(
            f"ops, keys and deltas must be 1-D arrays of one length; got shapes {ops.shape}, {keys.shape}, "
            f"{deltas.shape}"
        )
    for name, array in (("ops", ops), ("keys", keys), ("deltas", deltas)):
        if array.size and not np.issubdtype(array.dtype, np.integer):
            raise ValueError(f"{name} must hold integers, got dtype {array.dtype}; map keys to int64 ids first")
    if ops.size and ((ops != INC) & (ops != RESET)).any():
        raise ValueError("ops must be 0 (Inc) or 1 (Reset); see zoo.resettable_sketch.table.INC / RESET")
    if deltas.size and (deltas < 0).any():
        raise ValueError("Inc deltas must be >= 0: the resettable model only increases a value or resets it")
    return ops.astype(np.int8, copy=False), keys.astype(np.int64, copy=False), deltas.astype(np.int64, copy=False)


def segmented_cumsum(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Inclusive cumulative sums of ``values`` that restart wherever ``starts`` is True (``starts[0]`` must be)."""
    total = np.cumsum(values)
    first = np.flatnonzero(starts)
    offset = total[first] - values[first]
    return total - offset[np.cumsum(starts) - 1]


def run_start_index(starts: np.ndarray) -> np.ndarray:
    """For every position, the index where its run (as cut by ``starts``) begins."""
    return np.maximum.accumulate(np.where(starts, np.arange(len(starts)), 0))


@dataclass
class KeyGroups:
    """A chunk sorted by key, with its key groups and reset-delimited segments.

    Attributes:
        order: Permutation sorting the chunk by key (stable: time order within a key).
        ops: Sorted ops.
        deltas: Sorted deltas.
        group_start: True at the first update of each key.
        group_id: Index into ``unique_keys`` for every sorted position.
        unique_keys: The chunk's distinct keys, ascending.
        last_index: Sorted position of each key's last update.
        is_reset: Sorted positions that are resets.
        seg_start: True where a segment starts (a key's first update, or a reset).
        first_segment: True for positions in the key's first segment (before its first reset in the chunk).
    """

    order: np.ndarray
    ops: np.ndarray
    deltas: np.ndarray
    group_start: np.ndarray
    group_id: np.ndarray
    unique_keys: np.ndarray
    last_index: np.ndarray
    is_reset: np.ndarray
    seg_start: np.ndarray
    first_segment: np.ndarray

    def previous(self, after: np.ndarray, initial: np.ndarray) -> np.ndarray:
        """Per-position value *before* the update, from the values ``after`` it and each key's ``initial`` value."""
        before = np.empty_like(after)
        before[1:] = after[:-1]
        before[self.group_start] = initial[self.group_start]
        return before

    def to_stream_order(self, sorted_values: np.ndarray) -> np.ndarray:
        """Scatter per-position values back to stream order."""
        out = np.empty_like(sorted_values)
        out[self.order] = sorted_values
        return out


def group_updates(ops: np.ndarray, keys: np.ndarray, deltas: np.ndarray) -> KeyGroups:
    """Sort a non-empty chunk by key and find its key groups and segments (see :class:`KeyGroups`)."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    n = len(sorted_keys)
    group_start = np.empty(n, dtype=bool)
    group_start[0] = True
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=group_start[1:])
    starts = np.flatnonzero(group_start)
    sorted_ops = ops[order]
    is_reset = sorted_ops == RESET
    resets_so_far = segmented_cumsum(is_reset.astype(np.int64), group_start)
    return KeyGroups(
        order=order,
        ops=sorted_ops,
        deltas=deltas[order],
        group_start=group_start,
        group_id=np.cumsum(group_start) - 1,
        unique_keys=sorted_keys[starts],
        last_index=np.append(starts[1:] - 1, n - 1),
        is_reset=is_reset,
        seg_start=group_start | is_reset,
        first_segment=resets_so_far == 0,
    )


class KeyTable:
    """Sorted int64 keys with an int64 value each, in fixed-capacity arrays (or growable ones).

    The arrays may be views of tensor buffers: every method writes in place, so a LightningModule that
    registered them as buffers checkpoints the table as it is. A value of 0 means "absent".

    Args:
        keys: int64 array of the capacity; the first ``size`` entries are the stored keys, ascending.
        values: int64 array of the same length.
        size: 0-d int64 array holding the number of stored keys.
        growable: Reallocate (doubling) instead of failing when the capacity is exceeded.
    """

    def __init__(self, keys: np.ndarray, values: np.ndarray, size: np.ndarray, growable: bool = False):
        self.keys, self.values, self._size, self.growable = keys, values, size, growable

    @classmethod
    def allocate(cls, capacity: int, growable: bool = False) -> KeyTable:
        """An empty table with room for ``capacity`` keys."""
        return cls(np.zeros(capacity, np.int64), np.zeros(capacity, np.int64), np.zeros((), np.int64), growable)

    @property
    def size(self) -> int:
        return int(self._size)

    @property
    def capacity(self) -> int:
        return len(self.keys)

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """Views of the stored keys and their values."""
        n = self.size
        return self.keys[:n], self.values[:n]

    def lookup(self, sorted_keys: np.ndarray) -> np.ndarray:
        """Values of ascending ``sorted_keys`` (0 for absent keys)."""
        keys, values = self.items()
        if not len(keys):
            return np.zeros(len(sorted_keys), np.int64)
        pos = np.minimum(np.searchsorted(keys, sorted_keys), len(keys) - 1)
        return np.where(keys[pos] == sorted_keys, values[pos], 0)

    def get(self, key: int) -> int:
        """The value of one key (0 if absent)."""
        n = self.size
        i = int(np.searchsorted(self.keys[:n], key))
        return int(self.values[i]) if i < n and self.keys[i] == key else 0

    def set(self, key: int, value: int) -> None:
        """Set one key's value; 0 removes it."""
        n = self.size
        i = int(np.searchsorted(self.keys[:n], key))
        present = i < n and self.keys[i] == key
        if present and value:
            self.values[i] = value
        elif present:
            self.keys[i : n - 1] = self.keys[i + 1 : n]
            self.values[i : n - 1] = self.values[i + 1 : n]
            self.keys[n - 1], self.values[n - 1] = 0, 0  # unused slots stay zero: a canonical buffer
            self._size[...] = n - 1
        elif value:
            self._reserve(n + 1)
            self.keys[i + 1 : n + 1] = self.keys[i:n]
            self.values[i + 1 : n + 1] = self.values[i:n]
            self.keys[i], self.values[i] = key, value
            self._size[...] = n + 1

    def commit(self, sorted_keys: np.ndarray, new_values: np.ndarray) -> None:
        """Set the values of distinct ascending ``sorted_keys`` at once (0 removes)."""
        keys, values = self.items()
        n = len(keys)
        pos = np.searchsorted(keys, sorted_keys)
        found = pos < n
        found[found] = keys[pos[found]] == sorted_keys[found]
        keep = np.ones(n, dtype=bool)
        keep[pos[found & (new_values == 0)]] = False
        update = found & (new_values != 0)
        values[pos[update]] = new_values[update]
        insert = ~found & (new_values != 0)
        base_keys, base_values = keys[keep], values[keep]
        where = np.searchsorted(base_keys, sorted_keys[insert])
        merged_keys = np.insert(base_keys, where, sorted_keys[insert])
        merged_values = np.insert(base_values, where, new_values[insert])
        self.replace(merged_keys, merged_values)

    def replace(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Replace the content by ascending ``keys`` with non-zero ``values``."""
        m, old = len(keys), self.size
        self._reserve(m)
        self.keys[:m], self.values[:m] = keys, values
        self.keys[m:old], self.values[m:old] = 0, 0  # unused slots stay zero: a canonical buffer
        self._size[...] = m

    def _reserve(self, needed: int) -> None:
        if needed <= self.capacity:
            return
        if not self.growable:
            raise ZooError(
                f"the sketch's key table is full ({self.capacity} keys); build it with a larger `capacity` "
                "or set `k` so that it halves its sampling rate"
            )
        capacity = max(needed, 2 * self.capacity, 1024)
        self.keys = np.concatenate([self.keys, np.zeros(capacity - self.capacity, np.int64)])
        self.values = np.concatenate([self.values, np.zeros(capacity - len(self.values), np.int64)])
