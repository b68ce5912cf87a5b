"""The evaluation protocol: stratified splits, class-balanced label draws, and the arms fitted on them.

For every (model, prompt) pair: 5 stratified folds (20% test each); in each fold 10 random label
draws; for each draw nested class-balanced label budgets. Every arm sees exactly the same labelled
points and is scored on the same test points by F1 with hallucinated as the positive class. Test
labels are used only for scoring.

Answer-grouped folds (``groups=`` the answer strings; ``zoo eval aporia``'s default since issue 18): every
copy of one answer string lies in one test part (:func:`zoo.aporia.folds.grouped_folds`), so no test answer is a
verbatim copy of a labelled one. With the stratified folds 40 labels cover the whole training part of a 50-answer
pair, and a test answer usually has a labelled twin: a per-pair classifier then only looks its string up
(tuned logistic regression 0.99 F1). Grouped, a test answer is a phrasing or a value the labels never
showed, which is the detection task (a verbatim repeat of an annotated answer needs no detector). A grouped
test part can hold genuine answers only (about one in five), so the F1 is cross-validated: each answer is
predicted by the fold that tests it and the F1 is taken over all the pair's answers (a pair with a training
part that lacks a class has none). Label-free arms see all the pair's answers (no labels: nothing leaks).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from zoo.aporia.baselines import (
    knn_predict,
    logistic_regression,
    majority_vote_predict,
    nearest_mean_predict,
    self_consistency_predict,
    semantic_entropy_predict,
)
from zoo.aporia.folds import balanced_labels, evaluable, folds_of
from zoo.aporia.lp import AporiaLP

SUPERVISED_ARMS = (
    "aporia_lp",
    "aporia_lp_self_training",
    "centroid",
    "logreg",
    "knn",
    "label_spreading",
    "reference_nearest_mean",
)
UNSUPERVISED_ARMS = ("self_consistency", "semantic_entropy", "reference_majority_vote")
#: Arms that read the parsed answers of the pair (label-free parse: the true value is never consulted).
ANSWER_ARMS = ("semantic_entropy", "reference_majority_vote")
ARMS = SUPERVISED_ARMS + UNSUPERVISED_ARMS
#: The ProtocolConfig field each tunable arm's grid sets (APORIA-LP's lambda also drives its ablations).
TUNED_FIELD = {
    "aporia_lp": "reg",
    "logreg": "logreg_c",
    "knn": "knn_k",
    "label_spreading": "spreading_gamma",
    "self_consistency": "consistency_threshold",
    "semantic_entropy": "entropy_threshold",
}


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
        entropy_threshold: Semantic-entropy baseline: H iff the response's answer cluster holds less than this
            share of the largest cluster's responses.
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
    entropy_threshold: float = 1.0
    seed: int = 0


def f1_hallucinated(truth: np.ndarray, predicted: np.ndarray) -> float:
    """F1 with hallucinated (1) as the positive class; 0 when there are no positives at all."""
    tp = float(np.sum((truth == 1) & (predicted == 1)))
    wrong = float(np.sum(truth != predicted))
    return 2 * tp / (2 * tp + wrong) if tp + wrong > 0 else 0.0


def evaluate_pair(
    x: np.ndarray,
    y: np.ndarray,
    config: ProtocolConfig,
    pair_seed: int,
    arms: Sequence[str] = ARMS,
    answers: Sequence[str | None] | None = None,
    fold_configs: Sequence[ProtocolConfig] | None = None,
    groups: Sequence | None = None,
) -> dict[str, np.ndarray]:
    """F1 of every arm on one pair, as ``(splits, draws, budgets)`` arrays.

    Stratified folds: one F1 per fold. Answer-grouped folds (``groups``): a test part may hold no hallucinated
    answer, so the F1 is cross-validated instead: every answer is predicted once, by the fold that tests it,
    and one F1 per draw and budget is taken over all the pair's answers, shape ``(1, draws, budgets)`` (all NaN
    when a training part lacks a class: nothing can be fitted there).

    Args:
        x: ``(n, d)`` response embeddings of the pair.
        y: ``(n,)`` labels, 1 = hallucinated.
        config: Protocol settings.
        pair_seed: Seed of this pair's folds and draws (the same for every arm).
        arms: Arms to run (a subset of :data:`ARMS`).
        answers: Parsed answers of the responses (:func:`zoo.aporia.facts.extract_answer`), needed by
            ``reference_majority_vote``.
        fold_configs: Per fold, the settings with the hyperparameters tuned for that fold (default: ``config``).
        groups: Answer strings: answer-grouped folds (:func:`zoo.aporia.folds.grouped_folds`; label-free arms then
            see all the pair's answers); None = stratified folds.
    """
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        raise ValueError(f"unknown arms {unknown}; choose from {', '.join(ARMS)}")
    needs_answers = sorted(set(arms) & set(ANSWER_ARMS))
    if needs_answers and answers is None:
        raise ValueError(f"{', '.join(needs_answers)} need the parsed answers of the pair (answers=...)")
    majority = majority_vote_predict(answers) if "reference_majority_vote" in arms else None
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y).astype(np.int64)
    folds, pooled = folds_of(y, config.splits, pair_seed, groups), groups is not None
    if pooled and not all(len(np.unique(y[train])) == 2 for train, test in folds if len(test)):
        # a training part without one class (a single hallucinated string, say): nothing can be fitted on it
        return {arm: np.full((1, config.draws, len(config.budgets)), np.nan) for arm in arms}
    f1 = {arm: np.zeros((config.splits, config.draws, len(config.budgets))) for arm in arms}
    every = {arm: np.zeros((config.draws, len(config.budgets), len(y)), dtype=np.int64) for arm in arms}
    rng = np.random.default_rng(pair_seed)
    for s, (train, test) in enumerate(folds):
        fold_config = fold_configs[s] if fold_configs is not None else config
        if not len(test):
            continue
        if not pooled and not evaluable(y, train, test):
            for scores in f1.values():
                scores[s] = np.nan
            continue
        flagged = {}
        if "self_consistency" in f1:
            threshold = fold_config.consistency_threshold
            flagged["self_consistency"] = (
                self_consistency_predict(x, threshold)[test] if pooled else self_consistency_predict(x[test], threshold)
            )
        if majority is not None:
            flagged["reference_majority_vote"] = majority[test]
        if "semantic_entropy" in f1:
            flagged["semantic_entropy"] = semantic_entropy_predict(answers, fold_config.entropy_threshold)[test]
        for arm, predicted in flagged.items():
            every[arm][:, :, test] = predicted
            f1[arm][s] = f1_hallucinated(y[test], predicted)
        for r in range(config.draws):
            for b, chosen in enumerate(balanced_labels(y[train], config.budgets, rng)):
                labelled = train[chosen]
                pool = np.setdiff1d(train, labelled)
                for arm, predicted in _supervised_predictions(x, y, labelled, pool, test, fold_config, arms).items():
                    every[arm][r, b, test] = predicted
                    f1[arm][s, r, b] = f1_hallucinated(y[test], predicted)
    if not pooled:
        return f1
    draws, budgets = range(config.draws), range(len(config.budgets))
    return {arm: np.array([[[f1_hallucinated(y, every[arm][r, b]) for b in budgets] for r in draws]]) for arm in arms}


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
    if "reference_nearest_mean" in arms:
        out["reference_nearest_mean"] = nearest_mean_predict(x_lab, y_lab, x_test)
    return out


def tune_pair(
    x: np.ndarray,
    y: np.ndarray,
    config: ProtocolConfig,
    pair_seed: int,
    grids: Mapping[str, Sequence[float]],
    budget: int,
    draws: int,
    answers: Sequence[str | None] | None = None,
    groups: Sequence | None = None,
) -> dict[str, np.ndarray]:
    """Validation F1 of each grid value of each tunable arm, per fold of :func:`evaluate_pair`.

    Fold ``s`` uses only its training part (same ``pair_seed``, so the same test part as in
    :func:`evaluate_pair`): a stratified ``1/splits`` of it is the validation set and ``budget`` balanced
    labels are drawn ``draws`` times from the rest (transductive arms see that training part only). A value
    chosen from row ``s`` has therefore never seen fold ``s``'s test points.

    Args:
        x: ``(n, d)`` response embeddings of the pair.
        y: ``(n,)`` labels, 1 = hallucinated.
        config: Protocol settings (the untuned values of the other arms).
        pair_seed: The pair's seed in :func:`evaluate_pair`.
        grids: Values to try by arm (keys of :data:`TUNED_FIELD`).
        budget: Labels per draw.
        draws: Label draws per fold.
        answers: Parsed answers of the pair's responses (needed to tune ``semantic_entropy``).
        groups: Answer strings: grouped outer and inner folds (the first inner part with an F1 validates);
            None = stratified.

    Returns:
        By arm, ``(splits, len(grid))`` mean validation F1 over the draws (NaN for a fold without an F1).
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y).astype(np.int64)
    scores = {arm: np.zeros((config.splits, len(values))) for arm, values in grids.items()}
    rng = np.random.default_rng([pair_seed, 1])
    for s, (train, test) in enumerate(folds_of(y, config.splits, pair_seed, groups)):
        x_train, y_train = x[train], y[train]
        inner_groups = None if groups is None else [groups[i] for i in train]
        inner_folds = folds_of(y_train, config.splits, pair_seed + 1, inner_groups)
        usable = [fold for fold in inner_folds if evaluable(y_train, *fold)]
        if not evaluable(y, train, test) or not usable:
            for values in scores.values():
                values[s] = np.nan
            continue
        inner, validation = usable[0]
        for _ in range(draws):
            labelled = inner[balanced_labels(y_train[inner], [budget], rng)[0]]
            pool = np.setdiff1d(inner, labelled)
            for arm, values in grids.items():
                for v, value in enumerate(values):
                    if arm == "self_consistency":
                        on = x_train[validation] if groups is None else x_train  # grouped: the whole part
                        predicted = self_consistency_predict(on, value)
                        predicted = predicted if groups is None else predicted[validation]
                    elif arm == "semantic_entropy":
                        if answers is None:
                            raise ValueError("tuning semantic_entropy needs the parsed answers (answers=...)")
                        predicted = semantic_entropy_predict(answers, value)[train][validation]
                    else:
                        tuned = replace(config, **{TUNED_FIELD[arm]: value})
                        predicted = _supervised_predictions(x_train, y_train, labelled, pool, validation, tuned, [arm])
                        predicted = predicted[arm]
                    scores[arm][s, v] += f1_hallucinated(y_train[validation], predicted) / draws
    return scores


