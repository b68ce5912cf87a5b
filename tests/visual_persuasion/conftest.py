"""Cheap judges for the visual persuasion tests: a pixel-statistics encoder instead of EfficientNet-Lite0."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.visual_persuasion.images import base_items


def pixel_encoder(images: np.ndarray) -> np.ndarray:
    """Per-channel means and standard deviations (6 features): a judge that responds to colour and contrast."""
    x = np.asarray(images).reshape(len(images), -1, 3).astype(np.float64) / 255.0
    return np.concatenate([x.mean(axis=1), x.std(axis=1)], axis=1)


#: Heads over pixel_encoder's features: brighter and more contrasted is better, each head a little different.
HEADS = np.array([[1.0, 1.0, 1.0, 0.5, 0.5, 0.5], [1.2, 1.0, 0.8, 0.4, 0.5, 0.6], [0.9, 1.1, 1.0, 0.6, 0.4, 0.5],
                  [1.0, 0.9, 1.1, 0.5, 0.6, 0.4]]) * 3.0  # fmt: skip


@pytest.fixture(scope="session")
def items() -> np.ndarray:
    return base_items("test")


@pytest.fixture(scope="session")
def validation_items() -> np.ndarray:
    return base_items("validation")
