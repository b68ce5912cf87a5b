"""Tier 2 OOD sets that need semantics, and the pixel-statistics reference that the old sets fall to.

The far-OOD sets of tier 2 (MNIST, textures, Crafter and Atari frames) are told apart from Fashion-MNIST by
pixel statistics alone: how much of the image is dark, and how colourful it is. The sets here are built so
that pixel statistics cannot tell them apart, and only what the object *is* can:

* ``icons``: pictograms of other object categories (umbrella, airplane, scissors, chess pieces, anchor, ...)
  drawn from the DejaVu Sans font that the system ships, white on black at 28 px like Fashion-MNIST, with a
  random size, rotation, shift and weight;
* ``sprites``: Crafter's object sprites (cow, zombie, skeleton, sword, pickaxe, table, furnace, ...),
  greyscale, on black, at 28 px, with a random size, shift and mirror.

Every image is then **intensity-matched** to a random Fashion-MNIST training image: its pixels are ranked
(the object brightest, ties broken by a blur, so extra bright pixels grow around the object) and take the
reference image's sorted pixel values, so each OOD image has exactly the grey-level histogram of a
Fashion-MNIST image. The categories are split in two: half for validation (``*_val``, tuning and the
headroom gate), half for testing (``*_test``), so no test category was seen in tuning.

:func:`pixel_stats` gives every image's grey-level histogram and colourfulness (Hasler and Suesstrunk,
2003); :class:`PixelStatsReference` scores an image by how far its dark-pixel fraction (and colourfulness)
lie from the Fashion-MNIST training statistics.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zoo._errors import ZooError

FONT_DIR = "/usr/share/fonts/truetype/dejavu"
FONTS = ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf")
#: Pictograms of object categories in DejaVu Sans (code point: category), none of them clothing, shoes or bags.
ICONS = {
    0x2600: "sun", 0x2601: "cloud", 0x2602: "umbrella", 0x2603: "snowman", 0x2604: "comet", 0x2605: "star",
    0x260E: "telephone", 0x2615: "cup", 0x2618: "shamrock", 0x2620: "skull", 0x261B: "pointing hand",
    0x262F: "yin yang", 0x263A: "smiling face", 0x263D: "moon", 0x2654: "chess king", 0x2655: "chess queen",
    0x2656: "chess rook", 0x2657: "chess bishop", 0x2658: "chess knight", 0x2659: "chess pawn",
    0x265A: "chess king", 0x265B: "chess queen", 0x265C: "chess rook", 0x265D: "chess bishop",
    0x265E: "chess knight", 0x265F: "chess pawn", 0x2660: "spade", 0x2663: "club", 0x2665: "heart",
    0x2666: "diamond", 0x2668: "hot springs", 0x2669: "musical note", 0x266B: "musical notes",
    0x267B: "recycling symbol", 0x267F: "wheelchair", 0x2680: "die", 0x2684: "die", 0x2690: "flag",
    0x2691: "flag", 0x2692: "hammer and pick", 0x2693: "anchor", 0x2694: "crossed swords", 0x2696: "scales",
    0x2697: "alembic", 0x2698: "flower", 0x2699: "gear", 0x269B: "atom", 0x269C: "fleur-de-lis",
    0x26A0: "warning sign", 0x26A1: "lightning", 0x26B0: "coffin", 0x26B1: "urn", 0x26C0: "draughts piece",
    0x2702: "scissors", 0x2708: "airplane", 0x2709: "envelope", 0x270C: "victory hand", 0x270D: "writing hand",
    0x270F: "pencil", 0x2712: "pen nib", 0x2744: "snowflake", 0x273F: "florette", 0x2764: "heart",
    0x2302: "house", 0x2328: "keyboard",
}  # fmt: skip
#: Crafter sprites of objects (with a transparent background), by category.
SPRITES = (
    "cow", "zombie", "skeleton", "player", "sapling", "plant", "plant-ripe", "plant-young", "table", "furnace",
    "wood_sword", "stone_sword", "iron_sword", "wood_pickaxe", "stone_pickaxe", "iron_pickaxe", "diamond",
    "coal", "iron", "food",
)  # fmt: skip
SEMANTIC_SETS = ("icons_val", "icons_test", "sprites_val", "sprites_test")
SEMANTIC_TEST = ("icons_test", "sprites_test")
SEMANTIC_VAL = ("icons_val", "sprites_val")
SET_SIZE = 800
SIDE = 28


def split_categories(names, part: str) -> list:
    """Half of the categories (alternate ones, in sorted order): ``val`` or ``test``; disjoint by category."""
    if part not in ("val", "test"):
        raise ZooError(f"part must be 'val' or 'test', got {part!r}")
    categories = sorted(set(names))
    chosen = set(categories[0 if part == "val" else 1 :: 2])
    return [name for name in names if name in chosen]


# ------------------------------------------------------------------------------------------------ matching


def match_intensity(image: np.ndarray, reference: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``image`` (uint8, 2-D) with exactly the grey-level histogram of ``reference`` (same number of pixels).

    Pixels are ranked by brightness, ties broken by a Gaussian blur of the image (bright pixels next to the
    object before far ones) and then at random; the i-th ranked pixel takes the i-th sorted reference value.
    """
    from scipy.ndimage import gaussian_filter

    image = np.asarray(image, np.float64)
    reference = np.asarray(reference)
    if image.ndim != 2 or image.size != reference.size:
        raise ZooError(f"image {image.shape} and reference {reference.shape} must be 2-D with one pixel count")
    key = image * 1e3 + gaussian_filter(image, 1.5) + rng.uniform(0, 1e-3, image.shape)
    out = np.empty(image.size, np.uint8)
    out[np.argsort(key, axis=None, kind="stable")] = np.sort(reference, axis=None)
    return out.reshape(image.shape)


