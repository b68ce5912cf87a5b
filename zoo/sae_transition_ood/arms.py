"""OOD scores of every arm from cached features: the method, its ablations and the black-box baselines.

All functions take a :class:`~.features.Features` cache and return one score per text (higher = more OOD).

* ``transition``: the depth-wise Markov NLL over SAE top-K sets (the method).
* ``single_layer``: the unigram NLL of one layer's SAE top-K features.
* ``multi_layer_unigram``: the unigram NLL averaged over every layer (no transitions).
* ``raw_transition``: the transition NLL over the top-K normalised hidden units (no SAE).
* ``transition_lr_other_id``: the transition NLL minus ``weight`` times the NLL under a background transition model
  counted on the other ID settings' train texts with the same SAEs (a likelihood ratio, issue 66).
* ``mahalanobis``: squared Mahalanobis distance of a pooled layer to the ID mean (sklearn ``LedoitWolf``).
* ``knn``: cosine distance to the k-th nearest ID train embedding (faiss, Sun et al. 2022).
* ``energy``: ``-logsumexp`` of a logistic regression on ID sub-labels (Liu et al. 2020's energy score).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from zoo.sae_transition_ood.detector import raw_top_indices
from zoo.sae_transition_ood.features import Features
from zoo.sae_transition_ood.sae import SAEStack
from zoo.sae_transition_ood.transitions import (
    text_scores,
    token_transition_nll,
    token_unigram_nll,
    transition_counts,
    transition_nll_table,
    unigram_counts,
    unigram_nll_table,
)

Group = tuple[str, str]  # (domain, split)
MIN_LABEL_TEXTS = 10


class SAEScorer:
    """Top-K SAE (and raw-unit) indices of the ID train texts and of the scored groups, computed once.

    Args:
        features: The cache.
        stack: Trained SAEs.
        id_domain: The ID setting (its train texts give the counts).
        groups: The (domain, split) groups to score.
        top_max: The largest K of the grid (smaller K are prefixes: indices are sorted by activation).
        raw_top_max: The largest K of the raw-unit grid.
        background: Groups whose SAE top-K sets give the background counts of :meth:`transition_ratio`.
    """

    def __init__(self, features: Features, stack: SAEStack, id_domain: str, groups: Sequence[Group], top_max: int,
                 raw_top_max: int, background: Sequence[Group] = ()) -> None:  # fmt: skip
        self.stack = stack
        self.groups = list(groups)
        everything = [(id_domain, "train"), *self.groups]
        self.indices, self.raw, self.offsets = {}, {}, {}
        mean, scale = stack.norm_mean.numpy(), stack.norm_scale.numpy()
        for group in everything:
            tokens, offsets = features.token_slice(*group)
            self.offsets[group] = offsets
            self.indices[group] = stack.top_indices(torch.from_numpy(np.asarray(tokens)), top_max)
            self.raw[group] = np.concatenate(
                [raw_top_indices(tokens[s : s + 8192], mean, scale, raw_top_max) for s in range(0, len(tokens), 8192)]
            )
        self.train = (id_domain, "train")
        self.background = list(background)
        for group in self.background:
            tokens, _ = features.token_slice(*group)
            self.indices[group] = stack.top_indices(torch.from_numpy(np.asarray(tokens)), top_max)
        self._counts: dict = {}

    def _transition_counts(self, raw: bool, top: int) -> np.ndarray:
        key = ("transition", raw, top)
        if key not in self._counts:
            source = self.raw if raw else self.indices
            width = self.stack.width if raw else self.stack.features
            self._counts[key] = transition_counts(source[self.train][:, :, :top], width)
        return self._counts[key]

    def _unigram_counts(self, top: int) -> np.ndarray:
        key = ("unigram", top)
        if key not in self._counts:
            self._counts[key] = unigram_counts(self.indices[self.train][:, :, :top], self.stack.features)
        return self._counts[key]

    def transition(self, top: int, alpha: float, raw: bool = False) -> dict[Group, np.ndarray]:
        table = transition_nll_table(self._transition_counts(raw, top), alpha)
        source = self.raw if raw else self.indices
        return {
            g: text_scores(token_transition_nll(source[g][:, :, :top], table), self.offsets[g]) for g in self.groups
        }

    def transition_ratio(self, top: int, alpha: float, weight: float) -> dict[Group, np.ndarray]:
        """``NLL_ID - weight * NLL_background`` per text: both transition models share the SAEs, ``top`` and ``alpha``.

        The background model is counted on the ``background`` groups given at construction.
        """
        if not self.background:
            raise ValueError("transition_ratio needs background groups (SAEScorer(..., background=...))")
        if not weight >= 0:
            raise ValueError(f"weight must be >= 0, got {weight}")
        key = ("background", top)
        if key not in self._counts:
            counts = None
            for group in self.background:
                counts = transition_counts(self.indices[group][:, :, :top], self.stack.features, counts)
            self._counts[key] = counts
        table = transition_nll_table(self._transition_counts(False, top), alpha)
        background = transition_nll_table(self._counts[key], alpha)
        out = {}
        for g in self.groups:
            indices = self.indices[g][:, :, :top]
            nll = token_transition_nll(indices, table) - weight * token_transition_nll(indices, background)
            out[g] = text_scores(nll, self.offsets[g])
        return out

    def transition_from_counts(self, counts: np.ndarray, top: int, alpha: float) -> dict[Group, np.ndarray]:
        table = transition_nll_table(counts.astype(np.float64), alpha)
        return {
            g: text_scores(token_transition_nll(self.indices[g][:, :, :top], table), self.offsets[g])
            for g in self.groups
        }

    def unigram(self, top: int, alpha: float, layers: Sequence[int] | None = None) -> dict[Group, np.ndarray]:
        table = unigram_nll_table(self._unigram_counts(top), alpha)
        return {
            g: text_scores(token_unigram_nll(self.indices[g][:, :, :top], table, layers), self.offsets[g])
            for g in self.groups
        }


def _pooled(features: Features, group: Group, layer: int, pool: str, normalise: bool) -> np.ndarray:
    source = features.mean_pool if pool == "mean" else features.max_pool
    x = np.asarray(source[features.texts(*group), layer], dtype=np.float64)
    if normalise:
        x = x / np.linalg.norm(x, axis=1, keepdims=True).clip(1e-12)
    return x


def mahalanobis(features: Features, id_domain: str, groups: Sequence[Group], layer: int, pool: str = "mean",
                normalise: bool = False) -> dict[Group, np.ndarray]:  # fmt: skip
    """Squared Mahalanobis distance to the ID train mean under the Ledoit-Wolf shrunk covariance."""
    from sklearn.covariance import LedoitWolf

    train = _pooled(features, (id_domain, "train"), layer, pool, normalise)
    estimator = LedoitWolf().fit(train)
    return {g: estimator.mahalanobis(_pooled(features, g, layer, pool, normalise)) for g in groups}


def knn(features: Features, id_domain: str, groups: Sequence[Group], layer: int, k: int) -> dict[Group, np.ndarray]:
    """Cosine distance to the k-th nearest ID train text (unit-norm mean-pooled states, exact faiss search)."""
    import faiss

    train = _pooled(features, (id_domain, "train"), layer, "mean", True).astype(np.float32)
    index = faiss.IndexFlatIP(train.shape[1])
    index.add(train)
    out = {}
    for g in groups:
        similarities, _ = index.search(_pooled(features, g, layer, "mean", True).astype(np.float32), k)
        out[g] = 1.0 - similarities[:, k - 1]
    return out


def energy(features: Features, id_domain: str, groups: Sequence[Group], layer: int, C: float,  # noqa: N803
           seed: int = 0) -> dict[Group, np.ndarray]:  # fmt: skip
    """``-logsumexp(logits)`` of a multinomial logistic regression on the ID train sub-labels."""
    from scipy.special import logsumexp
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    train = _pooled(features, (id_domain, "train"), layer, "mean", False)
    labels = features.labels[features.texts(id_domain, "train")].astype(object)
    names, counts = np.unique(labels, return_counts=True)
    rare = set(names[counts < MIN_LABEL_TEXTS])
    pooled = np.array(["(rare)" if label in rare else label for label in labels])  # sub-labels under 10 texts pooled
    labels = pooled if len(set(pooled)) > 1 else labels.astype(str)
    if len(set(labels)) < 2:
        raise ValueError(f"energy needs at least 2 sub-labels among {id_domain}'s train texts")
    scaler = StandardScaler().fit(train)
    model = LogisticRegression(C=C, max_iter=200, random_state=seed).fit(scaler.transform(train), labels)
    out = {}
    for g in groups:
        logits = model.decision_function(scaler.transform(_pooled(features, g, layer, "mean", False)))
        logits = logits[:, None] if logits.ndim == 1 else logits
        if logits.shape[1] == 1:  # binary: logits for both classes are (0, z)
            logits = np.c_[np.zeros(len(logits)), logits]
        out[g] = -logsumexp(logits, axis=1)
    return out
