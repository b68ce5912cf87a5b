"""The true-sensitivity measurement and the utility scale, against values known by construction."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.visual_persuasion.attributes import measure
from zoo.visual_persuasion.editor import ParametricEditor
from zoo.visual_persuasion.preferences import SENSITIVITY_METHODS, true_sensitivities

MEAN = np.array([0.45, 0.2, 0.35, 0.05, 0.0, 0.08, 0.1])
STD = np.array([0.1, 0.05, 0.15, 0.05, 0.1, 0.03, 0.04])


@pytest.mark.parametrize("name", list(SENSITIVITY_METHODS))
def test_true_sensitivities_recover_a_utility_linear_in_the_attributes(items, name):
    weights = np.array([0.8, 0.2, 0.5, 0.3, 0.0, -0.4])  # scale needs the original: its weight is 0 here

    def utility(images):
        return np.array([((measure(image, image) - MEAN) / STD)[:6] @ weights for image in images])

    kwargs = dict(SENSITIVITY_METHODS[name])
    if "edits_per_item" in kwargs:
        kwargs["edits_per_item"] = 10
    slopes = true_sensitivities(utility, ParametricEditor(), items[[0, 12]], MEAN, STD, **kwargs)
    assert np.allclose(slopes, weights, atol=1e-6)  # least squares of an exactly linear response


def test_an_unknown_sensitivity_method_is_rejected(items):
    with pytest.raises(ValueError, match="sensitivity method"):
        true_sensitivities(lambda images: np.zeros(len(images)), ParametricEditor(), items[:1], MEAN, STD, "grid")


def test_heads_fit_to_a_scaled_utility_are_the_scaled_heads():
    from zoo.visual_persuasion.heads import fit_heads, utility_target

    rng = np.random.default_rng(0)
    measurements = rng.normal(size=(200, 7)) * STD + MEAN
    features = np.concatenate([measurements, rng.normal(size=(200, 5))], axis=1) @ rng.normal(size=(12, 12))
    taste = (0.8, 0.2, 0.5, 0.3, 0.6, -0.4)
    _, _, target = utility_target(measurements, taste, 0.3)
    _, _, scaled = utility_target(measurements, taste, 0.3, scale=0.2)
    assert np.allclose(scaled, 0.2 * target)
    w1, b1, r1 = fit_heads(features, target, (1.0, 10.0), seed=0)
    w2, b2, r2 = fit_heads(features, scaled, (1.0, 10.0), seed=0)
    assert np.allclose(w2, 0.2 * w1) and np.allclose(b2, 0.2 * b1) and np.allclose(r1, r2)
