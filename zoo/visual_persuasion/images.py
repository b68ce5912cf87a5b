"""Base items: random crops of the colour photographs bundled with scikit-image (offline).

Eight colour photos stand in for the paper's product / house / hotel / people images. Each photo gives 4 test
crops, 2 validation crops and ``train_crops_per_photo`` further crops for fitting the utility heads; every crop
covers at least 60% of the photo's area and is resized to ``size`` x ``size``. Crops are drawn from one numpy
generator per split, so the test and validation items are the same for every seed of an evaluation.
"""

from __future__ import annotations

from functools import cache

import numpy as np

PHOTOS = (
    "astronaut",
    "chelsea",
    "coffee",
    "rocket",
    "stereo_motorcycle",
    "hubble_deep_field",
    "retina",
    "immunohistochemistry",
)
TEXTURES = ("brick", "grass", "gravel")
SPLIT_SEEDS = {"test": 1401, "validation": 1402}  # fixed: items do not change with the evaluation seed
CROPS_PER_PHOTO = {"test": 4, "validation": 2}
MIN_AREA = 0.6


@cache
def photo(name: str) -> np.ndarray:
    """A scikit-image colour photo as uint8 ``(H, W, 3)``."""
    from skimage import data

    if name not in PHOTOS:
        raise ValueError(f"unknown photo {name!r}; one of {', '.join(PHOTOS)}")
    image = data.stereo_motorcycle()[0] if name == "stereo_motorcycle" else getattr(data, name)()
    return np.ascontiguousarray(image[..., :3])


@cache
def texture(name: str, size: int) -> np.ndarray:
    """A scikit-image grey texture (brick, grass, gravel) as uint8 ``(size, size, 3)``, for background swaps.

    The top-left ``size`` x ``size`` of the 512 px texture at its own resolution (tiled if ``size`` > 512), so the
    swap adds the texture's fine detail instead of a smoothed-out version.
    """
    from skimage import data

    if name not in TEXTURES:
        raise ValueError(f"unknown texture {name!r}; one of {', '.join(TEXTURES)}")
    grey = getattr(data, name)()
    reps = -(-size // grey.shape[0])
    grey = np.tile(grey, (reps, reps))[:size, :size]
    return np.repeat(grey[..., None], 3, axis=-1)


def random_crop(image: np.ndarray, rng: np.random.Generator, size: int, min_area: float = MIN_AREA) -> np.ndarray:
    """A random crop of at least ``min_area`` of the image's area (aspect 3:4 to 4:3), resized to a square.

    Args:
        image: uint8 ``(H, W, 3)``.
        rng: Source of the crop's position and shape.
        size: Side of the square output.
        min_area: Smallest fraction of the image's area the crop covers.
    """
    from PIL import Image

    height, width = image.shape[:2]
    while True:
        area = rng.uniform(min_area, 1.0) * height * width
        aspect = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
        crop_h, crop_w = int(round(np.sqrt(area / aspect))), int(round(np.sqrt(area * aspect)))
        if crop_h <= height and crop_w <= width and crop_h * crop_w >= min_area * height * width:
            break
    top, left = rng.integers(0, height - crop_h + 1), rng.integers(0, width - crop_w + 1)
    crop = Image.fromarray(image[top : top + crop_h, left : left + crop_w])
    return np.asarray(crop.resize((size, size), Image.Resampling.LANCZOS))


def base_items(split: str, size: int = 112, per_photo: int | None = None, seed: int | None = None) -> np.ndarray:
    """The items of a split: uint8 ``(8 * per_photo, size, size, 3)``, photo-major.

    Args:
        split: ``"test"`` (4 crops a photo: 32 items), ``"validation"`` (2 a photo: 16 items) or ``"train"``
            (crops for the utility heads; needs ``per_photo`` and ``seed``).
        size: Side of the square items.
        per_photo: Crops per photo (default: the split's).
        seed: Crop seed (default: the split's fixed seed; the train split's follows the evaluation seed).
    """
    if split not in ("test", "validation", "train"):
        raise ValueError(f"split must be test, validation or train, got {split!r}")
    if split == "train" and (per_photo is None or seed is None):
        raise ValueError("the train split needs per_photo and seed")
    per_photo = CROPS_PER_PHOTO.get(split, 0) if per_photo is None else per_photo
    seed = SPLIT_SEEDS[split] if seed is None else seed
    rng = np.random.default_rng([seed, 14])
    return np.stack([random_crop(photo(name), rng, size) for name in PHOTOS for _ in range(per_photo)])


def item_photo(index: int, per_photo: int) -> str:
    """The photo item ``index`` of a photo-major split was cropped from."""
    return PHOTOS[index // per_photo]
