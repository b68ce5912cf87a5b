"""The binary-tree mechanism for continual counting (Dwork, Naor, Pitassi, Rothblum 2010; Chan, Shi, Song 2011).

A counter receives one real increment ``u_t`` per time step and publishes a noisy prefix sum after every
step. Time steps ``1..2**levels - 1`` are the leaves of a complete binary tree; every dyadic node (the
interval ``[j * 2**l + 1, (j + 1) * 2**l]`` at level ``l``) gets its exact sum plus one Laplace draw of
scale ``b = levels * sensitivity / eps``, drawn once, when the node completes, and reused by every later
output. A prefix ``1..tau`` is the disjoint union of the completed nodes named by the set bits of ``tau``
(the most recently completed node of each such level), so an output adds at most ``levels`` noisy nodes:
its noise has mean 0 and variance ``popcount(tau) * 2 * b**2``. One step's increment lies in one node per
level, so changing the increment sequence by ``sensitivity`` in l1 moves the node vector by at most
``levels * sensitivity``: the whole output sequence is ``eps``-DP.

Nodes are created lazily: per level the state is the running sum of the open node and the noisy value of
the last completed one, O(levels) numbers in all. A tree starts from an initial value published once
with ``Laplace(sensitivity / eps)`` (the sketch's count at the start of an epoch).

The state lives in numpy arrays (optionally views of tensor buffers) so that it checkpoints as it is.
"""

from __future__ import annotations

import math

import numpy as np

MAX_LEVELS = 48  # 2**48 steps per tree; a full tree rolls over to a bigger one (see the sketch)


def allocate_tree() -> dict[str, np.ndarray]:
    """Fresh state arrays of one tree (all zeros; call :meth:`BinaryTreeCounter.start` before use)."""
    return {
        "tree_time": np.zeros((), np.int64),
        "tree_levels": np.zeros((), np.int64),
        "tree_sensitivity": np.zeros((), np.float64),
        "tree_init": np.zeros((), np.float64),
        "tree_open": np.zeros(MAX_LEVELS, np.float64),
        "tree_noisy": np.zeros(MAX_LEVELS, np.float64),
    }


def levels_for(horizon: int) -> int:
    """Number of levels of a tree whose ``2**levels - 1`` leaves cover ``horizon`` steps."""
    return max(1, math.ceil(math.log2(horizon + 1)))


class BinaryTreeCounter:
    """Continual counting with lazily created noisy dyadic nodes.

    Args:
        state: Arrays from :func:`allocate_tree` (modified in place).
        eps: Privacy parameter of the tree; ``None`` or ``inf`` publishes exact prefix sums.
    """

    def __init__(self, state: dict[str, np.ndarray], eps: float | None):
        self.state = state
        self.eps = eps
        self._bits = np.arange(MAX_LEVELS, dtype=np.int64)
        self._value: float | None = None  # the published value until the next step

    @property
    def time(self) -> int:
        """Steps received since :meth:`start`."""
        return int(self.state["tree_time"])

    @property
    def levels(self) -> int:
        return int(self.state["tree_levels"])

    @property
    def noise_scale(self) -> float:
        """Laplace scale ``b`` of every node: ``levels * sensitivity / eps``."""
        if self.eps is None or math.isinf(self.eps):
            return 0.0
        return self.levels * float(self.state["tree_sensitivity"]) / self.eps

    @property
    def capacity_left(self) -> int:
        """Steps this tree can still take (its leaves are ``1..2**levels - 1``)."""
        return (1 << self.levels) - 1 - self.time

    def start(self, initial: float, levels: int, sensitivity: float, rng: np.random.Generator) -> None:
        """Begin a new tree whose prefix sums start from ``initial`` (published once with Laplace noise).

        Args:
            initial: The exact count at the start.
            levels: Tree depth; the tree holds ``2**levels - 1`` steps.
            sensitivity: l1 sensitivity of the increment sequence to one unit of the protected randomness.
            rng: Source of the Laplace noise.
        """
        if not 1 <= levels <= MAX_LEVELS:
            raise ValueError(f"levels must be in [1, {MAX_LEVELS}], got {levels}")
        s = self.state
        self._value = None
        s["tree_time"][...] = 0
        s["tree_levels"][...] = levels
        s["tree_sensitivity"][...] = sensitivity
        s["tree_open"][:] = 0.0
        s["tree_noisy"][:] = 0.0
        scale = 0.0 if self.eps is None or math.isinf(self.eps) else sensitivity / self.eps
        s["tree_init"][...] = initial + (rng.laplace(0.0, scale) if scale else 0.0)

    def add(self, increments: np.ndarray, rng: np.random.Generator) -> None:
        """Take ``len(increments)`` steps at once; noise is drawn only for nodes that later outputs use.

        Inside a chunk only the chunk-end output is published, so a node that completes and is superseded
        by a later node of the same level within the chunk is never read: its draw is skipped (the
        published outputs have the same distribution as with per-step processing).
        """
        n = len(increments)
        if n == 0:
            return
        if n > self.capacity_left:
            raise ValueError(f"the tree has room for {self.capacity_left} steps, got {n}; roll over first")
        s = self.state
        self._value = None
        t0, levels = self.time, self.levels
        t1 = t0 + n
        prefix = np.zeros(n + 1)
        np.cumsum(increments, out=prefix[1:])
        completed, sums = [], []
        for level in range(levels):
            width = 1 << level
            boundary = (t1 >> level) << level  # end of the last node of this level completed by t1
            if boundary > t0:
                start = boundary - width
                total = prefix[boundary - t0] - (prefix[start - t0] if start >= t0 else -s["tree_open"][level])
                completed.append(level)
                sums.append(total)
                s["tree_open"][level] = prefix[n] - prefix[boundary - t0]
            else:
                s["tree_open"][level] += prefix[n]
        if completed:
            noise = self._noise(len(completed), rng)
            s["tree_noisy"][completed] = np.asarray(sums) + noise
        s["tree_time"][...] = t1

    def add_one(self, increment: float, rng: np.random.Generator) -> None:
        """Take one step."""
        if self.capacity_left < 1:
            raise ValueError("the tree is full; roll over first")
        s = self.state
        self._value = None
        t = self.time + 1
        levels = self.levels
        s["tree_open"][:levels] += increment
        done = min((t & -t).bit_length(), levels)  # levels 0..trailing_zeros(t) complete at step t
        s["tree_noisy"][:done] = s["tree_open"][:done] + self._noise(done, rng)
        s["tree_open"][:done] = 0.0
        s["tree_time"][...] = t

    def value(self) -> float:
        """The published (noisy) count after the steps so far."""
        if self._value is None:
            t = self.time
            used = ((t >> self._bits[: self.levels]) & 1).astype(bool)
            self._value = float(self.state["tree_init"]) + float(self.state["tree_noisy"][: self.levels][used].sum())
        return self._value

    def _noise(self, count: int, rng: np.random.Generator) -> np.ndarray | float:
        scale = self.noise_scale
        return rng.laplace(0.0, scale, size=count) if scale else 0.0
