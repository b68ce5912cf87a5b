"""Linear bandit instances from river's bundled tables and a synthetic control (plain numpy / scipy / sklearn).

The instance builder follows the spec (every step marked (R) is a reconstruction; the paper's own datasets
and construction are not available):

1. Features: the table's numeric columns (SolarFlare: its three categorical columns one-hot encoded; Yeast and
   SolarFlare then reduced to 10 components by sklearn's PCA), min-max scaled to [0, 1], a constant 1
   appended, every row normalised to unit l2 norm.
2. theta* = non-negative least squares (``scipy.optimize.nnls``) of the binary target on all rows, so every
   mean ``<x, theta*>`` is >= 0 (features and theta* are non-negative).
3. Rescale theta* so that the best row has mean 0.9; floor every mean at 0.01 (Nash regret needs mu > 0).
   The floor makes the reward model ``mu = max(<x, theta*>, 0.01)``: linear except at the floor.
4. Arms: K rows sampled without replacement per seed, always including the best row; rewards are
   Bernoulli(mu).

Synthetic control: d = 10, K arms uniform on the positive orthant of the unit sphere, theta* uniform there
too, then steps 3-4 (rescale to max 0.9, floor 0.01).

Decoy variants (``<name>_decoy``, :func:`decoy_instance`; not in the spec, issue 70): the instance of ``<name>``
with 3 non-best arms replaced by *decoys*, arms along new feature directions whose mean is the floor 0.01.
Every other arm gets a 0 in the new coordinates and theta* gets the floor there, so the model stays exactly linear
and every other mean is unchanged. No other arm tells anything about the new directions, so a regret-minimising
policy (OFUL) must try the decoys, and it does so early (about ``beta^2 / gap^2`` pulls each): rounds whose
expected reward is 0.01. These are the instances where p-means fairness matters.

River's tables ship inside the wheel (no download): Shuttle, Yeast, Phishing and SolarFlare are read from the
package's own ``.csv.gz`` / ``.zip`` files.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

DATASETS = ("shuttle", "yeast", "phishing", "solarflare", "synthetic")
DECOY = "_decoy"
DECOYS = 3  # decoy arms per instance: with 1, OFUL's p = -5 regret was below 2x its R_1 on some validation seeds
DECOY_DATASETS = tuple(name + DECOY for name in DATASETS)
ALL_DATASETS = DATASETS + DECOY_DATASETS
BEST_MEAN = 0.9
MEAN_FLOOR = 0.01
SYNTHETIC_DIM = 10
PCA_DIM = 10


@dataclass(frozen=True)
class Instance:
    """One linear bandit instance.

    Args:
        name: Dataset name (one of :data:`DATASETS`).
        seed: Seed of the arm sample.
        arms: Arm features, shape ``(K, d)``, unit rows.
        theta: The parameter theta*, shape ``(d,)``.
        mu: Mean reward of every arm, ``max(arms @ theta, floor)``, shape ``(K,)``.
    """

    name: str
    seed: int
    arms: np.ndarray
    theta: np.ndarray
    mu: np.ndarray

    @property
    def best(self) -> float:
        return float(self.mu.max())


@cache
def load_table(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Features and binary target of one of river's bundled tables (no download).

    Args:
        name: ``"shuttle"``, ``"yeast"``, ``"phishing"`` or ``"solarflare"``.

    Returns:
        ``(features (n, m) float64, target (n,) float64 in {0, 1})``.
    """
    from river import datasets

    if name == "shuttle":
        rows = list(datasets.Shuttle())
        features = np.array([list(x.values()) for x, _ in rows], dtype=np.float64)
        target = np.array([float(y == 1) for _, y in rows])
    elif name == "yeast":
        rows = list(datasets.Yeast())
        features = np.array([list(x.values()) for x, _ in rows], dtype=np.float64)
        target = np.array([float(bool(y["Class1"])) for _, y in rows])
        features = _pca(features)
    elif name == "phishing":
        rows = list(datasets.Phishing())
        features = np.array([list(x.values()) for x, _ in rows], dtype=np.float64)
        target = np.array([float(bool(y)) for _, y in rows])
    elif name == "solarflare":
        rows = list(datasets.SolarFlare())
        features = _one_hot([x for x, _ in rows])
        target = np.array([float(sum(float(v) for v in y.values()) > 0) for _, y in rows])
        features = _pca(features)
    else:
        raise ValueError(f"unknown dataset {name!r}; expected one of {', '.join(DATASETS[:-1])}")
    return features, target


