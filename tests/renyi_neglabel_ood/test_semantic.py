"""The semantic OOD sets' construction and the pixel-statistics reference (hand-computed values)."""

import numpy as np
import pytest

from zoo._errors import ZooError
from zoo.renyi_neglabel_ood.evaluate import calibrate
from zoo.renyi_neglabel_ood.semantic import (
    ICONS,
    PixelStatsReference,
    dark_fraction,
    match_intensity,
    pixel_stats,
    split_categories,
    thicken,
)


def test_intensity_matching_copies_the_reference_histogram_and_keeps_the_object_brightest():
    rng = np.random.default_rng(0)
    image = np.zeros((28, 28), np.uint8)
    image[10:18, 10:18] = 255  # a 64-pixel object
    reference = rng.integers(0, 256, size=(28, 28)).astype(np.uint8)
    out = match_intensity(image, reference, rng)
    assert np.array_equal(np.sort(out, axis=None), np.sort(reference, axis=None))
    brightest = np.sort(reference, axis=None)[-64:]
    assert np.array_equal(np.sort(out[10:18, 10:18], axis=None), brightest)
    with pytest.raises(ZooError):
        match_intensity(image, reference[:10], rng)


def test_thicken_grows_a_thin_object_towards_the_reference_coverage_only():
    image = np.zeros((28, 28), np.uint8)
    image[14, 5:20] = 255  # a 15-pixel line
    full = np.full((28, 28), 9, np.uint8)  # every reference pixel is bright
    assert (thicken(image, full, most=1) > 8).sum() == 3 * 17  # one 3x3 dilation
    assert np.array_equal(thicken(image, np.zeros((28, 28), np.uint8)), image)  # already covers enough
    assert np.array_equal(thicken(image, full, most=0), image)


def test_pixel_stats_by_hand():
    grey = np.zeros((1, 4, 4), np.uint8)
    grey[0, :2] = 200  # half the pixels bright
    hist, colour = pixel_stats(grey)
    assert hist.shape == (1, 32) and colour[0] == 0.0
    assert dark_fraction(hist, 8)[0] == pytest.approx(0.5)
    assert dark_fraction(hist, 208)[0] == pytest.approx(1.0) and dark_fraction(hist, 200)[0] == pytest.approx(0.5)
    red = np.zeros((1, 2, 2, 3))
    red[..., 0] = 255  # rg = 255 and yb = 127.5 everywhere: no spread, colourfulness = 0.3 * |(255, 127.5)|
    _, colour = pixel_stats(red)
    assert colour[0] == pytest.approx(0.3 * np.hypot(255, 127.5))
    with pytest.raises(ZooError):
        dark_fraction(hist, 12)
    with pytest.raises(ZooError):
        pixel_stats(np.zeros((2, 4, 4, 2)))


def test_the_pixel_reference_is_fitted_on_training_statistics_and_penalises_distance_and_colour():
    hist = np.zeros((4, 32))
    hist[:, 0] = [0.2, 0.4, 0.6, 0.8]  # dark fractions 0.2, 0.4, 0.6, 0.8 (the rest bright)
    hist[:, -1] = 1 - hist[:, 0]
    ref = PixelStatsReference.fit(hist, threshold=8, weight=2.0)
    assert ref.median == pytest.approx(0.5) and ref.scale == pytest.approx(0.65 - 0.35)
    probe = np.zeros((3, 32))
    probe[:, 0] = [0.5, 0.8, 0.5]
    probe[:, -1] = 1 - probe[:, 0]
    scores = ref(probe, np.array([0.0, 0.0, 10.0]))
    assert scores == pytest.approx([0.0, -0.3 / 0.3, -2.0])


def test_semantic_categories_split_into_disjoint_halves():
    names = list(ICONS.values())
    val, test = set(split_categories(names, "val")), set(split_categories(names, "test"))
    assert val and test and not val & test and val | test == set(names)
    assert not {"shirt", "shoe", "bag", "dress", "coat", "sandal", "boot"} & set(names)  # no ID category
    with pytest.raises(ZooError):
        split_categories(names, "train")


def test_calibration_takes_the_smallest_share_that_reaches_the_target():
    drops = {0.1: 0.01, 0.2: 0.02, 0.3: 0.05, 0.5: 0.04}
    assert calibrate(drops.get, list(drops), 0.03) == (0.3, 0.05)
    assert calibrate(drops.get, list(drops), 0.2) == (0.3, 0.05)  # none reaches it: the largest drop's share
    assert calibrate(drops.get, [0.5, 0.1], 0.01) == (0.1, 0.01)  # in increasing order whatever the grid's


def test_icons_are_white_glyphs_on_black_and_a_missing_font_says_which_package_to_install(monkeypatch):
    import zoo.renyi_neglabel_ood.semantic as semantic

    images = semantic.render_icons(list(ICONS)[:3], count=2, seed=0)
    assert images.shape == (2, 28, 28) and images.dtype == np.uint8
    assert images.max() > 200 and images[:, 0, 0].max() == 0  # a drawn glyph, black corners
    assert np.array_equal(images, semantic.render_icons(list(ICONS)[:3], count=2, seed=0))
    monkeypatch.setattr(semantic, "FONT_DIR", "/nonexistent/fonts")
    with pytest.raises(ZooError, match="fonts-dejavu-core"):
        semantic.render_icons(list(ICONS)[:3], count=2, seed=0)
