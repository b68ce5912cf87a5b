"""The parametric editor: identity, bounds, the SSIM floor, input checks; attributes measured on images."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.visual_persuasion.attributes import measure
from zoo.visual_persuasion.editor import IDENTITY, LOWER, PARAMETERS, UPPER, ParametricEditor, ssim


def test_identity_edits_return_the_original(items):
    editor = ParametricEditor()
    for item in items:
        assert np.abs(editor.edit(item, IDENTITY).astype(int) - item.astype(int)).max() <= 1


def test_the_ssim_floor_is_enforced(items):
    editor = ParametricEditor()
    rng = np.random.default_rng(0)
    repaired = 0
    for item in items[::4]:
        for _ in range(3):
            proposal = rng.uniform(LOWER, UPPER)
            raw = ssim(item, editor.edit(item, proposal))
            theta, image, score = editor.plausible(item, proposal)
            assert score >= 0.5 and ssim(item, image) == pytest.approx(score)
            assert np.all(theta >= LOWER) and np.all(theta <= UPPER)
            if raw < 0.5:
                repaired += 1
                assert not np.allclose(theta, proposal)
            else:
                assert np.allclose(theta, proposal)
    assert repaired > 0  # uniform proposals do break the floor, and get moved back


def test_edit_parameters_out_of_bounds_are_rejected(items):
    editor = ParametricEditor()
    theta = IDENTITY.copy()
    theta[PARAMETERS.index("zoom")] = 2.0
    with pytest.raises(ValueError, match="zoom=2 not in"):
        editor.edit(items[0], theta)
    with pytest.raises(ValueError, match="shape"):
        editor.edit(items[0], IDENTITY[:5])


def test_non_rgb_or_wrong_dtype_images_are_rejected(items):
    editor = ParametricEditor()
    with pytest.raises(TypeError, match="uint8"):
        editor.edit(items[0].astype(np.float32) / 255, IDENTITY)
    with pytest.raises(ValueError, match="RGB"):
        editor.edit(items[0][..., 0], IDENTITY)


def test_attributes_follow_their_edits(items):
    editor = ParametricEditor()
    item = items[12]  # a calm photo: blending the grass texture into its background adds clutter
    base = measure(item, item)
    assert base[4] == pytest.approx(0.0, abs=0.01)  # scale: log zoom of the original onto itself
    for index, value, column, sign in [(0, 1.3, 0, 1), (1, 1.3, 1, 1), (2, 1.5, 2, 1), (3, 20.0, 3, 1),
                                       (5, 4.0, 5, -1), (6, 0.5, 5, 1)]:  # fmt: skip
        theta = IDENTITY.copy()
        theta[index] = value
        assert np.sign(measure(editor.edit(item, theta), item)[column] - base[column]) == sign, PARAMETERS[index]
    for zoom in (0.85, 1.15):
        theta = IDENTITY.copy()
        theta[4] = zoom
        assert measure(editor.edit(item, theta), item)[4] == pytest.approx(np.log(zoom), abs=0.02)
