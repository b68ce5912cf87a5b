"""Tier 2 (the stand-in VLM) and the shared protocol pieces: bridge, banks, metrics, tuning (plain numpy).

The stand-in VLM pairs EfficientNet-Lite0 image features with MiniLM text embeddings through a ridge
bridge ``P`` (sklearn ``Ridge``): MiniLM("a photo of a {name}.") of the 1000 ImageNet classes is regressed
onto the classifier rows of EfficientNet-Lite0, so a label t lives in image space as ``e_t P + b`` and an
image x matches it by ``cos(f(x) - mu, e_t P + b)`` (``mu``: the mean feature of the held-out ID images; see
the module docstring of :mod:`zoo.renyi_neglabel_ood.module` for why it is centred).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, replace

import numpy as np

from zoo._errors import ZooError
from zoo.renyi_neglabel_ood.mining import contaminate, mine_bank
from zoo.renyi_neglabel_ood.scores import ScoreConfig, canonical_groups, score, similarities

# ------------------------------------------------------------------------------------------------ metrics


def ood_metrics(score_id: np.ndarray, score_ood: np.ndarray) -> dict[str, float]:
    """AUROC, FPR at 95% TPR and AUPR (ID as positive) from sklearn; scores are higher for ID."""
    from sklearn.metrics import average_precision_score, roc_auc_score, roc_curve

    y = np.r_[np.ones(len(score_id)), np.zeros(len(score_ood))]
    s = np.r_[score_id, score_ood]
    if not np.isfinite(s).all():
        raise ZooError("a score is NaN or infinite")
    fpr, tpr, _ = roc_curve(y, s)
    return {
        "auroc": float(roc_auc_score(y, s)),
        "fpr95": float(fpr[np.searchsorted(tpr, 0.95, side="left")]),
        "aupr": float(average_precision_score(y, s)),
    }


# ------------------------------------------------------------------------------------------------ tuning

#: The Renyi score's coordinate sweep from the paper's ImageNet setting (tau first: it sets the scale). eta, beta0,
#: steps and lr reach past the paper's ranges (eta 0.8-1.45, beta0 -0.12-0.06, 0-30 steps) on both sides, so
#: a choice at the paper's edge is not an artefact of the grid, and up to 300 steps at lr 0.1 solve for beta.
RENYI_GRID = {
    "tau": [0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2],
    "eta": [0.5, 0.8, 1.0, 1.2, 1.45, 2.0, 3.0, 5.0],
    "r": [1.05, 1.06, 1.5],
    "beta0": [-0.5, -0.3, -0.2, -0.12, -0.1, 0.0, 0.06, 0.2],
    "steps": [0, 15, 30, 100, 300],
    "lr": [1e-3, 1e-2, 1e-1],
}
RENYI_START = ScoreConfig("renyi", tau=0.01, r=1.05, eta=1.2, beta0=-0.1, steps=15, lr=1e-2)
TAU_GRID_30 = [float(t) for t in np.round(np.geomspace(0.001, 0.3, 30), 5)]
BASELINE_GRIDS = {  # about the method's 29 trials each
    "neglabel": {"tau": [0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3], "groups": [1, 10, 100]},
    "kl_energy": {"tau": TAU_GRID_30},
    "mcm": {"tau": TAU_GRID_30},
}
TUNED = ("mcm", "neglabel", "kl_energy", "renyi")


def renyi_trials() -> int:
    """Number of configurations the coordinate sweep tries (each distinct configuration once)."""
    return 1 + sum(len([v for v in values if v != getattr(RENYI_START, key)]) for key, values in RENYI_GRID.items())


def grid_trials(method: str) -> int:
    if method == "renyi":
        return renyi_trials()
    return int(np.prod([len(v) for v in BASELINE_GRIDS[method].values()]))


def tune(method: str, objective: Callable[[ScoreConfig], float]) -> tuple[ScoreConfig, float, int]:
    """Choose a method's settings by maximising ``objective`` (a validation AUROC).

    ``renyi``: a coordinate sweep from the paper's setting, one hyperparameter at a time in the order of
    :data:`RENYI_GRID`, keeping the best value of each. Baselines: their full grid. Returns the best config,
    its objective and the number of distinct configurations tried.
    """
    seen: dict[tuple, float] = {}

    def trial(config: ScoreConfig) -> float:
        key = tuple(sorted(asdict(config).items()))
        if key not in seen:
            seen[key] = float(objective(config))
        return seen[key]

    if method == "renyi":
        best = RENYI_START
        best_value = trial(best)
        for key, values in RENYI_GRID.items():
            for value in values:
                candidate = replace(best, **{key: value})
                v = trial(candidate)
                if v > best_value + 1e-12:
                    best, best_value = candidate, v
        return best, best_value, len(seen)
    grid = BASELINE_GRIDS[method]
    best, best_value = None, -np.inf
    keys = list(grid)
    for values in np.array(np.meshgrid(*[grid[k] for k in keys], indexing="ij"), dtype=object).reshape(len(keys), -1).T:
        config = ScoreConfig(method, **{k: (int(v) if k == "groups" else float(v)) for k, v in zip(keys, values)})
        v = trial(config)
        if v > best_value:
            best, best_value = config, v
    return best, best_value, len(seen)


def evaluate_config(config: ScoreConfig, id_sims, ood_sims: dict, group_seed: int = 0) -> dict[str, dict]:
    """Metrics of one score on ID similarities ``(s_id, s_neg)`` against each OOD set's."""
    groups = canonical_groups_for(config, id_sims[1].shape[1], group_seed)
    id_scores = score(*id_sims, config, groups)
    return {name: ood_metrics(id_scores, score(*sims, config, groups)) for name, sims in ood_sims.items()}


