"""Zero-shot OOD scores from image and label embeddings of any vision-language model (plain numpy).

Every score is "higher = more in-distribution" and takes the cosine similarities of each image to the K ID
labels (``s_id``, ``(N, K)``) and to the M negative labels (``s_neg``, ``(N, M)``); :func:`similarities`
computes them from embeddings, and :class:`ZeroShotOODScorer` wraps a label set and a score so real CLIP
features drop in unchanged.

* :func:`mcm_score`: maximum softmax of the ID similarities over tau (MCM).
* :func:`neglabel_score`: NegLabel's grouped form: the negatives split into groups, per group the softmax ID mass
  over [ID, group] / tau, averaged over the groups.
* :func:`kl_energy_score`: the ungrouped form, ``logsumexp_ID(s/tau) - logsumexp_all(s/tau)`` (= the log of
  the softmax ID mass): the KL-constrained worst case.
* :func:`renyi_score`: the Renyi (Cressie-Read) form, ``S = logsumexp_ID((s - beta)/tau) - eta *
  (mean_j ((s_j - beta)_+ / tau)^r*)^(1/r*)``, j over all K+M labels, ``r* = r/(r-1)``, beta per image from
  :func:`solve_beta` (fixed-step gradient descent from beta0, as the authors' code, or bisection on the monotone
  derivative), vectorised over the batch.

Power means with r* up to hundreds are computed relative to the row maximum, in float64, so they neither
overflow nor underflow.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zoo._errors import ZooError

METHODS = ("mcm", "neglabel", "kl_energy", "renyi")


# ----------------------------------------------------------------------------------------------- checks


def check_tau(tau: float) -> None:
    if not np.isfinite(tau) or tau <= 0:
        raise ZooError(f"tau must be a positive temperature, got {tau}")


def check_order(r: float) -> None:
    if not np.isfinite(r) or r <= 1:
        raise ZooError(f"the Renyi order r must be > 1 (r* = r/(r-1) is the power of the penalty), got {r}")


def _as_matrix(x, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ZooError(f"{name} must be a 2-D array (rows = images or labels), got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ZooError(f"{name} holds NaN or infinite values ({int((~np.isfinite(x)).sum())} entries)")
    return x


def _pair(s_id, s_neg, need_negatives: bool) -> tuple[np.ndarray, np.ndarray]:
    s_id = _as_matrix(s_id, "ID similarities")
    if s_id.shape[1] == 0:
        raise ZooError("there are no ID labels: a zero-shot detector needs at least one")
    if s_neg is None:
        s_neg = np.zeros((len(s_id), 0))
    s_neg = _as_matrix(s_neg, "negative-label similarities")
    if len(s_neg) != len(s_id):
        raise ZooError(f"ID and negative similarities have {len(s_id)} and {len(s_neg)} rows (one per image)")
    if need_negatives and s_neg.shape[1] == 0:
        raise ZooError("the negative-label bank is empty: mine negatives first (zoo.renyi_neglabel_ood.mining)")
    return s_id, s_neg


def _normalise(x: np.ndarray, name: str) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ZooError(f"{name} has {int((norms == 0).sum())} all-zero rows; cosine similarity is undefined")
    return x / norms


def similarities(images, id_labels, neg_labels=None) -> tuple[np.ndarray, np.ndarray]:
    """Cosine similarities of images to the ID labels and to the negative labels.

    Args:
        images: Image embeddings ``(N, D)``.
        id_labels: ID label embeddings ``(K, D)`` in the same space.
        neg_labels: Negative label embeddings ``(M, D)`` (or None for none).

    Returns:
        ``(s_id (N, K), s_neg (N, M))`` float64.
    """
    images = _normalise(_as_matrix(images, "image features"), "image features")
    id_labels = _as_matrix(id_labels, "ID label embeddings")
    neg_labels = np.zeros((0, id_labels.shape[1])) if neg_labels is None else _as_matrix(neg_labels, "negatives")
    for name, labels in (("ID label embeddings", id_labels), ("negative label embeddings", neg_labels)):
        if labels.shape[1] != images.shape[1]:
            raise ZooError(
                f"{name} are {labels.shape[1]}-d but image features are {images.shape[1]}-d: "
                "both must live in one space (bridge one tower into the other first)"
            )
    s_id = images @ _normalise(id_labels, "ID label embeddings").T
    s_neg = images @ _normalise(neg_labels, "negative label embeddings").T if len(neg_labels) else s_id[:, :0]
    return s_id, s_neg


def _logsumexp(x: np.ndarray, axis: int = 1) -> np.ndarray:
    top = x.max(axis=axis, keepdims=True)
    return (top + np.log(np.exp(x - top).sum(axis=axis, keepdims=True))).squeeze(axis)


# ------------------------------------------------------------------------------------------- baselines


def mcm_score(s_id, tau: float = 0.01) -> np.ndarray:
    """MCM: the maximum of the softmax over the ID similarities / tau ``(N,)``."""
    check_tau(tau)
    s_id, _ = _pair(s_id, None, need_negatives=False)
    z = s_id / tau
    return np.exp(z.max(axis=1) - _logsumexp(z))


def kl_energy_score(s_id, s_neg, tau: float = 0.01) -> np.ndarray:
    """``logsumexp_ID(s/tau) - logsumexp_{ID and negatives}(s/tau)`` ``(N,)``: the log softmax ID mass."""
    check_tau(tau)
    s_id, s_neg = _pair(s_id, s_neg, need_negatives=True)
    return _logsumexp(s_id / tau) - _logsumexp(np.concatenate([s_id, s_neg], axis=1) / tau)


def group_index(num_negatives: int, groups: int, seed: int = 0) -> np.ndarray:
    """A random assignment of ``num_negatives`` labels to ``groups`` groups of near-equal size."""
    if groups < 1:
        raise ZooError(f"groups must be >= 1, got {groups}")
    groups = min(groups, num_negatives)
    order = np.random.default_rng(seed).permutation(num_negatives)
    index = np.empty(num_negatives, dtype=np.int64)
    index[order] = np.arange(num_negatives) % groups
    return index


def neglabel_score(s_id, s_neg, tau: float = 0.01, groups: int = 100, seed: int = 0, index=None) -> np.ndarray:
    """NegLabel (grouped): the mean over groups of the softmax ID mass over ``[s_id, s_group] / tau`` ``(N,)``.

    Args:
        s_id: ``(N, K)`` ID similarities.
        s_neg: ``(N, M)`` negative-label similarities.
        tau: Temperature.
        groups: Number of groups the negatives are shuffled into (1 = the ungrouped NegLabel).
        seed: Seed of the shuffle (ignored when ``index`` is given).
        index: Group of each negative ``(M,)``; :class:`ZeroShotOODScorer` derives it from the label vectors
            so that the score does not depend on the order the labels are given in.
    """
    check_tau(tau)
    s_id, s_neg = _pair(s_id, s_neg, need_negatives=True)
    index = group_index(s_neg.shape[1], groups, seed) if index is None else np.asarray(index)
    top = max(s_id.max(), s_neg.max()) / tau  # one shift for every group: the masses stay exact ratios
    id_mass = np.exp(s_id / tau - top).sum(axis=1)
    neg = np.exp(s_neg / tau - top)
    n_groups = int(index.max()) + 1
    group_mass = np.zeros((len(s_neg), n_groups))
    np.add.at(group_mass.T, index, neg.T)
    return (id_mass[:, None] / (id_mass[:, None] + group_mass)).mean(axis=1)


# ------------------------------------------------------------------------------------------- the Renyi score


def conjugate(r: float) -> float:
    """``r* = r / (r - 1)``, the power of the Renyi (Cressie-Read) penalty."""
    check_order(r)
    return r / (r - 1.0)


def _scaled_power_means(x: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For ``x >= 0`` rows: ``m = max``, ``a = mean((x/m)^p)`` and ``b = mean((x/m)^(p-1))`` (0 where m = 0)."""
    m = x.max(axis=1)
    safe = np.where(m > 0, m, 1.0)[:, None]
    u = x / safe
    with np.errstate(divide="ignore"):  # u = 0 gives log 0 = -inf and a power of exactly 0
        power = np.exp(np.asarray(p - 1.0, dtype=x.dtype) * np.log(u))  # u^(p-1): exp-log is ~8x faster than **
    b = power.mean(axis=1)
    a = (power * u).mean(axis=1)
    return m, a, b


