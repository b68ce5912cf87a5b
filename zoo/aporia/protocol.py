"""The evaluation protocol: stratified splits, class-balanced label draws, and the arms fitted on them.

For every (model, prompt) pair: 5 stratified folds (20% test each); in each fold 10 random label
draws; for each draw nested class-balanced label budgets. Every arm sees exactly the same labelled
points and is scored on the same test points by F1 with hallucinated as the positive class. Test
labels are used only for scoring.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from zoo.aporia.lp import AporiaLP

SUPERVISED_ARMS = ("aporia_lp", "aporia_lp_self_training", "centroid", "logreg", "knn", "label_spreading")
UNSUPERVISED_ARMS = ("self_consistency",)
ARMS = SUPERVISED_ARMS + UNSUPERVISED_ARMS


@dataclass
class ProtocolConfig:
    """Settings of the protocol.

    Args:
        budgets: Total label budgets L (class-balanced: L/2 per class, the other class fills a shortfall).
        splits: Stratified folds (test fraction 1/splits).
        draws: Random label draws per fold.
        reg: lambda of the Fisher direction.
        self_training_rounds: Rounds of the self-training variant.
        knn_k: Neighbours of the kNN baseline.
        logreg_c: Inverse L2 strength of the logistic-regression baseline.
        spreading_gamma: RBF width of the label-spreading baseline.
        consistency_threshold: Cosine to the medoid below which the unsupervised baseline says H.
        seed: Seed of the folds and draws.
    """

    budgets: tuple[int, ...] = (10, 20, 30, 40, 50)
    splits: int = 5
    draws: int = 10
    reg: float = 1.2
    self_training_rounds: int = 3
    knn_k: int = 3
    logreg_c: float = 1.0
    spreading_gamma: float = 20.0
    consistency_threshold: float = 0.8
    seed: int = 0


def stratified_folds(labels: np.ndarray, splits: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``splits`` stratified (train, test) index pairs whose test parts partition the responses."""
    from sklearn.model_selection import StratifiedKFold

    folds = StratifiedKFold(n_splits=splits, shuffle=True, random_state=seed)
    return list(folds.split(np.zeros(len(labels)), labels))


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


def f1_hallucinated(truth: np.ndarray, predicted: np.ndarray) -> float:
    """F1 with hallucinated (1) as the positive class; 0 when there are no positives at all."""
    tp = float(np.sum((truth == 1) & (predicted == 1)))
    wrong = float(np.sum(truth != predicted))
    return 2 * tp / (2 * tp + wrong) if tp + wrong > 0 else 0.0


def knn_predict(x_labelled: np.ndarray, y_labelled: np.ndarray, x: np.ndarray, k: int) -> np.ndarray:
    """Majority vote of the ``k`` most cosine-similar labelled embeddings (ties go to the nearest)."""
    similarity = _unit(x) @ _unit(x_labelled).T
    k = min(k, len(y_labelled))
    nearest = np.argsort(-similarity, axis=1, kind="stable")[:, :k]
    votes = y_labelled[nearest].mean(1)
    return np.where(votes == 0.5, y_labelled[nearest[:, 0]], votes > 0.5).astype(np.int64)


def self_consistency_predict(x: np.ndarray, threshold: float) -> np.ndarray:
    """Unsupervised baseline: H iff the cosine to the medoid of the densest cluster is below ``threshold``.

    The medoid is the response with the most neighbours within ``threshold`` (ties: largest summed cosine).
    """
    similarity = _unit(x) @ _unit(x).T
    density = (similarity >= threshold).sum(1) + similarity.mean(1) / 2  # the fraction breaks ties only
    medoid = int(np.argmax(density))
    return (similarity[:, medoid] < threshold).astype(np.int64)


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def evaluate_pair(
    x: np.ndarray, y: np.ndarray, config: ProtocolConfig, pair_seed: int, arms: Sequence[str] = ARMS
) -> dict[str, np.ndarray]:
    """F1 of every arm on one pair, as ``(splits, draws, budgets)`` arrays.

    Args:
        x: ``(n, d)`` response embeddings of the pair.
        y: ``(n,)`` labels, 1 = hallucinated.
        config: Protocol settings.
        pair_seed: Seed of this pair's folds and draws (the same for every arm).
        arms: Arms to run (a subset of :data:`ARMS`).
    """
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        raise ValueError(f"unknown arms {unknown}; choose from {', '.join(ARMS)}")
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y).astype(np.int64)
    shape = (config.splits, config.draws, len(config.budgets))
    f1 = {arm: np.zeros(shape) for arm in arms}
    rng = np.random.default_rng(pair_seed)
    for s, (train, test) in enumerate(stratified_folds(y, config.splits, seed=pair_seed)):
        if "self_consistency" in f1:
            f1["self_consistency"][s] = f1_hallucinated(
                y[test], self_consistency_predict(x[test], config.consistency_threshold)
            )
        for r in range(config.draws):
            for b, chosen in enumerate(balanced_labels(y[train], config.budgets, rng)):
                labelled = train[chosen]
                pool = np.setdiff1d(train, labelled)
                for arm, predicted in _supervised_predictions(x, y, labelled, pool, test, config, arms).items():
                    f1[arm][s, r, b] = f1_hallucinated(y[test], predicted)
    return f1


