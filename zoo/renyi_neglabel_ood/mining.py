"""NegLabel / CSP negative-label mining from a candidate vocabulary (plain numpy).

Candidates are WordNet nouns (prompt "a photo of a {}.", lexnames noun.person, noun.quantity and noun.group
excluded) and adjectives (prompt "this is a {} photo.", adj.pert excluded), embedded by the text tower. Each
candidate is scored by the 95th percentile of its cosine similarity to the ID label embeddings (1 if its
maximum similarity exceeds 0.95: a synonym of an ID class), and the lowest-scoring fraction is kept
(15% of the nouns, 10% of the adjectives): the labels farthest from every ID class.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from zoo._errors import ZooError

EXCLUDED_LEXNAMES = ("noun.person", "noun.quantity", "noun.group", "adj.pert")


def filter_lexnames(synsets: Sequence, excluded: Sequence[str] = EXCLUDED_LEXNAMES) -> list:
    """The synsets whose lexicographer file is not in ``excluded`` (NegLabel's filter)."""
    return [synset for synset in synsets if synset.lexname() not in excluded]


def candidate_scores(candidates: np.ndarray, id_labels: np.ndarray, percentile: float = 95.0) -> np.ndarray:
    """NegLabel's closeness of each candidate to the ID labels ``(C,)``: a percentile of its cosine similarities.

    Args:
        candidates: Candidate label embeddings ``(C, D)``.
        id_labels: ID label embeddings ``(K, D)``.
        percentile: Which percentile of the K similarities (NegLabel: 95).
    """
    candidates = np.asarray(candidates, dtype=np.float64)
    id_labels = np.asarray(id_labels, dtype=np.float64)
    if candidates.ndim != 2 or id_labels.ndim != 2 or candidates.shape[1] != id_labels.shape[1]:
        raise ZooError(
            f"candidate and ID label embeddings must be (C, D) and (K, D) with one D, got {candidates.shape} "
            f"and {id_labels.shape}"
        )
    if not (np.isfinite(candidates).all() and np.isfinite(id_labels).all()):
        raise ZooError("label embeddings hold NaN or infinite values")
    c = candidates / np.linalg.norm(candidates, axis=1, keepdims=True)
    k = id_labels / np.linalg.norm(id_labels, axis=1, keepdims=True)
    sims = c @ k.T
    scores = np.percentile(sims, percentile, axis=1)
    return np.where(sims.max(axis=1) > 0.95, 1.0, scores)


def mine_negatives(candidates: np.ndarray, id_labels: np.ndarray, fraction: float) -> np.ndarray:
    """Indices of the ``fraction`` of candidates least similar to the ID labels (ascending score, stable)."""
    if not 0 < fraction <= 1:
        raise ZooError(f"fraction must be in (0, 1], got {fraction}")
    if len(candidates) == 0:
        raise ZooError("no candidate labels to mine negatives from")
    scores = candidate_scores(candidates, id_labels)
    keep = max(1, int(round(fraction * len(candidates))))
    return np.sort(np.argsort(scores, kind="stable")[:keep])


def mine_bank(
    nouns: np.ndarray,
    adjectives: np.ndarray,
    id_labels: np.ndarray,
    noun_fraction: float = 0.15,
    adjective_fraction: float = 0.10,
) -> tuple[np.ndarray, np.ndarray]:
    """The negative bank: the mined nouns' and adjectives' indices (into ``nouns`` and ``adjectives``)."""
    noun_index = mine_negatives(nouns, id_labels, noun_fraction)
    adjective_index = mine_negatives(adjectives, id_labels, adjective_fraction) if len(adjectives) else np.zeros(0, int)
    return noun_index, adjective_index


def contaminate(
    bank: np.ndarray, pool: np.ndarray, fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Replace ``fraction`` of the bank's rows by rows drawn from ``pool`` (near-ID outlier negatives).

    Returns the contaminated bank and the indices of the replaced rows.
    """
    bank = np.array(bank, copy=True)
    count = int(round(fraction * len(bank)))
    if count == 0:
        return bank, np.zeros(0, dtype=np.int64)
    if len(pool) == 0:
        raise ZooError("the contamination pool is empty")
    rows = rng.choice(len(bank), size=count, replace=False)
    bank[rows] = pool[rng.choice(len(pool), size=count, replace=count > len(pool))]
    return bank, np.sort(rows)
