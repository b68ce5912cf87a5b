"""A PCG64 generator's state as a fixed int64 array, so a sketch's randomness is checkpointed with its arrays.

:class:`~zoo.resettable_sketch.robust.RobustSketch` keeps its generator's state in ``arrays["rng_state"]``
(:func:`pack_rng`) and resumes from it (:func:`unpack_rng`), so a restored sketch continues the random stream where
it stopped instead of restarting it.
"""

from __future__ import annotations

import numpy as np

MASK64 = (1 << 64) - 1


def pack_rng(rng: np.random.Generator, out: np.ndarray) -> None:
    """Write a PCG64 generator's state into an int64[6] array (two 128-bit words, the buffered uint32)."""
    state = rng.bit_generator.state
    words = []
    for value in (state["state"]["state"], state["state"]["inc"]):
        words += [value & MASK64, value >> 64]
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