def _excess(s, beta, tau: float) -> np.ndarray:
    s = np.asarray(s)
    s = s if s.dtype in (np.float32, np.float64) else s.astype(np.float64)
    return np.maximum(s - np.asarray(beta, dtype=s.dtype)[:, None], 0) / np.asarray(tau, dtype=s.dtype)


def _slope_and_curvature(s, beta, tau: float, r: float, eta: float) -> tuple[np.ndarray, np.ndarray]:
    """``F'(beta)`` and ``F''(beta) = eta (r*-1)/tau G^(1/r*-2) (G K - H^2) >= 0`` per row.

    With ``x = (s - beta)_+/tau``: ``G = mean x^r*``, ``H = mean x^(r*-1)``, ``K = mean x^(r*-2)`` (all taken
    relative to the row maximum m, which cancels in both expressions up to the factor 1/m in F'').
    """
    p = conjugate(r)
    x = _excess(s, beta, tau)
    m = x.max(axis=1)
    safe = np.where(m > 0, m, 1.0)[:, None]
    u = x / safe
    with np.errstate(divide="ignore", invalid="ignore"):
        k_power = np.where(u > 0, np.exp(np.asarray(p - 2.0, dtype=x.dtype) * np.log(u)), 0)
    k = k_power.mean(axis=1, dtype=np.float64)
    h_power = k_power * u
    h = h_power.mean(axis=1, dtype=np.float64)
    g = (h_power * u).mean(axis=1, dtype=np.float64)
    g = np.maximum(g, 1e-300)
    slope = np.where(m > 0, 1.0 - eta * g ** (1.0 / p - 1.0) * h, 1.0)
    curvature = eta * (p - 1.0) / tau * g ** (1.0 / p - 2.0) * np.maximum(g * k - h * h, 0.0)
    curvature = np.where(m > 0, curvature / np.where(m > 0, m, 1.0).astype(np.float64), 0.0)
    return slope, curvature