def _place(mask: np.ndarray, rng: np.random.Generator, lo: float = 0.55, hi: float = 0.95) -> np.ndarray:
    """A grey object (float, 0-255) cropped to its box, resized to a random share of the frame, randomly shifted."""
    from skimage.transform import resize

    ys, xs = np.nonzero(mask > 8)
    if len(ys) == 0:
        raise ZooError("an empty glyph or sprite")
    crop = mask[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1].astype(np.float64)
    scale = rng.uniform(lo, hi) * SIDE / max(crop.shape)
    h, w = (max(1, min(SIDE, int(round(d * scale)))) for d in crop.shape)
    crop = resize(crop, (h, w), anti_aliasing=True, preserve_range=True, order=1)
    frame = np.zeros((SIDE, SIDE))
    top, left = int(rng.integers(0, SIDE - h + 1)), int(rng.integers(0, SIDE - w + 1))
    frame[top : top + h, left : left + w] = crop
    return frame


def fmnist_val_index() -> np.ndarray:
    """The 2,000 Fashion-MNIST training images held out as the ID validation split (tuning, calibration)."""
    return np.random.default_rng(12345).choice(60_000, size=2000, replace=False)


def _references(count: int, seed: int) -> np.ndarray:
    """``count`` Fashion-MNIST training images, none of the validation split, as intensity references."""
    from zoo.common.datasets import fashion_mnist

    images = fashion_mnist("train")[0]
    pool = np.setdiff1d(np.arange(len(images)), fmnist_val_index())
    return images[np.random.default_rng([seed, 3]).choice(pool, size=count, replace=True)]