def choose_per_fold(
    config: ProtocolConfig, grids: Mapping[str, Sequence[float]], validation: Sequence[Mapping[str, np.ndarray]]
) -> tuple[list[ProtocolConfig], dict]:
    """Per fold, each arm's grid value of best validation F1 averaged over pairs (:func:`tune_pair`'s outputs).

    Returns:
        The per-fold settings for :func:`evaluate_pair` and a JSON record (choices and mean validation F1).
    """
    with warnings.catch_warnings():  # a fold no pair could validate gives NaN means: its first value is chosen
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = {arm: np.nanmean([pair[arm] for pair in validation], axis=0) for arm in grids}  # (splits, grid)
    chosen = {arm: [grids[arm][i] for i in np.argmax(np.nan_to_num(f1, nan=-1.0), axis=1)] for arm, f1 in mean.items()}
    folds = [
        replace(config, **{TUNED_FIELD[a]: values[s] for a, values in chosen.items()}) for s in range(config.splits)
    ]
    return folds, {a: {"chosen_per_fold": chosen[a], "validation_f1": mean[a].round(4).tolist()} for a in grids}


def _logreg(c: float) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    def predict(x_lab: np.ndarray, y_lab: np.ndarray, x_test: np.ndarray) -> np.ndarray:
        weights, bias = logistic_regression(x_lab, y_lab, c=c)
        return (np.asarray(x_test, dtype=np.float64) @ weights + bias > 0).astype(np.int64)

    return predict


def _label_spreading(x: np.ndarray, y: np.ndarray, labelled: np.ndarray, test: np.ndarray, gamma: float) -> np.ndarray:
    """sklearn LabelSpreading (RBF) over the pair's responses; only the labelled points carry labels."""
    from sklearn.semi_supervised import LabelSpreading

    partial = np.full(len(y), -1)
    partial[labelled] = y[labelled]
    model = LabelSpreading(kernel="rbf", gamma=gamma, max_iter=100).fit(x, partial)
    return model.transduction_[test].astype(np.int64)
