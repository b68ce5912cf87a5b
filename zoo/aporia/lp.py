"""APORIA-LP: classify responses by comparing distance distributions in the Fisher projection.

For each class c in {G, H} the labelled projections Z_c and the reference distribution
R_c = {|z_i - z_j| : i < j in Z_c} are stored. An unlabelled projection z has the distance sample
D_c(z) = {|z - z_i| : z_i in Z_c}, and W_c = W1(D_c(z), R_c). The prediction is H iff W_H < W_G:
the point sits among the hallucinated labelled points the way they sit among each other.

The 1-D Wasserstein distances for many points are computed at once with sorted-array algebra
(:func:`wasserstein_1d`), and agree with ``scipy.stats.wasserstein_distance``.
"""

from __future__ import annotations

import numpy as np

from zoo.aporia.fisher import DEFAULT_REG, fisher_direction

GENUINE, HALLUCINATED = 0, 1


def wasserstein_1d(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """W1 between empirical distributions (equal weights), batched over leading dimensions.

    W1 = integral |F_u(t) - F_v(t)| dt. Sorting the pooled values with signed weights (+1/a for u,
    -1/b for v) makes the running sum of weights equal F_u - F_v between consecutive values.

    Args:
        u: ``(..., a)`` samples.
        v: ``(..., b)`` samples; leading dimensions broadcast against ``u``'s.

    Returns:
        ``(...)`` distances.
    """
    u = np.asarray(u, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    if u.shape[-1] == 0 or v.shape[-1] == 0:
        raise ValueError("the Wasserstein distance needs at least one value in each sample")
    lead = np.broadcast_shapes(u.shape[:-1], v.shape[:-1])
    u = np.broadcast_to(u, (*lead, u.shape[-1]))
    v = np.broadcast_to(v, (*lead, v.shape[-1]))
    values = np.concatenate([u, v], axis=-1)
    weights = np.concatenate([np.full(u.shape[-1], 1.0 / u.shape[-1]), np.full(v.shape[-1], -1.0 / v.shape[-1])])
    order = np.argsort(values, axis=-1, kind="stable")
    sorted_values = np.take_along_axis(values, order, axis=-1)
    cdf_gap = np.cumsum(weights[order], axis=-1)[..., :-1]
    return np.sum(np.abs(cdf_gap) * np.diff(sorted_values, axis=-1), axis=-1)


def pairwise_gaps(z: np.ndarray) -> np.ndarray:
    """All |z_i - z_j| for i < j (the reference distribution R of one class); ``[0]`` for a single point."""
    z = np.asarray(z, dtype=np.float64)
    if len(z) < 2:
        return np.zeros(1)
    i, j = np.triu_indices(len(z), k=1)
    return np.abs(z[i] - z[j])


def lp_scores(z: np.ndarray, z_genuine: np.ndarray, z_hallucinated: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(W_G, W_H) of every projection in ``z`` against the labelled projections of each class.

    Args:
        z: ``(n,)`` projections to classify.
        z_genuine: Labelled genuine projections.
        z_hallucinated: Labelled hallucinated projections.
    """
    z = np.asarray(z, dtype=np.float64)
    scores = []
    for labelled in (np.asarray(z_genuine, dtype=np.float64), np.asarray(z_hallucinated, dtype=np.float64)):
        distances = np.abs(z[:, None] - labelled[None, :])  # D_c(z), one row per point
        scores.append(wasserstein_1d(distances, pairwise_gaps(labelled)[None, :]))
    return scores[0], scores[1]


def lp_predict(z: np.ndarray, z_genuine: np.ndarray, z_hallucinated: np.ndarray) -> np.ndarray:
    """The APORIA-LP rule: 1 (hallucinated) iff W_H < W_G, else 0 (genuine)."""
    w_genuine, w_hallucinated = lp_scores(z, z_genuine, z_hallucinated)
    return (w_hallucinated < w_genuine).astype(np.int64)


class AporiaLP:
    """Fisher projection + Wasserstein label rule, fitted on the labelled responses of one (model, prompt) pair.

    Args:
        reg: lambda of the regularised Fisher direction (paper: 1.2).
        self_training_rounds: Rounds of the (reconstructed) propagation loop; 0 = the single-pass rule.
        per_round: Most confident pool points added per predicted class and round.

    Example:
        >>> lp = AporiaLP().fit(x_labelled, y_labelled)          # doctest: +SKIP
        >>> lp.predict(x_new)                                     # doctest: +SKIP
    """

    def __init__(self, reg: float = DEFAULT_REG, self_training_rounds: int = 0, per_round: int = 5) -> None:
        self.reg = reg
        self.self_training_rounds = self_training_rounds
        self.per_round = per_round
        self.direction: np.ndarray | None = None
        self.z_genuine: np.ndarray | None = None
        self.z_hallucinated: np.ndarray | None = None

    def fit(self, x: np.ndarray, y: np.ndarray, pool: np.ndarray | None = None) -> AporiaLP:
        """Fit v, Z_G and Z_H on labelled embeddings (and, with self-training, on pseudo-labelled pool points).

        Args:
            x: ``(L, d)`` labelled embeddings.
            y: ``(L,)`` labels, 0 = genuine, 1 = hallucinated.
            pool: ``(m, d)`` unlabelled embeddings the self-training loop may pseudo-label (never test points).

        Raises:
            ValueError: If a class has no labelled response or shapes disagree.
        """
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y).astype(np.int64)
        if len(x) != len(y):
            raise ValueError(f"{len(x)} embeddings but {len(y)} labels")
        if not (np.any(y == GENUINE) and np.any(y == HALLUCINATED)):
            raise ValueError("APORIA-LP needs labelled responses of both classes (0 = genuine, 1 = hallucinated)")
        self._fit_once(x, y)
        if self.self_training_rounds and pool is not None and len(pool):
            pool = np.asarray(pool, dtype=np.float64)
            remaining = np.ones(len(pool), dtype=bool)
            for _ in range(self.self_training_rounds):
                if not remaining.any():
                    break
                w_genuine, w_hallucinated = self.scores(pool)
                margin = np.abs(w_genuine - w_hallucinated)
                guess = (w_hallucinated < w_genuine).astype(np.int64)
                chosen = []
                for label in (GENUINE, HALLUCINATED):
                    candidates = np.flatnonzero(remaining & (guess == label))
                    chosen += candidates[np.argsort(-margin[candidates])[: self.per_round]].tolist()
                remaining[chosen] = False
                x = np.concatenate([x, pool[chosen]])
                y = np.concatenate([y, guess[chosen]])
                self._fit_once(x, y)
        return self

    def _fit_once(self, x: np.ndarray, y: np.ndarray) -> None:
        self.direction = fisher_direction(x[y == GENUINE], x[y == HALLUCINATED], reg=self.reg)
        z = x @ self.direction
        self.z_genuine, self.z_hallucinated = z[y == GENUINE], z[y == HALLUCINATED]

    def project(self, x: np.ndarray) -> np.ndarray:
        """Fisher projections ``x @ v``."""
        if self.direction is None:
            raise ValueError("AporiaLP is not fitted; call fit(x_labelled, y_labelled) first")
        return np.asarray(x, dtype=np.float64) @ self.direction

    def scores(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(W_G, W_H) of each embedding in ``x``."""
        return lp_scores(self.project(x), self.z_genuine, self.z_hallucinated)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """1 (hallucinated) or 0 (genuine) for each embedding in ``x``."""
        w_genuine, w_hallucinated = self.scores(x)
        return (w_hallucinated < w_genuine).astype(np.int64)

    def predict_centroid(self, x: np.ndarray) -> np.ndarray:
        """The ablation without Wasserstein: the nearer projected class mean (threshold at their midpoint)."""
        z = self.project(x)
        return (np.abs(z - self.z_hallucinated.mean()) < np.abs(z - self.z_genuine.mean())).astype(np.int64)
