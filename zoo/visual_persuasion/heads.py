"""The judges' utility heads: bootstrap ridge regressions from EfficientNet-Lite0 features to the hidden utility.

The training set is ``num_edits`` random plausible edits of crops that are neither test nor validation items;
each head is ``sklearn.linear_model.Ridge`` on its own bootstrap sample with its own penalty, so the judges
agree on average and differ in detail. The last head is held out: it never answers during optimisation and
only scores the optimised edits (``p_beats_original_heldout``).
"""

from __future__ import annotations

import numpy as np

from zoo.visual_persuasion.attributes import hidden_utility, measure
from zoo.visual_persuasion.editor import Editor
from zoo.visual_persuasion.images import base_items


def training_edits(
    editor: Editor, num_edits: int, crops_per_photo: int, seed: int, size: int = 112
) -> tuple[np.ndarray, np.ndarray]:
    """Random plausible edits of training crops and their raw measurements.

    One in ten is the unedited crop; the others draw every parameter uniformly inside its bounds and are moved
    back toward the identity until they pass the SSIM floor.

    Args:
        editor: The editor (its plausibility prior applies).
        num_edits: Number of edited images.
        crops_per_photo: Training crops per photo (seeded by ``seed``; disjoint seeds from the test items').
        seed: Seed of crops and edits.
        size: Side of the crops.

    Returns:
        ``(images uint8 (N, size, size, 3), measurements (N, 7))``.
    """
    if num_edits < 1 or crops_per_photo < 1:
        raise ValueError(f"num_edits and crops_per_photo must be >= 1, got {num_edits}, {crops_per_photo}")
    from dataclasses import replace

    crops = base_items("train", size=size, per_photo=crops_per_photo, seed=10_000 + seed)
    editor = replace(editor, bisection_steps=3) if hasattr(editor, "bisection_steps") else editor
    rng = np.random.default_rng([seed, 1414])
    images, rows = [], []
    for index in range(num_edits):
        crop = crops[index % len(crops)]
        if index % 10 == 0:
            image = crop.copy()
        else:
            image = editor.random_plausible(crop, rng)
        images.append(image)
        rows.append(measure(image, crop))
    return np.stack(images), np.stack(rows)


def fit_heads(
    features: np.ndarray, target: np.ndarray, alphas, seed: int
) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """One bootstrap ridge head per penalty in ``alphas``.

    Args:
        features: ``(N, D)`` backbone features.
        target: ``(N,)`` hidden utility.
        alphas: Ridge penalties, one per head (on standardised features).
        seed: Seed of the bootstrap samples.

    Returns:
        ``(weights (H, D), bias (H,), out_of_bag_r2 per head)`` in raw-feature units.
    """
    from sklearn.linear_model import Ridge

    rng = np.random.default_rng([seed, 1415])
    mean, std = features.mean(axis=0), features.std(axis=0) + 1e-6
    standard = (features - mean) / std
    weights, bias, r2 = [], [], []
    for alpha in alphas:
        sample = rng.integers(0, len(features), size=len(features))
        out_of_bag = np.setdiff1d(np.arange(len(features)), sample)
        ridge = Ridge(alpha=float(alpha)).fit(standard[sample], target[sample])
        weights.append(ridge.coef_ / std)
        bias.append(ridge.intercept_ - float((ridge.coef_ / std) @ mean))
        r2.append(float(ridge.score(standard[out_of_bag], target[out_of_bag])) if len(out_of_bag) > 1 else 0.0)
    return np.stack(weights), np.array(bias), r2


def utility_target(measurements: np.ndarray, taste, hidden_weight: float, scale: float = 1.0):
    """z-score statistics of the measurements and the (scaled) hidden utility of each row."""
    mean, std = measurements.mean(axis=0), measurements.std(axis=0) + 1e-9
    return mean, std, hidden_utility(measurements, mean, std, taste, hidden_weight, scale)
