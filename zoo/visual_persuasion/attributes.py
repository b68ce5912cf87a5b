"""The six logged attributes a(x) of an image, the hidden component, and the hidden utility.

Attributes are measured on the (edited) image itself, never read from the editor's parameters:

=========  ==========================================================================================
brightness mean luminance (``skimage.color.rgb2gray``), in [0, 1]
contrast   RMS contrast: standard deviation of the luminance
saturation mean HSV saturation (``skimage.color.rgb2hsv``, on every other pixel)
warmth     mean of R - B, in units of the 0-255 range divided by 255
scale      log of the zoom that best registers the original onto the image (normalised cross-correlation of
           the luminance inside the centre box, over a grid of zooms refined by a parabola): the object's scale
clutter    background clutter: mean Sobel magnitude (``skimage.filters.sobel``) outside the centre box
=========  ==========================================================================================

The hidden component, outside the six logged attributes, is the centre detail: the mean Sobel magnitude inside
the centre box. The hidden utility is ``scale * (taste . z(a(x)) + hidden_weight * z(detail(x)))`` with z-scores
from the heads' training edits; the judges' heads regress EfficientNet features onto it, so they respond to the
image, and the revealed-preference analysis (which only sees the six attributes) cannot reproduce it exactly.

``scale`` (:data:`UTILITY_SCALE`, a reconstructed choice) puts the utility in the units of the choice rule's
temperature: unscaled, a random plausible edit moves the judges' utility by about 4.5 T_c (standard deviation),
so every search saturates at P ~ 0.99 and the task cannot tell optimisers apart; 0.3 is the largest scale at
which random search stays below the headroom gate on the validation items (``zoo/visual_persuasion/module.py``,
deviation 10).
"""

from __future__ import annotations

import numpy as np

ATTRIBUTES = ("brightness", "contrast", "saturation", "warmth", "scale", "clutter")
THEMES = {  # autointerp's theme text by (attribute, sign of its coefficient)
    ("brightness", 1): "brighter lighting",
    ("brightness", -1): "darker, moodier lighting",
    ("contrast", 1): "punchier contrast",
    ("contrast", -1): "softer, flatter contrast",
    ("saturation", 1): "more vivid colours",
    ("saturation", -1): "muted colours",
    ("warmth", 1): "warmer colour temperature",
    ("warmth", -1): "cooler colour temperature",
    ("scale", 1): "larger subject (closer framing)",
    ("scale", -1): "smaller subject (wider framing)",
    ("clutter", 1): "busier background",
    ("clutter", -1): "less cluttered background",
}
DEFAULT_TASTE = (0.8, 0.2, 0.5, 0.3, 0.6, -0.4)
HIDDEN_WEIGHT = 0.3
UTILITY_SCALE = 0.3  # chosen on validation: the headroom calibration of tune.py (tuning.json)
CENTRE = 0.25  # the centre box spans [CENTRE, 1 - CENTRE] of each side
SCALE_GRID = np.exp(np.linspace(np.log(0.70), np.log(1.50), 33))


def centre_mask(size: int) -> np.ndarray:
    """Boolean ``(size, size)`` mask of the centre box."""
    lo, hi = int(round(CENTRE * size)), int(round((1 - CENTRE) * size))
    mask = np.zeros((size, size), dtype=bool)
    mask[lo:hi, lo:hi] = True
    return mask


def image_key(image: np.ndarray) -> bytes:
    """A 16-byte digest of an image's shape and pixels (the cache key of judges and meters)."""
    import hashlib

    digest = hashlib.blake2b(digest_size=16)
    digest.update(str(image.shape).encode())
    digest.update(np.ascontiguousarray(image).tobytes())
    return digest.digest()


def check_image(image: np.ndarray) -> np.ndarray:
    """``image`` as uint8 ``(H, W, 3)``; anything else raises a clear error."""
    image = np.asarray(image)
    if image.dtype != np.uint8:
        raise TypeError(f"images must be uint8 RGB arrays (H, W, 3), got dtype {image.dtype}")
    if image.ndim != 3 or image.shape[-1] != 3:
        raise ValueError(f"images must be RGB arrays (H, W, 3), got shape {image.shape}")
    return image