def _one_hot(rows: list[dict]) -> np.ndarray:
    """Numeric columns as they are, string columns one-hot encoded (sorted categories)."""
    columns = list(rows[0])
    blocks = []
    for column in columns:
        values = [row[column] for row in rows]
        if all(isinstance(v, int | float) for v in values):
            blocks.append(np.array(values, dtype=np.float64)[:, None])
        else:
            categories = sorted({str(v) for v in values})
            index = {c: i for i, c in enumerate(categories)}
            block = np.zeros((len(values), len(categories)))
            block[np.arange(len(values)), [index[str(v)] for v in values]] = 1.0
            blocks.append(block)
    return np.concatenate(blocks, axis=1)


def _pca(features: np.ndarray) -> np.ndarray:
    from sklearn.decomposition import PCA

    return PCA(n_components=PCA_DIM, random_state=0).fit_transform(features)


def featurise(features: np.ndarray) -> np.ndarray:
    """Min-max scale to [0, 1], append a constant 1, normalise rows to unit l2 norm."""
    low, high = features.min(axis=0), features.max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    scaled = (features - low) / span
    rows = np.concatenate([scaled, np.ones((len(scaled), 1))], axis=1)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@cache
def dataset_model(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All rows of a real dataset as arms with theta* and means: ``(rows (n, d), theta (d,), mu (n,))``."""
    from scipy.optimize import nnls

    features, target = load_table(name)
    rows = featurise(features)
    theta, _ = nnls(rows, target)
    raw = rows @ theta
    if raw.max() <= 0:
        raise ValueError(f"{name}: the NNLS fit is zero on every row; no linear instance can be built")
    theta = theta * (BEST_MEAN / raw.max())
    return rows, theta, np.maximum(rows @ theta, MEAN_FLOOR)


def build_instance(name: str, seed: int, num_arms: int = 200) -> Instance:
    """The instance of ``name`` for ``seed``: ``num_arms`` rows sampled per seed, the best row always included.

    Args:
        name: One of :data:`DATASETS`.
        seed: Seed of the arm sample (test seeds 0-9, validation seeds 100-109 in the evaluation).
        num_arms: K, at least 2.
    """
    if num_arms < 2:
        raise ValueError(f"a bandit needs K >= 2 arms, got K={num_arms}")
    if name.endswith(DECOY):
        return decoy_instance(build_instance(name.removesuffix(DECOY), seed, num_arms))
    rng = np.random.default_rng([seed, DATASETS.index(name) if name in DATASETS else 99])
    if name == "synthetic":
        arms = np.abs(rng.standard_normal((num_arms, SYNTHETIC_DIM)))
        arms /= np.linalg.norm(arms, axis=1, keepdims=True)
        theta = np.abs(rng.standard_normal(SYNTHETIC_DIM))
        theta /= np.linalg.norm(theta)
        theta *= BEST_MEAN / (arms @ theta).max()
        return Instance(name, seed, arms, theta, np.maximum(arms @ theta, MEAN_FLOOR))
    rows, theta, mu = dataset_model(name)
    if num_arms > len(rows):
        raise ValueError(f"{name} has {len(rows)} rows, fewer than K={num_arms}")
    best = int(np.argmax(mu))
    others = rng.choice(np.delete(np.arange(len(rows)), best), size=num_arms - 1, replace=False)
    chosen = np.concatenate([[best], others])
    chosen = chosen[rng.permutation(num_arms)]  # the best arm sits at a random index
    return Instance(name, seed, rows[chosen].copy(), theta.copy(), mu[chosen].copy())


def decoy_instance(instance: Instance, decoys: int = DECOYS) -> Instance:
    """``instance`` with ``decoys`` non-best arms replaced by decoys: unit arms along new feature directions.

    The arms gain ``decoys`` zero coordinates, theta* gains :data:`MEAN_FLOOR` in each, and the replaced arms
    (chosen by the instance's seed, never the best) become the new unit vectors, so each decoy's mean is
    exactly the floor, the model stays linear and every other arm keeps its mean.

    Args:
        instance: The instance to extend (its name gets the suffix ``_decoy``).
        decoys: How many arms to replace, 1 <= decoys < K.
    """
    num_arms, dim = instance.arms.shape
    if not 1 <= decoys < num_arms:
        raise ValueError(f"decoys must be in [1, K - 1] = [1, {num_arms - 1}], got {decoys}")
    rng = np.random.default_rng([instance.seed, 1000 + decoys])
    candidates = np.delete(np.arange(num_arms), int(np.argmax(instance.mu)))
    replaced = rng.choice(candidates, size=decoys, replace=False)
    arms = np.concatenate([instance.arms, np.zeros((num_arms, decoys))], axis=1)
    arms[replaced] = 0.0
    arms[replaced, dim + np.arange(decoys)] = 1.0
    theta = np.concatenate([instance.theta, np.full(decoys, MEAN_FLOOR)])
    return Instance(instance.name + DECOY, instance.seed, arms, theta, np.maximum(arms @ theta, MEAN_FLOOR))


def check_instance(arms: np.ndarray, theta: np.ndarray | None, mu: np.ndarray, p: float | None = None) -> None:
    """Raise a clear ValueError for an instance a bandit or a p-means regret cannot use.

    Args:
        arms: ``(K, d)`` or ``(B, K, d)``.
        theta: ``(d,)`` or ``(B, d)``, or None.
        mu: ``(K,)`` or ``(B, K)``.
        p: The p of the p-means regret, if one is computed.
    """
    arms, mu = np.asarray(arms), np.asarray(mu)
    if arms.shape[-2] < 2:
        raise ValueError(f"a bandit needs K >= 2 arms, got K={arms.shape[-2]}")
    if theta is not None and np.asarray(theta).shape[-1] != arms.shape[-1]:
        raise ValueError(
            f"arm dimension d={arms.shape[-1]} does not match theta's dimension {np.asarray(theta).shape[-1]}"
        )
    if mu.shape != arms.shape[:-1]:
        raise ValueError(f"mu has shape {mu.shape}, expected one mean per arm {arms.shape[:-1]}")
    if p is not None and p <= 0 and (mu <= 0).any():
        raise ValueError(
            f"p = {p} <= 0 needs every mean reward > 0, but min mu = {mu.min():.3g}: floor the means "
            f"(the instance builder floors them at {MEAN_FLOOR})"
        )


def export_instances(path, seeds=range(10), num_arms: int = 200) -> dict[str, tuple[int, ...]]:
    """Write every instance of ``seeds`` to one ``.npz`` (``<dataset>_<seed>_{arms,theta,mu}``, float32).

    This is the dataset the card publishes: the evaluation rebuilds exactly these arrays from river's tables.

    Returns:
        The shape of every array written.
    """
    arrays = {}
    for name in ALL_DATASETS:
        for seed in seeds:
            instance = build_instance(name, int(seed), num_arms)
            for field in ("arms", "theta", "mu"):
                arrays[f"{name}_{seed}_{field}"] = getattr(instance, field).astype(np.float32)
    np.savez_compressed(path, **arrays)
    return {key: value.shape for key, value in arrays.items()}