def _supervised_predictions(
    x: np.ndarray,
    y: np.ndarray,
    labelled: np.ndarray,
    pool: np.ndarray,
    test: np.ndarray,
    config: ProtocolConfig,
    arms: Sequence[str],
) -> dict[str, np.ndarray]:
    x_lab, y_lab, x_test = x[labelled], y[labelled], x[test]
    out: dict[str, np.ndarray] = {}
    if {"aporia_lp", "centroid"} & set(arms):
        lp = AporiaLP(reg=config.reg).fit(x_lab, y_lab)
        if "aporia_lp" in arms:
            out["aporia_lp"] = lp.predict(x_test)
        if "centroid" in arms:
            out["centroid"] = lp.predict_centroid(x_test)
    if "aporia_lp_self_training" in arms:
        lp = AporiaLP(reg=config.reg, self_training_rounds=config.self_training_rounds)
        out["aporia_lp_self_training"] = lp.fit(x_lab, y_lab, pool=x[pool]).predict(x_test)
    if "logreg" in arms:
        out["logreg"] = _logreg(config.logreg_c)(x_lab, y_lab, x_test)
    if "knn" in arms:
        out["knn"] = knn_predict(x_lab, y_lab, x_test, config.knn_k)
    if "label_spreading" in arms:
        out["label_spreading"] = _label_spreading(x, y, labelled, test, config.spreading_gamma)
    return out


def _logreg(c: float) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    def predict(x_lab: np.ndarray, y_lab: np.ndarray, x_test: np.ndarray) -> np.ndarray:
        weights, bias = logistic_regression(x_lab, y_lab, c=c)
        return (np.asarray(x_test, dtype=np.float64) @ weights + bias > 0).astype(np.int64)

    return predict


def logistic_regression(
    x: np.ndarray, y: np.ndarray, c: float = 1.0, max_iter: int = 100, tol: float = 1e-10
) -> tuple[np.ndarray, float]:
    """L2-regularised logistic regression (sklearn's objective, unpenalised intercept) by Newton's method.

    Minimises ``0.5 ||w||^2 + c * sum_i log(1 + exp(-s_i (x_i . w + b)))`` with ``s = 2y - 1``. With
    L labelled points in d > L dimensions the optimal ``w`` lies in the row space of ``x`` (representer
    theorem), so the solve runs in an orthonormal basis of that row space: a few Newton steps on an
    (L + 1)-dimensional problem instead of lbfgs in d dimensions: the same optimum (sklearn's at a tight
    tolerance), about 4x faster than ``sklearn.linear_model.LogisticRegression`` on 40-label fits in 384-d
    (``benchmarks/aporia_lp_speed.py``).

    Args:
        x: ``(L, d)`` labelled embeddings.
        y: ``(L,)`` labels in {0, 1}.
        c: Inverse regularisation strength (sklearn's ``C``).
        max_iter: Newton iterations at most.
        tol: Stop when the largest step component is below this.

    Returns:
        ``(w, b)``: predict 1 iff ``x @ w + b > 0``.
    """
    x = np.asarray(x, dtype=np.float64)
    sign = 2.0 * np.asarray(y, dtype=np.float64) - 1.0
    # Orthonormal basis of the row space from the small Gram matrix: x x^T = Q diag(e) Q^T, basis = diag(e)^-1/2 Q^T x
    eigenvalues, eigenvectors = np.linalg.eigh(x @ x.T)
    keep = eigenvalues > 1e-10 * max(float(eigenvalues.max()), 1e-300)
    basis = (eigenvectors[:, keep] / np.sqrt(eigenvalues[keep])).T @ x
    design = np.hstack([eigenvectors[:, keep] * np.sqrt(eigenvalues[keep]), np.ones((len(x), 1))])  # = x @ basis.T
    penalty = np.r_[np.ones(len(basis)), 0.0]  # the intercept is not penalised

    def objective(beta: np.ndarray) -> float:
        return 0.5 * float(penalty @ beta**2) + c * float(np.logaddexp(0.0, -sign * (design @ beta)).sum())

    beta = np.zeros(design.shape[1])
    current = objective(beta)
    for _ in range(max_iter):
        wrong = 1.0 / (1.0 + np.exp(sign * (design @ beta)))  # sigma(-margin)
        gradient = penalty * beta - c * design.T @ (sign * wrong)
        hessian = c * (design.T * (wrong * (1.0 - wrong))) @ design + np.diag(penalty + 1e-12)
        step = np.linalg.solve(hessian, gradient)
        scale = 1.0
        while scale > 1e-4 and objective(beta - scale * step) > current:  # backtracking keeps it monotone
            scale /= 2
        beta = beta - scale * step
        current = objective(beta)
        if np.max(np.abs(scale * step)) < tol:
            break
    return basis.T @ beta[:-1], float(beta[-1])


def _label_spreading(x: np.ndarray, y: np.ndarray, labelled: np.ndarray, test: np.ndarray, gamma: float) -> np.ndarray:
    """sklearn LabelSpreading (RBF) over the pair's responses; only the labelled points carry labels."""
    from sklearn.semi_supervised import LabelSpreading

    partial = np.full(len(y), -1)
    partial[labelled] = y[labelled]
    model = LabelSpreading(kernel="rbf", gamma=gamma, max_iter=100).fit(x, partial)
    return model.transduction_[test].astype(np.int64)
