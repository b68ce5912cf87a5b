"""The depth-wise Markov model over top-K feature sets, its NLL score, and the unigram baselines.

A token at layer l is the set ``A_l`` of its top-K feature indices. Counts ``C_l[i, j]`` = number of in-domain
tokens with ``i in A_l`` and ``j in A_{l+1}`` (accumulated with ``np.add.at``). With smoothing ``alpha > 0``,
``P_l(j | i) = (C_l[i, j] + alpha) / (sum_j' C_l[i, j'] + alpha F)``. A token's score is the mean of
``-log P_l(j | i)`` over the transitions l -> l+1 and the pairs ``A_l x A_{l+1}``; a text's score is the mean
over its tokens (so it does not depend on token order). Higher is more OOD.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def check_alpha(alpha: float) -> float:
    if not (isinstance(alpha, int | float) and np.isfinite(alpha) and alpha > 0):
        raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")
    return float(alpha)


def check_indices(indices: np.ndarray, num_layers: int | None = None, features: int | None = None) -> np.ndarray:
    """``indices (tokens, layers, K)`` of integer feature ids; raise a clear ValueError otherwise."""
    indices = np.asarray(indices)
    if indices.ndim != 3 or not np.issubdtype(indices.dtype, np.integer):
        raise ValueError(
            f"top-K indices must be an integer array (tokens, layers, K), got {indices.dtype} {indices.shape}"
        )
    if num_layers is not None and indices.shape[1] != num_layers:
        raise ValueError(f"top-K indices have {indices.shape[1]} layers, expected {num_layers}")
    if features is not None and indices.size and (indices.min() < 0 or indices.max() >= features):
        raise ValueError(f"feature ids must be in [0, {features}), got [{indices.min()}, {indices.max()}]")
    return indices


def transition_counts(indices: np.ndarray, features: int, counts: np.ndarray | None = None) -> np.ndarray:
    """Add the pairs of ``indices (tokens, layers, K)`` to ``counts (layers - 1, F, F)`` (created if None)."""
    indices = check_indices(indices, features=features).astype(np.int64)
    layers = indices.shape[1]
    if counts is None:
        counts = np.zeros((layers - 1, features, features), dtype=np.float64)
    top = indices.shape[2]
    for layer in range(layers - 1):
        rows = np.repeat(indices[:, layer, :], top, axis=1).ravel()
        cols = np.tile(indices[:, layer + 1, :], (1, top)).ravel()
        np.add.at(counts[layer], (rows, cols), 1.0)
    return counts


def transition_nll_table(counts: np.ndarray, alpha: float) -> np.ndarray:
    """``-log P_l(j | i)`` as float32 ``(layers - 1, F, F)``."""
    alpha = check_alpha(alpha)
    features = counts.shape[-1]
    rows = counts.sum(-1, keepdims=True)
    return (np.log(rows + alpha * features) - np.log(counts + alpha)).astype(np.float32)


def token_transition_nll(indices: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Per-token mean NLL over transitions and pairs, ``(tokens,)``."""
    indices = check_indices(indices, num_layers=table.shape[0] + 1, features=table.shape[-1]).astype(np.int64)
    total = np.zeros(len(indices))
    for layer in range(table.shape[0]):
        pairs = table[layer][indices[:, layer, :, None], indices[:, layer + 1, None, :]]
        total += pairs.mean(axis=(1, 2))
    return total / table.shape[0]


def unigram_counts(indices: np.ndarray, features: int) -> np.ndarray:
    """Per-layer feature counts ``(layers, F)``: how many tokens have each feature in their top-K set."""
    indices = check_indices(indices, features=features).astype(np.int64)
    counts = np.zeros((indices.shape[1], features))
    for layer in range(indices.shape[1]):
        np.add.at(counts[layer], indices[:, layer, :].ravel(), 1.0)
    return counts


def unigram_nll_table(counts: np.ndarray, alpha: float) -> np.ndarray:
    """``-log P_l(j)`` ``(layers, F)`` with ``P_l(j) = (U_l[j] + alpha) / (sum U_l + alpha F)``."""
    alpha = check_alpha(alpha)
    return (np.log(counts.sum(-1, keepdims=True) + alpha * counts.shape[-1]) - np.log(counts + alpha)).astype(
        np.float32
    )


def token_unigram_nll(indices: np.ndarray, table: np.ndarray, layers: Sequence[int] | None = None) -> np.ndarray:
    """Per-token mean ``-log P_l(j)`` over the chosen layers (default all) and the top-K features."""
    indices = check_indices(indices, num_layers=table.shape[0], features=table.shape[-1]).astype(np.int64)
    chosen = range(table.shape[0]) if layers is None else layers
    return np.mean([table[layer][indices[:, layer, :]].mean(-1) for layer in chosen], axis=0)


def text_scores(token_scores: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Mean token score per text; text t owns tokens ``offsets[t]:offsets[t + 1]``."""
    sums = np.add.reduceat(token_scores, offsets[:-1]) if len(token_scores) else np.zeros(len(offsets) - 1)
    return sums / np.diff(offsets)


def surprising_transitions(indices: np.ndarray, table: np.ndarray, top: int = 5) -> list[dict]:
    """The ``top`` most surprising transitions of one text: ``{token, layer, from, to, nll}``, largest NLL first.

    Args:
        indices: The text's top-K sets ``(tokens, layers, K)``.
        table: ``-log P`` from :func:`transition_nll_table`.
        top: How many to return.
    """
    indices = check_indices(indices, num_layers=table.shape[0] + 1, features=table.shape[-1]).astype(np.int64)
    found = []
    for layer in range(table.shape[0]):
        src, dst = indices[:, layer, :, None], indices[:, layer + 1, None, :]
        values = table[layer][src, dst]  # (tokens, K, K)
        for flat in np.argsort(values, axis=None)[::-1][:top]:
            token, a, b = np.unravel_index(flat, values.shape)
            found.append(
                {"token": int(token), "layer": layer, "from": int(src[token, a, 0]), "to": int(dst[token, 0, b]),
                 "nll": float(values[token, a, b])}
            )  # fmt: skip
    found.sort(key=lambda item: -item["nll"])
    return found[:top]
