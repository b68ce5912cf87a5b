"""The editor interface and the offline parametric editor (PIL / scikit-image) with the SSIM plausibility floor.

An editor maps (original image, edit parameters) to an edited image. Online this is an image generator driven by
an edit prompt ("base prior + instruction"); offline it is :class:`ParametricEditor`, whose parameters are

===========  ============  ========  ============================================================
parameter    bounds        identity  edit
===========  ============  ========  ============================================================
brightness   0.6 - 1.6     1         ``PIL.ImageEnhance.Brightness``
contrast     0.6 - 1.6     1         ``PIL.ImageEnhance.Contrast``
saturation   0 - 2         1         ``PIL.ImageEnhance.Color``
warmth       -30 - +30     0         R + w, B - w (0-255 scale)
zoom         0.75 - 1.4    1         centre crop and enlarge (> 1) or shrink into a reflected border (< 1)
blur         0 - 6         0         Gaussian blur of the background (outside the centre box), sigma in pixels
texture      0 - 1         0         blend of a scikit-image texture into the background
===========  ============  ========  ============================================================

The plausibility prior (the paper's base prior): every parameter inside its bounds and SSIM against the original
at least ``ssim_floor`` (0.5). :meth:`ParametricEditor.plausible` enforces the floor by moving a proposal back
toward an anchor (the identity, or the parent edit) by bisection.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from zoo.visual_persuasion.attributes import CENTRE, check_image, zoom_image

PARAMETERS = ("brightness", "contrast", "saturation", "warmth", "zoom", "blur", "texture")
LOWER = np.array([0.6, 0.6, 0.0, -30.0, 0.75, 0.0, 0.0])
UPPER = np.array([1.6, 1.6, 2.0, 30.0, 1.4, 6.0, 1.0])
IDENTITY = np.array([1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0])
#: Which parameters a proposer moves to change each logged attribute (the "common sense" of an LLM proposer).
ATTRIBUTE_PARAMETERS = {
    "brightness": ("brightness",),
    "contrast": ("contrast",),
    "saturation": ("saturation",),
    "warmth": ("warmth",),
    "scale": ("zoom",),
    "clutter": ("blur", "texture"),
}


def to_unit(theta: np.ndarray) -> np.ndarray:
    """Parameters scaled to [0, 1] by their bounds (the optimisers' coordinates)."""
    return (np.asarray(theta, dtype=np.float64) - LOWER) / (UPPER - LOWER)


def from_unit(unit: np.ndarray) -> np.ndarray:
    """Inverse of :func:`to_unit`."""
    return LOWER + np.asarray(unit, dtype=np.float64) * (UPPER - LOWER)


IDENTITY_UNIT = to_unit(IDENTITY)


def check_parameters(theta) -> np.ndarray:
    """``theta`` as float64 ``(7,)`` inside the bounds; otherwise a clear error naming the parameter."""
    theta = np.asarray(theta, dtype=np.float64)
    if theta.shape != (len(PARAMETERS),):
        raise ValueError(f"edit parameters must have shape ({len(PARAMETERS)},) for {PARAMETERS}, got {theta.shape}")
    if not np.all(np.isfinite(theta)):
        raise ValueError(f"edit parameters must be finite, got {theta}")
    bad = [
        f"{name}={value:g} not in [{lo:g}, {hi:g}]"
        for name, value, lo, hi in zip(PARAMETERS, theta, LOWER, UPPER, strict=True)
        if not lo - 1e-9 <= value <= hi + 1e-9
    ]
    if bad:
        raise ValueError("edit parameters out of bounds: " + "; ".join(bad))
    return np.clip(theta, LOWER, UPPER)


class Editor:
    """The editor interface: ``edit(original, theta) -> image`` and the plausibility check.

    An online editor (an image generator prompted with "base prior + instruction") implements the same two methods;
    the optimisers only call these.
    """

    ssim_floor: float = 0.5

    def edit(self, original: np.ndarray, theta: np.ndarray) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def plausible(self, original: np.ndarray, theta: np.ndarray, anchor: np.ndarray | None = None):
        raise NotImplementedError  # pragma: no cover - interface

    def random_plausible(self, original: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A random plausible edit: every parameter uniform in its bounds, then the SSIM floor (:meth:`plausible`)."""
        return self.plausible(original, rng.uniform(LOWER, UPPER))[1]


SSIM_SIDE = 28  # SSIM is taken at the coarse (composition) scale: images box-downsampled to 28 x 28


def ssim(original: np.ndarray, edited: np.ndarray, side: int | None = SSIM_SIDE) -> float:
    """``skimage.metrics.structural_similarity`` of two uint8 RGB images (channel axis last), at the coarse scale.

    Both images are box-downsampled to ``side`` x ``side`` first (``None``: full resolution). At full resolution
    on 112 px items any zoom beyond about 3% already falls below SSIM 0.5 (the 7 x 7 windows no longer align), so
    the spec's zoom range would be void; at 28 px a 10% zoom keeps about 0.65-0.85.

    Args:
        original: uint8 ``(H, W, 3)``.
        edited: uint8 ``(H, W, 3)``, same shape.
        side: Side the images are reduced to, or None.
    """
    from PIL import Image
    from skimage.metrics import structural_similarity

    if original.shape != edited.shape:
        raise ValueError(f"SSIM needs images of one shape, got {original.shape} and {edited.shape}")
    if side is not None and original.shape[0] > side:
        original = np.asarray(Image.fromarray(original).resize((side, side), Image.Resampling.BOX))
        edited = np.asarray(Image.fromarray(edited).resize((side, side), Image.Resampling.BOX))
    return float(structural_similarity(original, edited, channel_axis=-1, data_range=255))


@lru_cache(maxsize=8)
def background_mask(size: int) -> np.ndarray:
    """``(size, size, 1)`` weights: 1 outside the centre box, 0 inside, the edge feathered (Gaussian, sigma 2)."""
    from scipy.ndimage import gaussian_filter

    mask = np.ones((size, size))
    lo, hi = int(round(CENTRE * size)), int(round((1 - CENTRE) * size))
    mask[lo:hi, lo:hi] = 0.0
    return gaussian_filter(mask, sigma=2.0)[..., None].astype(np.float32)


@dataclass
class ParametricEditor(Editor):
    """PIL / scikit-image edits of :data:`PARAMETERS` (the offline stand-in for an image generator).

    Args:
        ssim_floor: Smallest SSIM against the original a plausible edit keeps.
        texture_name: The scikit-image texture blended into the background (brick, grass or gravel).
        bisection_steps: Bisection steps of :meth:`plausible`.
    """

    ssim_floor: float = 0.5
    texture_name: str = "grass"
    bisection_steps: int = 5

    def edit(self, original: np.ndarray, theta) -> np.ndarray:
        """The edited image: zoom, background (blur, texture), then brightness, contrast, saturation, warmth.

        Args:
            original: uint8 ``(H, W, 3)``, square.
            theta: Parameters in the order of :data:`PARAMETERS`, inside the bounds.
        """
        from PIL import Image, ImageEnhance

        original = check_image(original)
        brightness, contrast, saturation, warmth, zoom, blur, texture_weight = check_parameters(theta)
        image = zoom_image(original, float(zoom))
        if blur > 0 or texture_weight > 0:
            image = self._background(image, float(blur), float(texture_weight))
        picture = Image.fromarray(image)
        for enhancer, factor in (
            (ImageEnhance.Brightness, brightness),
            (ImageEnhance.Contrast, contrast),
            (ImageEnhance.Color, saturation),
        ):
            if factor != 1.0:
                picture = enhancer(picture).enhance(float(factor))
        image = np.asarray(picture)
        if warmth != 0.0:
            shifted = image.astype(np.float64)
            shifted[..., 0] += warmth
            shifted[..., 2] -= warmth
            image = np.clip(np.round(shifted), 0, 255).astype(np.uint8)
        return np.ascontiguousarray(image)

    def _background(self, image: np.ndarray, blur: float, texture_weight: float) -> np.ndarray:
        from scipy.ndimage import gaussian_filter

        from zoo.visual_persuasion.images import texture

        size = image.shape[0]
        mask = background_mask(size)
        out = image.astype(np.float32)
        if blur > 0:
            blurred = gaussian_filter(out, sigma=(blur, blur, 0))
            out = mask * blurred + (1 - mask) * out
        if texture_weight > 0:
            swap = texture(self.texture_name, size).astype(np.float32)
            swap = swap * (out.mean() / max(swap.mean(), 1e-6))  # keep the background's brightness
            weight = texture_weight * mask
            out = weight * swap + (1 - weight) * out
        return np.clip(np.round(out), 0, 255).astype(np.uint8)

    def plausible(self, original: np.ndarray, theta, anchor=None) -> tuple[np.ndarray, np.ndarray, float]:
        """The edit of ``theta`` if it keeps SSIM >= the floor, else the furthest point toward it from ``anchor``
        that does (bisection on the segment; ``anchor`` must itself be plausible, the identity by default).

        Returns:
            ``(theta, image, ssim)`` of the plausible edit.
        """
        theta = check_parameters(theta)
        anchor = IDENTITY if anchor is None else check_parameters(anchor)
        image = self.edit(original, theta)
        score = ssim(original, image)
        if score >= self.ssim_floor:
            return theta, image, score
        best = (anchor, self.edit(original, anchor), None)
        low, high = 0.0, 1.0
        for _ in range(self.bisection_steps):
            middle = 0.5 * (low + high)
            candidate = anchor + middle * (theta - anchor)
            image = self.edit(original, candidate)
            score = ssim(original, image)
            if score >= self.ssim_floor:
                low, best = middle, (candidate, image, score)
            else:
                high = middle
        theta, image, score = best
        if score is None:
            score = ssim(original, image)
            if score < self.ssim_floor:
                raise ValueError(f"the anchor edit is not plausible (SSIM {score:.3f} < {self.ssim_floor})")
        return theta, image, score
