"""The folds and label draws of the evaluation protocol (:mod:`zoo.aporia.protocol`).

Stratified folds (:func:`stratified_folds`, the spec's) or answer-grouped ones (:func:`grouped_folds`: every copy of
one answer string in one test part, ``zoo eval aporia``'s default since issue 18), and the nested class-balanced label
budgets drawn from a fold's training part (:func:`balanced_labels`). Test labels are used only for scoring.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def stratified_folds(labels: np.ndarray, splits: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``splits`` stratified (train, test) index pairs whose test parts partition the responses."""
    from sklearn.model_selection import StratifiedKFold

    folds = StratifiedKFold(n_splits=splits, shuffle=True, random_state=seed)
    return list(folds.split(np.zeros(len(labels)), labels))


def grouped_folds(labels: np.ndarray, groups: Sequence, splits: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``splits`` (train, test) index pairs whose test parts partition the responses, each group in one test part.

    Groups (equal answer strings) go, largest first (ties in a seeded random order), to the part whose
    worst class share would stay lowest (ties: the smaller part, then at random), like sklearn's
    ``StratifiedGroupKFold``, but deterministic for any number of groups. With fewer groups than ``splits`` some test
    parts are empty.

    Args:
        labels: ``(n,)`` labels.
        groups: ``(n,)`` group keys (any hashable: the answer texts).
        splits: Number of parts.
        seed: Seed of the tie-breaking.
    """
    labels = np.asarray(labels).astype(np.int64)
    if len(groups) != len(labels):
        raise ValueError(f"{len(groups)} group keys for {len(labels)} labels")
    _, group = np.unique(np.asarray(groups, dtype=object).astype(str), return_inverse=True)
    counts = np.zeros((group.max() + 1 if len(group) else 0, 2))
    np.add.at(counts, (group, labels), 1)
    total = np.maximum(counts.sum(0), 1)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(counts))
    order = order[np.argsort(-counts[order].sum(1), kind="stable")]
    parts, where = np.zeros((splits, 2)), np.zeros(len(counts), dtype=np.int64)
    size = len(labels) or 1
    for g in order:
        worst = ((parts + counts[g]) / total).max(1)  # then the smaller part, then at random
        where[g] = int(np.argmin(worst + 1e-3 * parts.sum(1) / size + 1e-9 * rng.random(splits)))
        parts[where[g]] += counts[g]
    index = np.arange(len(labels))
    return [(index[where[group] != f], index[where[group] == f]) for f in range(splits)]


def answer_groups(texts: Sequence[str]) -> list[str]:
    """Group keys of answer texts for :func:`grouped_folds`: case-folded, whitespace-collapsed, without the final
    punctuation (two answers that differ only there are the same answer to an annotator and to MiniLM)."""
    return [" ".join(str(t).casefold().split()).rstrip(" .!?") for t in texts]


def folds_of(
    labels: np.ndarray, splits: int, seed: int, groups: Sequence | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`grouped_folds` when ``groups`` is given, else :func:`stratified_folds`."""
    if groups is None:
        return stratified_folds(labels, splits, seed)
    return grouped_folds(labels, groups, splits, seed)


def evaluable(labels: np.ndarray, train: np.ndarray, test: np.ndarray) -> bool:
    """A fold has an F1 iff its test part holds a hallucinated answer and its training part both classes."""
    labels = np.asarray(labels)
    return bool(labels[test].sum() > 0 and len(np.unique(labels[train])) == 2)


def balanced_labels(train_labels: np.ndarray, budgets: Sequence[int], rng: np.random.Generator) -> list[np.ndarray]:
    """Indices (into the training part) labelled at each budget; nested, class-balanced as far as possible.

    Each class gets ``L // 2`` labels (the hallucinated class the odd one); when a class has fewer
    training responses, the other class fills the shortfall, so every budget labels ``min(L, n)`` points.
    """
    by_class = [rng.permutation(np.flatnonzero(train_labels == c)) for c in (0, 1)]
    chosen = []
    for budget in budgets:
        budget = min(budget, len(train_labels))
        take_h = min(budget - budget // 2, len(by_class[1]))
        take_g = min(budget - take_h, len(by_class[0]))
        take_h = min(budget - take_g, len(by_class[1]))
        chosen.append(np.concatenate([by_class[0][:take_g], by_class[1][:take_h]]))
    return chosen