def penalty(s, beta, tau: float, r: float) -> np.ndarray:
    """``(mean_j ((s_j - beta)_+ / tau)^r*)^(1/r*)`` per row ``(N,)``; ``s (N, L)``, ``beta (N,)``."""
    p = conjugate(r)
    x = _excess(s, beta, tau)
    m, a, _ = _scaled_power_means(x, p)
    return m.astype(np.float64) * a.astype(np.float64) ** (1.0 / p)


def objective(s, beta, tau: float, r: float, eta: float) -> np.ndarray:
    """The dual objective ``F(beta) = beta + eta tau penalty`` per row, minimised over beta."""
    return np.asarray(beta, dtype=np.float64) + eta * tau * penalty(s, beta, tau, r)


def objective_slope(s, beta, tau: float, r: float, eta: float) -> np.ndarray:
    """``dF/dbeta = 1 - eta g^(1/r* - 1) mean(((s - beta)_+/tau)^(r* - 1))`` with ``g = mean(x^r*)``, per row.

    Written relative to the row maximum: ``g^(1/p-1) mean(x^(p-1)) = a^(1/p-1) b`` (the maxima cancel), so
    it is exact for any r*.
    """
    p = conjugate(r)
    x = _excess(s, beta, tau)
    m, a, b = _scaled_power_means(x, p)
    a, b = a.astype(np.float64), b.astype(np.float64)
    ratio = np.where(m > 0, np.maximum(a, 1e-300) ** (1.0 / p - 1.0) * b, 0.0)
    return 1.0 - eta * ratio


