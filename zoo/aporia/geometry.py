"""The geometric premise: genuine responses cluster more tightly than hallucinated ones.

Per (model, prompt) pair the tightness of a class is the mean cosine distance ``1 - cos`` over its
within-class pairs of raw (normalised) embeddings; the pair's gap is tightness(H) - tightness(G).
The statistic is the mean gap over pairs, and its one-sided p-value comes from a pooled permutation
test: labels are shuffled within every pair (class sizes kept) and the statistic recomputed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def cosine_distances(x: np.ndarray) -> np.ndarray:
    """``1 - cos`` between all rows of ``x`` (zero diagonal)."""
    x = np.asarray(x, dtype=np.float64)
    unit = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    distances = 1.0 - unit @ unit.T
    np.fill_diagonal(distances, 0.0)
    return np.clip(distances, 0.0, 2.0)


def class_spreads(distances: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Mean within-class distance of the genuine (column 0) and hallucinated (column 1) class.

    Args:
        distances: ``(n, n)`` pairwise distances with a zero diagonal.
        labels: ``(..., n)`` 0/1 label vectors (a batch of relabellings is allowed).
    """
    y = np.asarray(labels, dtype=distances.dtype)
    spreads = []
    for member in (1 - y, y):
        count = member.sum(-1)
        total = ((member @ distances) * member).sum(-1)
        spreads.append(total / np.maximum(count * (count - 1), 1.0))
    return np.stack(spreads, axis=-1)


def tightness_test(
    embeddings: Sequence[np.ndarray], labels: Sequence[np.ndarray], permutations: int = 10_000, seed: int = 0
) -> dict[str, float]:
    """Mean (H minus G) within-class spread over pairs, the fraction of pairs where G is tighter, and the p-value.

    Args:
        embeddings: One ``(n_p, d)`` array of raw response embeddings per pair.
        labels: One ``(n_p,)`` 0/1 array per pair (1 = hallucinated).
        permutations: Label shuffles of the pooled permutation test.
        seed: Seed of the shuffles.

    Returns:
        ``tightness_gap``, ``tightness_genuine``, ``tightness_hallucinated``, ``tightness_frac_pairs``
        and ``tightness_p_value`` = (1 + #{permuted statistic >= observed}) / (1 + permutations).
    """
    rng = np.random.default_rng(seed)
    observed, permuted = [], np.zeros(permutations)
    for x, y in zip(embeddings, labels, strict=True):
        distances = cosine_distances(x).astype(np.float32)
        y = np.asarray(y, dtype=np.int64)
        observed.append(class_spreads(distances, y))
        shuffled = rng.permuted(np.broadcast_to(y, (permutations, len(y))), axis=1).astype(np.float32)
        spreads = class_spreads(distances, shuffled)
        permuted += spreads[:, 1] - spreads[:, 0]
    spreads = np.array(observed)
    gaps = spreads[:, 1] - spreads[:, 0]
    statistic = float(gaps.mean())
    permuted /= len(gaps)
    return {
        "tightness_gap": statistic,
        "tightness_genuine": float(spreads[:, 0].mean()),
        "tightness_hallucinated": float(spreads[:, 1].mean()),
        "tightness_frac_pairs": float(np.mean(gaps > 0)),
        "tightness_p_value": float((1 + np.sum(permuted >= statistic)) / (1 + permutations)),
    }