def render_icons(codepoints, count: int, seed: int) -> np.ndarray:
    """``count`` glyph images (uint8, 28 px, white on black) of the given code points, before matching."""
    from pathlib import Path

    from PIL import Image, ImageDraw, ImageFont

    missing = [name for name in FONTS if not (Path(FONT_DIR) / name).is_file()]
    if missing:
        raise ZooError(
            f"the icons OOD set draws DejaVu Sans glyphs from {FONT_DIR}, which lacks {missing}: install the Debian "
            "package fonts-dejavu-core (tools/bootstrap.sh --debian-only does it as root)"
        )
    fonts = [ImageFont.truetype(f"{FONT_DIR}/{name}", 96) for name in FONTS]
    rng = np.random.default_rng(seed)
    out = np.zeros((count, SIDE, SIDE), np.uint8)
    for i in range(count):
        char = chr(int(codepoints[rng.integers(len(codepoints))]))
        font = fonts[rng.integers(len(FONTS))]
        canvas = Image.new("L", (160, 160), 0)
        ImageDraw.Draw(canvas).text((20, 10), char, fill=255, font=font)
        canvas = canvas.rotate(float(rng.uniform(-15, 15)), resample=Image.BILINEAR)
        out[i] = np.clip(_place(np.asarray(canvas), rng), 0, 255).astype(np.uint8)
    return out


def sprite_images(names, count: int, seed: int) -> np.ndarray:
    """``count`` greyscale Crafter sprite images (uint8, 28 px, object on black), before matching."""
    import os

    from PIL import Image

    try:
        import crafter
    except ImportError:
        raise ZooError("Crafter's sprites need crafter: pip install 'icml26-zoo[games]'") from None
    folder = os.path.join(os.path.dirname(crafter.__file__), "assets")
    sprites = []
    for name in names:
        rgba = np.asarray(Image.open(os.path.join(folder, f"{name}.png")).convert("RGBA"), np.float64)
        grey = rgba[..., :3] @ np.array([0.299, 0.587, 0.114])
        sprites.append(np.where(rgba[..., 3] > 127, np.maximum(grey, 24.0), 0.0))  # keep dark object pixels visible
    rng = np.random.default_rng(seed)
    out = np.zeros((count, SIDE, SIDE), np.uint8)
    for i in range(count):
        sprite = sprites[rng.integers(len(sprites))]
        big = np.kron(sprite, np.ones((6, 6)))  # nearest-neighbour upscaling keeps the pixel-art edges
        if rng.uniform() < 0.5:
            big = big[:, ::-1]
        out[i] = np.clip(_place(big, rng, 0.75, 1.0), 0, 255).astype(np.uint8)
    return out


def semantic_set(name: str, count: int = SET_SIZE) -> np.ndarray:
    """One intensity-matched semantic OOD set (uint8 ``(count, 28, 28)``), e.g. ``icons_test``."""
    if name not in SEMANTIC_SETS:
        raise ZooError(f"unknown semantic set {name!r}; one of {', '.join(SEMANTIC_SETS)}")
    kind, part = name.split("_")
    seed = SEMANTIC_SETS.index(name)
    if kind == "icons":
        chosen = split_categories(list(ICONS.values()), part)
        raw = render_icons([cp for cp, cat in ICONS.items() if cat in chosen], count, seed)
    else:
        raw = sprite_images(split_categories(list(SPRITES), part), count, seed)
    rng = np.random.default_rng([seed, 5])
    references = _references(count, seed)
    most = 3 if kind == "icons" else 0  # sprites are filled shapes; dilating pixel art only blurs it
    return np.stack([match_intensity(thicken(image, ref, most), ref, rng) for image, ref in zip(raw, references)])


def thicken(image: np.ndarray, reference: np.ndarray, most: int = 3) -> np.ndarray:
    """``image`` grey-dilated (3x3) up to ``most`` times while its object covers under 85% of the reference's
    (so the intensity match fills the object rather than a halo around it)."""
    from scipy.ndimage import grey_dilation

    target = 0.85 * (np.asarray(reference) > 0).mean()
    for _ in range(most):
        if (image > 8).mean() >= target:
            break
        image = grey_dilation(image, size=(3, 3))
    return image


# ------------------------------------------------------------------------------------------------ pixel stats

HIST_BINS = 32  # grey levels 0-255 in bins of 8