def solve_beta(
    s,
    tau: float,
    r: float,
    eta: float,
    beta0: float = -0.1,
    steps: int = 15,
    lr: float = 1e-2,
    solver: str = "descent",
    tol: float = 1e-7,
    dtype=np.float64,
) -> np.ndarray:
    """beta per image, vectorised over rows of ``s (N, L)`` (all K + M similarities).

    Args:
        s: Similarities to every label.
        tau, r, eta: The score's temperature, Renyi order and penalty weight.
        beta0: Starting point of the descent.
        steps: Descent steps (0 keeps beta = beta0).
        lr: Descent step size.
        solver: ``"descent"`` (the authors' fixed-step gradient descent), or the exact minimiser by
            ``"bisection"`` or ``"newton"`` (safeguarded: a Newton step when it stays inside the bracket, else
            bisection): F is convex, its slope is monotone, at least ``1 - eta`` and 1 above ``max s``. The exact
            solvers need ``eta > 1``; otherwise F decreases without bound as beta falls.
        tol: Bisection tolerance on beta.
        dtype: Precision of the power means (float32: about 4x faster, beta within ~1e-5 of float64's).
    """
    check_tau(tau)
    check_order(r)
    s = _as_matrix(s, "similarities").astype(dtype)
    if solver == "descent":
        beta = np.full(len(s), float(beta0))
        for _ in range(int(steps)):
            beta = beta - lr * objective_slope(s, beta, tau, r, eta)
        return beta
    if solver not in ("bisection", "newton"):
        raise ZooError(f"solver must be 'descent', 'newton' or 'bisection', got {solver!r}")
    if eta <= 1:
        raise ZooError(f"{solver} needs eta > 1 (F has no minimum for eta <= 1), got {eta}")
    hi = s.max(axis=1)  # slope = 1 > 0 there
    width = np.maximum(s.max(axis=1) - s.min(axis=1), 1e-3)
    lo = hi - width
    for _ in range(200):  # walk down until the slope is negative (it tends to 1 - eta < 0)
        negative = objective_slope(s, lo, tau, r, eta) < 0
        if negative.all():
            break
        lo = np.where(negative, lo, hi - 2 * (hi - lo))
    if solver == "newton":  # safeguarded Newton: a Newton step inside the bracket, else its midpoint
        beta = 0.5 * (lo + hi)
        for _ in range(100):
            slope, curvature = _slope_and_curvature(s, beta, tau, r, eta)
            positive = slope > 0
            hi, lo = np.where(positive, beta, hi), np.where(positive, lo, beta)
            with np.errstate(divide="ignore", invalid="ignore"):
                step = beta - slope / curvature
            inside = np.isfinite(step) & (step > lo) & (step < hi)
            new = np.where(inside, step, 0.5 * (lo + hi))
            done = np.abs(new - beta).max() < tol
            beta = new
            if done:
                break
        return beta
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        positive = objective_slope(s, mid, tau, r, eta) > 0
        hi, lo = np.where(positive, mid, hi), np.where(positive, lo, mid)
        if (hi - lo).max() < tol:
            break
    return 0.5 * (lo + hi)


def renyi_score(
    s_id,
    s_neg,
    tau: float = 0.01,
    r: float = 1.05,
    eta: float = 1.2,
    beta0: float = -0.1,
    steps: int = 15,
    lr: float = 1e-2,
    solver: str = "descent",
    return_beta: bool = False,
    dtype=np.float64,
):
    """The Renyi negative-label score ``(N,)`` (higher = more ID); see the module docstring.

    With ``eta = 0`` the negatives play no part and the bank may be empty.
    """
    check_tau(tau)
    check_order(r)
    s_id, s_neg = _pair(s_id, s_neg, need_negatives=eta != 0)
    s = np.concatenate([s_id, s_neg], axis=1)
    beta = solve_beta(s, tau, r, eta, beta0, steps, lr, solver, dtype=dtype)
    score = _logsumexp((s_id - beta[:, None]) / tau) - eta * penalty(s.astype(dtype), beta, tau, r)
    return (score, beta) if return_beta else score


# ---------------------------------------------------------------------------------------------- the API