def canonical_groups_for(config: ScoreConfig, num_negatives: int, seed: int):
    from zoo.renyi_neglabel_ood.scores import group_index

    if config.method != "neglabel" or num_negatives == 0:
        return None
    return group_index(num_negatives, config.groups, seed)


# ------------------------------------------------------------------------------------------------ bridge


def fit_bridge(text: np.ndarray, rows: np.ndarray, alpha: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """Ridge bridge from text embeddings ``(n, 384)`` to image-space class vectors ``(n, 1280)``.

    Returns ``(P (384, 1280), b (1280,))`` so that a label embedding ``e`` maps to ``e @ P + b``.
    """
    from sklearn.linear_model import Ridge

    if alpha <= 0:
        raise ZooError(f"the ridge penalty must be > 0, got {alpha}")
    model = Ridge(alpha=alpha, fit_intercept=True).fit(np.asarray(text, np.float64), np.asarray(rows, np.float64))
    return model.coef_.T.astype(np.float32), model.intercept_.astype(np.float32)


def to_image_space(labels: np.ndarray, projection: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Bridge label embeddings ``(M, 384)`` into image space ``(M, 1280)``."""
    return np.asarray(labels, np.float64) @ np.asarray(projection, np.float64) + np.asarray(bias, np.float64)


def id_label_embeddings(text: dict, classes: Sequence[int]) -> np.ndarray:
    """One text embedding per ID class ``(K, 384)``: the normalised mean of its synonyms' prompts."""
    out = []
    for k in classes:
        v = text["id_prompts"][text["id_prompt_class"] == k].mean(axis=0)
        out.append(v / np.linalg.norm(v))
    return np.stack(out)


def negative_bank(text: dict, id_labels: np.ndarray, seed: int, keep: float = 0.8) -> tuple[np.ndarray, list[str]]:
    """The mined bank for one seed: NegLabel/CSP mining on a random ``keep`` share of the candidate pool.

    The seed draws which candidates the vocabulary holds (the negative sampling of the protocol).
    """
    rng = np.random.default_rng([seed, 7])
    nouns = np.sort(rng.choice(len(text["nouns"]), size=int(keep * len(text["nouns"])), replace=False))
    adjs = np.sort(rng.choice(len(text["adjs"]), size=int(keep * len(text["adjs"])), replace=False))
    noun_index, adj_index = mine_bank(text["nouns"][nouns], text["adjs"][adjs], id_labels)
    bank = np.concatenate([text["nouns"][nouns][noun_index], text["adjs"][adjs][adj_index]])
    words = [str(w) for w in text["noun_words"][nouns][noun_index]] + [
        str(w) for w in text["adj_words"][adjs][adj_index]
    ]
    return bank.astype(np.float32), words


def hyponym_contamination(text: dict, bank: np.ndarray, seed: int, fraction: float = 0.1) -> np.ndarray:
    """The bank with ``fraction`` of its rows replaced by near-ID WordNet hyponyms (clothes, shoes, bags)."""
    rng = np.random.default_rng([seed, 11])
    contaminated, _ = contaminate(bank, text["hyponyms"], fraction, rng)
    return contaminated


__all__ = [
    "ood_metrics",
    "tune",
    "fit_bridge",
    "to_image_space",
    "id_label_embeddings",
    "negative_bank",
    "hyponym_contamination",
    "similarities",
    "canonical_groups",
]


def tune_config(method: str, val_id_sims, val_ood_sims, precision: str = "float32") -> tuple[ScoreConfig, float, int]:
    """Tune ``method`` on validation similarities (``(s_id, s_neg)`` of ID and of OOD images) by AUROC."""

    def objective(config: ScoreConfig) -> float:
        config = replace(config, precision=precision)
        groups = canonical_groups_for(config, val_id_sims[1].shape[1], 0)
        return ood_metrics(score(*val_id_sims, config, groups), score(*val_ood_sims, config, groups))["auroc"]

    best, value, trials = tune(method, objective)
    return replace(best, precision=precision), value, trials
