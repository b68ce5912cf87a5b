"""The regularised Fisher (LDA) direction of APORIA, with biased class covariances.

    S_c = (1 / n_c) sum_i (x_i - mu_c)(x_i - mu_c)^T          (c in {G, H}; biased, divide by n_c)
    S_W = S_G + S_H
    v   = (S_W + lambda * tr(S_W) / d * I)^-1 (mu_H - mu_G),   v / ||v||

With few labelled points in high dimension (L << d) S_W has rank < L, and the solve runs in the
L-dimensional span of the centred points (Woodbury identity), which is exact and costs O(d L^2).
"""

from __future__ import annotations

import numpy as np

DEFAULT_REG = 1.2


def biased_covariance(x: np.ndarray) -> np.ndarray:
    """Covariance of the rows of ``x`` divided by n (``np.cov(x, rowvar=False, bias=True)``)."""
    centred = x - x.mean(0)
    return centred.T @ centred / len(x)


def fisher_direction(x_genuine: np.ndarray, x_hallucinated: np.ndarray, reg: float = DEFAULT_REG) -> np.ndarray:
    """Unit Fisher direction pointing from the genuine towards the hallucinated class.

    Args:
        x_genuine: ``(n_G, d)`` labelled genuine embeddings.
        x_hallucinated: ``(n_H, d)`` labelled hallucinated embeddings.
        reg: lambda, the ridge as a multiple of the mean eigenvalue ``tr(S_W) / d`` (the paper uses 1.2).

    Returns:
        ``(d,)`` unit vector ``v``; project with ``x @ v``.

    Raises:
        ValueError: On an empty class, mismatched widths or a negative ``reg``.
    """
    x_genuine = np.asarray(x_genuine, dtype=np.float64)
    x_hallucinated = np.asarray(x_hallucinated, dtype=np.float64)
    if x_genuine.ndim != 2 or x_hallucinated.ndim != 2 or x_genuine.shape[1] != x_hallucinated.shape[1]:
        raise ValueError(
            f"expected two (n, d) arrays of the same width, got {x_genuine.shape} and {x_hallucinated.shape}"
        )
    if len(x_genuine) == 0 or len(x_hallucinated) == 0:
        raise ValueError("the Fisher direction needs at least one labelled response of each class (G and H)")
    if reg < 0:
        raise ValueError(f"reg={reg} must be >= 0")
    d = x_genuine.shape[1]
    mean_gap = x_hallucinated.mean(0) - x_genuine.mean(0)
    # S_W = U U^T with U the centred points scaled by 1/sqrt(n_c): never form the d x d matrix when L < d.
    u = np.concatenate(
        [
            (x_genuine - x_genuine.mean(0)) / np.sqrt(len(x_genuine)),
            (x_hallucinated - x_hallucinated.mean(0)) / np.sqrt(len(x_hallucinated)),
        ]
    ).T  # (d, L)
    ridge = reg * float((u * u).sum()) / d  # lambda * tr(S_W) / d
    if ridge > 0 and u.shape[1] < d:
        small = ridge * np.eye(u.shape[1]) + u.T @ u
        v = (mean_gap - u @ np.linalg.solve(small, u.T @ mean_gap)) / ridge
    else:
        scatter = u @ u.T + ridge * np.eye(d)
        v = np.linalg.lstsq(scatter, mean_gap, rcond=None)[0]
    norm = np.linalg.norm(v)
    if norm == 0 or not np.isfinite(norm):
        return np.zeros(d)
    return v / norm