@dataclass(frozen=True)
class ScoreConfig:
    """The settings of one score.

    Args:
        method: One of ``mcm``, ``neglabel``, ``kl_energy``, ``renyi``.
        tau: Temperature (all methods).
        groups: NegLabel's group count.
        r: Renyi order (> 1).
        eta: Renyi penalty weight (0 = no negative labels).
        beta0: Start of the beta descent.
        steps: Descent steps (0 = beta fixed at beta0).
        lr: Descent step size.
        solver: ``descent`` or ``bisection``.
        precision: ``float64`` or ``float32`` (the power means; float32 is about 4x faster).
    """

    method: str = "renyi"
    tau: float = 0.01
    groups: int = 100
    r: float = 1.05
    eta: float = 1.2
    beta0: float = -0.1
    steps: int = 15
    lr: float = 1e-2
    solver: str = "descent"
    precision: str = "float64"

    def __post_init__(self):
        if self.method not in METHODS:
            raise ZooError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        check_tau(self.tau)
        check_order(self.r)
        if self.groups < 1 or self.steps < 0 or self.lr < 0:
            raise ZooError("groups must be >= 1, steps >= 0 and lr >= 0")


def score(s_id, s_neg, config: ScoreConfig, group_of=None) -> np.ndarray:
    """The score ``config.method`` of similarities ``s_id (N, K)`` and ``s_neg (N, M)``."""
    c = config
    if c.method == "mcm":
        return mcm_score(s_id, c.tau)
    if c.method == "kl_energy":
        return kl_energy_score(s_id, s_neg, c.tau)
    if c.method == "neglabel":
        return neglabel_score(s_id, s_neg, c.tau, c.groups, index=group_of)
    dtype = np.float32 if c.precision == "float32" else np.float64
    return renyi_score(s_id, s_neg, c.tau, c.r, c.eta, c.beta0, c.steps, c.lr, c.solver, dtype=dtype)


def canonical_groups(neg_labels: np.ndarray, groups: int, seed: int = 0) -> np.ndarray:
    """Group of each negative label, a function of the label vectors only (not of their order)."""
    neg_labels = np.asarray(neg_labels, dtype=np.float64)
    if len(neg_labels) == 0:
        return np.zeros(0, dtype=np.int64)
    keys = np.round(neg_labels, 6)
    rank = np.lexsort(keys.T[::-1])  # a canonical order: lexicographic by vector
    canonical = group_index(len(neg_labels), groups, seed)
    index = np.empty(len(neg_labels), dtype=np.int64)
    index[rank] = canonical
    return index


class ZeroShotOODScorer:
    """A label set plus a score: ``scorer(image_embeddings) -> (N,)`` (higher = more in-distribution).

    Backbone-agnostic: any VLM's image and text embeddings in one space (CLIP's, or a bridged pair).

    Args:
        id_labels: ID label embeddings ``(K, D)``.
        neg_labels: Negative label embeddings ``(M, D)`` (may be empty for ``mcm`` and ``renyi`` with eta 0).
        config: The score and its settings.
        group_seed: Seed of NegLabel's grouping.
    """

    def __init__(self, id_labels, neg_labels, config: ScoreConfig | None = None, group_seed: int = 0):
        self.config = config or ScoreConfig()
        self.id_labels = _as_matrix(id_labels, "ID label embeddings")
        self.neg_labels = (
            np.zeros((0, self.id_labels.shape[1])) if neg_labels is None else _as_matrix(neg_labels, "negatives")
        )
        if self.neg_labels.shape[1] != self.id_labels.shape[1]:
            raise ZooError(
                f"ID labels are {self.id_labels.shape[1]}-d and negatives {self.neg_labels.shape[1]}-d; "
                "embed both with the same text tower"
            )
        needs = self.config.method in ("neglabel", "kl_energy") or (
            self.config.method == "renyi" and self.config.eta != 0
        )
        if needs and len(self.neg_labels) == 0:
            raise ZooError(f"{self.config.method} needs negative labels but the negative-label bank is empty")
        self.group_of = canonical_groups(self.neg_labels, self.config.groups, group_seed)

    def similarities(self, images) -> tuple[np.ndarray, np.ndarray]:
        return similarities(images, self.id_labels, self.neg_labels)

    def __call__(self, images) -> np.ndarray:
        s_id, s_neg = self.similarities(images)
        return score(s_id, s_neg, self.config, self.group_of)