def zoom_image(image: np.ndarray, zoom: float) -> np.ndarray:
    """Zoom about the centre: ``zoom > 1`` crops the centre and enlarges it, ``zoom < 1`` shrinks the image into
    a reflected border. ``zoom == 1`` returns the image unchanged."""
    from PIL import Image

    if zoom == 1.0:
        return image.copy()
    size = image.shape[0]
    if zoom > 1.0:
        side = size / zoom
        lo = (size - side) / 2
        box = (lo, lo, lo + side, lo + side)
        return np.asarray(Image.fromarray(image).resize((size, size), Image.Resampling.BICUBIC, box=box))
    inner = max(2, int(round(size * zoom)))
    small = np.asarray(Image.fromarray(image).resize((inner, inner), Image.Resampling.LANCZOS))
    before = (size - inner) // 2
    after = size - inner - before
    return np.pad(small, ((before, after), (before, after), (0, 0)), mode="reflect")


class ScaleMeter:
    """Estimates the zoom between an original and an edited image (cached zoomed originals per reference)."""

    def __init__(self) -> None:
        self._bank: dict[bytes, np.ndarray] = {}

    def _references(self, original: np.ndarray) -> np.ndarray:
        from skimage.color import rgb2gray

        key = image_key(original)
        if key not in self._bank:
            mask = centre_mask(original.shape[0])
            rows = []
            for zoom in SCALE_GRID:
                values = rgb2gray(zoom_image(original, float(zoom)))[mask]
                values = values - values.mean()
                rows.append(values / (np.linalg.norm(values) + 1e-9))
            if len(self._bank) > 512:
                self._bank.clear()
            self._bank[key] = np.stack(rows)
        return self._bank[key]

    def __call__(self, image: np.ndarray, original: np.ndarray) -> float:
        from skimage.color import rgb2gray

        values = rgb2gray(image)[centre_mask(image.shape[0])]
        values = values - values.mean()
        scores = self._references(original) @ (values / (np.linalg.norm(values) + 1e-9))
        best = int(np.argmax(scores))
        logs = np.log(SCALE_GRID)
        if 0 < best < len(scores) - 1:  # parabola through the peak and its neighbours
            left, mid, right = scores[best - 1 : best + 2]
            curvature = left - 2 * mid + right
            offset = 0.5 * (left - right) / curvature if curvature < 0 else 0.0
            return float(logs[best] + np.clip(offset, -0.5, 0.5) * (logs[1] - logs[0]))
        return float(logs[best])


SCALE_METER = ScaleMeter()


def measure(image: np.ndarray, original: np.ndarray) -> np.ndarray:
    """The six attributes and the hidden centre detail of ``image`` (edited from ``original``): float64 ``(7,)``.

    Args:
        image: uint8 ``(H, W, 3)`` edited image.
        original: uint8 ``(H, W, 3)`` unedited item (the reference for the object's scale).
    """
    from skimage.color import rgb2gray, rgb2hsv
    from skimage.filters import sobel

    image, original = check_image(image), check_image(original)
    grey = rgb2gray(image)
    edges = sobel(grey)
    mask = centre_mask(image.shape[0])
    rgb = image.astype(np.float64)
    return np.array(
        [
            grey.mean(),
            grey.std(),
            rgb2hsv(image[::2, ::2])[..., 1].mean(),  # every other pixel: the mean is the same, 4x cheaper
            (rgb[..., 0] - rgb[..., 2]).mean() / 255.0,
            SCALE_METER(image, original),
            edges[~mask].mean(),
            edges[mask].mean(),
        ]
    )


def hidden_utility(
    raw: np.ndarray,
    mean: np.ndarray,
    std: np.ndarray,
    taste=DEFAULT_TASTE,
    hidden_weight=HIDDEN_WEIGHT,
    scale: float = UTILITY_SCALE,
) -> np.ndarray:
    """``scale * (taste . z(a) + hidden_weight * z(detail))`` for measured rows ``raw`` ``(N, 7)``.

    Args:
        raw: Rows of :func:`measure`.
        mean: Per-column mean (z-scores).
        std: Per-column standard deviation.
        taste: The six attribute weights (the disclosed ground truth).
        hidden_weight: Weight of the hidden centre detail.
        scale: The utility's scale (in the units of the choice rule's ``U(first) - U(second)``).
    """
    z = (np.asarray(raw) - mean) / std
    return scale * (z[:, :6] @ np.asarray(taste, dtype=np.float64) + hidden_weight * z[:, 6])
