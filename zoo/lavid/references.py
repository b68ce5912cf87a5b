"""Pixel-space reference rules beside the students: multinomial logistic regression and nearest (shrunk) class mean.

Both read the raw pixels in [0, 1] flattened to 784 numbers, the same few-shot draws (or composite training
sets) the students train on, and carry one parameter each, chosen on validation with the students' budget
(``zoo/lavid/tune.py``):

* ``reference_pixel_logreg``: L2-regularised logistic regression (scikit-learn, lbfgs, intercept unpenalised);
  the parameter is the inverse regularisation strength ``C``.
* ``reference_class_mean``: each class mean shrunk towards the mean of all training images,
  ``m_c = mu + (1 - shrinkage) (mean_c - mu)``; an image goes to the nearest ``m_c`` (Euclidean). ``shrinkage = 0``
  is the plain nearest class mean.
"""

from __future__ import annotations

import numpy as np
import torch

from zoo._errors import ZooError

REFERENCES = ("reference_pixel_logreg", "reference_class_mean")
PARAMETER = {"reference_pixel_logreg": "C", "reference_class_mean": "shrinkage"}
DEFAULTS = {"reference_pixel_logreg": {"C": 0.1}, "reference_class_mean": {"shrinkage": 0.0}}


def flat(images) -> np.ndarray:
    """Images ``[n, 1, 28, 28]`` (or ``[n, 28, 28]``) as float64 rows ``[n, 784]``."""
    array = images.numpy() if isinstance(images, torch.Tensor) else np.asarray(images)
    return np.asarray(array, dtype=np.float64).reshape(len(array), -1)


class PixelLogReg:
    """Logistic regression on flattened pixels (a thin wrapper so both references share ``fit``/``predict``)."""

    def __init__(self, C: float) -> None:
        if not C > 0:
            raise ZooError(f"C must be positive, not {C}")
        self.C = float(C)

    def fit(self, images, labels) -> PixelLogReg:
        from sklearn.linear_model import LogisticRegression

        self.model = LogisticRegression(C=self.C, max_iter=5000, tol=1e-6)
        self.model.fit(flat(images), np.asarray(labels))
        return self

    def predict(self, images) -> np.ndarray:
        return self.model.predict(flat(images))


class ClassMean:
    """Nearest class mean, each mean shrunk towards the mean of all training images by ``shrinkage``."""

    def __init__(self, shrinkage: float = 0.0) -> None:
        if not 0.0 <= shrinkage < 1.0:
            raise ZooError(f"shrinkage must be in [0, 1), not {shrinkage}")
        self.shrinkage = float(shrinkage)

    def fit(self, images, labels) -> ClassMean:
        x, y = flat(images), np.asarray(labels)
        self.classes = np.unique(y)
        overall = x.mean(0)
        means = np.stack([x[y == c].mean(0) for c in self.classes])
        self.means = overall + (1.0 - self.shrinkage) * (means - overall)
        return self

    def predict(self, images) -> np.ndarray:
        x = flat(images)
        distances = ((x[:, None, :] - self.means[None]) ** 2).sum(-1)
        return self.classes[distances.argmin(1)]


def make_reference(arm: str, config: dict | None = None):
    """The unfitted rule of a reference arm with ``config`` (default: the tuned choice for ``dataset``)."""
    if arm not in REFERENCES:
        raise ZooError(f"unknown reference {arm!r}; choose one of {', '.join(REFERENCES)}")
    value = {**DEFAULTS[arm], **(config or {})}[PARAMETER[arm]]
    return PixelLogReg(value) if arm == "reference_pixel_logreg" else ClassMean(value)


def tuned_config(arm: str, dataset: str = "fmnist") -> dict:
    """The validation choice of a reference on ``dataset`` (``tuning.json``), else its default."""
    import json

    from zoo.lavid.runs import TUNING_FILE

    record = json.loads(TUNING_FILE.read_text()) if TUNING_FILE.is_file() else {}
    if dataset == "spurious":
        record = record.get("spurious", {})
    return {**DEFAULTS[arm], **record.get("chosen", {}).get(arm, {})}


def fit_reference(arm: str, images, labels, dataset: str = "fmnist", config: dict | None = None):
    """Fit a reference on ``(images, labels)`` with ``config`` (default: its tuned choice on ``dataset``)."""
    return make_reference(arm, config if config is not None else tuned_config(arm, dataset)).fit(images, labels)


def accuracy(rule, images, labels) -> float:
    return float(np.mean(rule.predict(images) == np.asarray(labels)))


def group_accuracies(rule, images, labels, groups) -> tuple[float, float, list[float]]:
    """``(worst-group accuracy, average accuracy, per-group accuracies)``, as the students' scorer."""
    correct = (rule.predict(images) == np.asarray(labels)).astype(np.float64)
    groups = np.asarray(groups)
    per_group = [float(correct[groups == g].mean()) for g in np.unique(groups)]
    return min(per_group), float(correct.mean()), per_group
