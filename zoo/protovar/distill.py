"""Prototypes, the pool selector and the real-image baselines of ProtoVAR (plain torch / numpy / sklearn).

* Multi-scale class prototypes: for class c and injected scale k, k-means (sklearn ``KMeans``, m = IPC centres) on
  the flattened cumulative maps f_hat_<=k (k x k x D) of the class's training images; sample i of class c follows
  prototype i mod m.
* Pool selector: keep the candidates whose teacher confidence p(c | x) is at least the floor, then pick IPC of
  them by greedy k-center (farthest-point) selection in the teacher's penultimate feature space, seeded with the
  most confident candidate. When fewer than IPC pass the floor, the most confident of the rest fill the set.
* Herding baseline: the real image nearest each k-means centre (m = IPC) of the class's teacher features.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from zoo._errors import ZooError


def check_ipc(ipc: int, pool: int) -> None:
    """IPC must be at least 1 and at most the pool size."""
    if not isinstance(ipc, int | np.integer) or ipc < 1 or ipc > pool:
        raise ZooError(f"ipc={ipc} must be an integer between 1 and the pool size {pool}")


def check_class(class_id: int, num_classes: int = 10) -> None:
    if not 0 <= int(class_id) < num_classes:
        raise ZooError(f"class id {class_id} is out of range 0..{num_classes - 1}")


def kmeans_centres(vectors: np.ndarray, m: int, seed: int) -> np.ndarray:
    """sklearn KMeans with m centres (n_init 3); [m, dim] float32."""
    from sklearn.cluster import KMeans

    check_ipc(m, len(vectors))
    return KMeans(m, n_init=3, random_state=seed).fit(vectors).cluster_centers_.astype(np.float32)


@torch.no_grad()
def class_prototypes(tokenizer, images, labels, ipc: int, injected: int, seed: int = 0, per_class: int | None = None):
    """Prototype maps P[c][s] of shape [m, k, k, D] for each class c and injected scale index s < ``injected``.

    Args:
        tokenizer: The trained tokenizer.
        images: uint8 [N, 28, 28] training images.
        labels: [N].
        ipc: m, the centres per class.
        injected: How many of the coarsest scales get prototypes (3: scales 1, 2, 4).
        seed: KMeans seed.
        per_class: Use at most this many images per class (None: all).

    Returns:
        tensor [C, S, ...] is ragged over scales, so a list over scales of tensors [C, m, k, k, D].
    """
    from zoo.protovar.tokenizer import to_model_range

    labels = np.asarray(labels)
    classes = int(labels.max()) + 1
    out = [[] for _ in range(injected)]
    for c in range(classes):
        chosen = np.flatnonzero(labels == c)[:per_class]
        codes = []
        for start in range(0, len(chosen), 1000):
            codes.append(tokenizer.encode(to_model_range(torch.from_numpy(images[chosen[start : start + 1000]]))))
        codes = [torch.cat([c_[s] for c_ in codes]) for s in range(len(tokenizer.scales))]
        for s in range(injected):
            k = tokenizer.scales[s]
            flat = tokenizer.cumulative_maps(codes, s).numpy()
            centres = kmeans_centres(flat, ipc, seed)
            out[s].append(torch.from_numpy(centres).reshape(ipc, k, k, -1))
    return [torch.stack(scale) for scale in out]


def prototype_maps(prototypes: Sequence[torch.Tensor], class_ids: torch.Tensor, index: torch.Tensor):
    """Per-sample maps: sample (c, i) gets P[c][s][i mod m] at every injected scale s."""
    return [scale[class_ids, index % scale.shape[1]] for scale in prototypes]


def greedy_k_center(features: np.ndarray, k: int, first: int) -> list[int]:
    """Farthest-point selection of k rows (Euclidean), starting at row ``first``."""
    features = np.asarray(features, dtype=np.float64)
    check_ipc(k, len(features))
    chosen = [int(first)]
    distance = np.linalg.norm(features - features[first], axis=1)
    while len(chosen) < k:
        nxt = int(np.argmax(distance))
        chosen.append(nxt)
        distance = np.minimum(distance, np.linalg.norm(features - features[nxt], axis=1))
    return chosen


def k_center_cost(features: np.ndarray, chosen: Sequence[int]) -> float:
    """max over rows of the distance to the nearest chosen row (what k-center minimises)."""
    features = np.asarray(features, dtype=np.float64)
    distance = np.linalg.norm(features[:, None] - features[list(chosen)][None], axis=2)
    return float(distance.min(1).max())


def select(confidence: np.ndarray, features: np.ndarray, ipc: int, floor: float) -> list[int]:
    """The pool selector for one class: confidence floor, then greedy k-center seeded at the most confident.

    Args:
        confidence: [P] teacher p(c | x) of the class's candidates.
        features: [P, F] teacher penultimate features.
        ipc: Images to keep.
        floor: Confidence floor.

    Returns:
        Indices into the pool, ``ipc`` of them.
    """
    confidence = np.asarray(confidence)
    check_ipc(ipc, len(confidence))
    order = np.argsort(-confidence, kind="stable")
    passed = order[confidence[order] >= floor]
    if len(passed) < ipc:  # too few confident candidates: the most confident ones, in order
        return [int(i) for i in order[:ipc]]
    picked = greedy_k_center(np.asarray(features)[passed], ipc, first=0)  # passed[0] is the most confident
    return [int(passed[i]) for i in picked]


def herding(features: np.ndarray, ipc: int, seed: int) -> list[int]:
    """The real image nearest each of ``ipc`` k-means centres (distinct images)."""
    centres = kmeans_centres(np.asarray(features, dtype=np.float32), ipc, seed)
    chosen: list[int] = []
    for centre in centres:
        distance = np.linalg.norm(features - centre, axis=1)
        distance[chosen] = np.inf
        chosen.append(int(np.argmin(distance)))
    return chosen