def pixel_stats(images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per image: the normalised grey-level histogram ``(N, 32)`` and the colourfulness ``(N,)``.

    Grey = the mean of the colour channels; colourfulness (Hasler and Suesstrunk) = ``sqrt(std(rg)^2 +
    std(yb)^2) + 0.3 sqrt(mean(rg)^2 + mean(yb)^2)`` with ``rg = R - G``, ``yb = (R + G)/2 - B`` (0 for grey).
    """
    x = np.asarray(images, np.float64)
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4 or x.shape[-1] not in (1, 3):
        raise ZooError(f"images must be (N, H, W) or (N, H, W, 1|3), got {np.shape(images)}")
    grey = x.mean(axis=-1).reshape(len(x), -1)
    bins = np.clip((grey // (256 // HIST_BINS)).astype(int), 0, HIST_BINS - 1)
    hist = np.stack([np.bincount(row, minlength=HIST_BINS) for row in bins]) / grey.shape[1]
    if x.shape[-1] == 1:
        return hist, np.zeros(len(x))
    r, g, b = (x[..., c].reshape(len(x), -1) for c in range(3))
    rg, yb = r - g, 0.5 * (r + g) - b
    colour = np.hypot(rg.std(axis=1), yb.std(axis=1)) + 0.3 * np.hypot(rg.mean(axis=1), yb.mean(axis=1))
    return hist, colour


def dark_fraction(hist: np.ndarray, threshold: int) -> np.ndarray:
    """Share of pixels with grey level below ``threshold`` (a multiple of 8) from :func:`pixel_stats` histograms."""
    if threshold % (256 // HIST_BINS) or not 0 < threshold <= 256:
        raise ZooError(f"the dark threshold must be a multiple of {256 // HIST_BINS} in (0, 256], got {threshold}")
    return np.asarray(hist)[:, : threshold // (256 // HIST_BINS)].sum(axis=1)


@dataclass(frozen=True)
class PixelStatsReference:
    """The pixel-statistics reference: higher = more like the Fashion-MNIST training images.

    ``score = -|dark(x) - median| / IQR - weight * colourfulness(x) / 10``, ``dark`` = share of pixels below
    ``threshold``; median and inter-quartile range of ``dark`` over the training images (:meth:`fit`).
    """

    threshold: int = 32
    weight: float = 1.0
    median: float = 0.5
    scale: float = 0.1

    @classmethod
    def fit(cls, hist: np.ndarray, threshold: int = 32, weight: float = 1.0) -> PixelStatsReference:
        dark = dark_fraction(hist, threshold)
        q1, median, q3 = np.percentile(dark, [25, 50, 75])
        return cls(int(threshold), float(weight), float(median), float(max(q3 - q1, 1e-3)))

    def __call__(self, hist: np.ndarray, colour: np.ndarray) -> np.ndarray:
        dark = dark_fraction(hist, self.threshold)
        return -np.abs(dark - self.median) / self.scale - self.weight * np.asarray(colour, np.float64) / 10.0


PIXEL_GRID = {"threshold": [8, 16, 32, 64, 128], "weight": [0.0, 0.03, 0.1, 0.3, 1.0, 10.0]}  # 30 trials


def tune_pixel_stats(fit_hist: np.ndarray, val_id: tuple, val_ood: tuple) -> tuple[PixelStatsReference, float, int]:
    """The full :data:`PIXEL_GRID`, fitted on ``fit_hist`` (training images), chosen by validation AUROC.

    ``val_id`` and ``val_ood`` are ``(hist, colour)`` pairs of the validation ID and OOD images.
    """
    from zoo.renyi_neglabel_ood.pipeline import ood_metrics

    best, best_value, trials = None, -np.inf, 0
    for threshold in PIXEL_GRID["threshold"]:
        for weight in PIXEL_GRID["weight"]:
            reference = PixelStatsReference.fit(fit_hist, threshold, weight)
            value = ood_metrics(reference(*val_id), reference(*val_ood))["auroc"]
            trials += 1
            if value > best_value:
                best, best_value = reference, value
    return best, float(best_value), trials
