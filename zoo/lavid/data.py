"""Few-shot Fashion-MNIST and the Waterbirds-like spurious composite set, plus their LightningDataModule.

* Validation: 1,000 training images held out once (fixed permutation, seed 12345) and used for all tuning.
  Few-shot training images are drawn per seed from the other 59,000; the 10,000 test images are scored only
  for the reported numbers.
* Spurious set (the spec's reconstruction of Waterbirds): footwear (Sandal, Sneaker, Ankle boot) vs top
  (T-shirt, Pullover, Coat, Shirt) garments pasted on 28x28 crops of ``skimage.data.brick()`` or ``grass()``
  (512x512 grey, downscaled 4x so a crop shows the texture), mask = garment intensity > 0.1, the garment
  blended with ``alpha`` over the background. Training: P(brick | footwear) = P(grass | top) = ``correlation``;
  test: four balanced groups of 500 (group = 2 * label + background, background 0 = brick, 1 = grass).
"""

from __future__ import annotations

from functools import lru_cache

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler, TensorDataset

from zoo._errors import ZooError

DATASETS = ("fmnist", "spurious")
VAL_SIZE = 1000
VAL_SEED = 12345


def _check_dataset(dataset: str) -> None:
    if dataset not in DATASETS:
        raise ZooError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)}")


@lru_cache(maxsize=1)
def fmnist_splits() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{"pool", "val", "test"}`` -> (uint8 images [n, 28, 28], int64 labels)."""
    from zoo.common.datasets import fashion_mnist

    x, y = fashion_mnist("train")
    order = np.random.default_rng(VAL_SEED).permutation(len(y))
    val, pool = order[:VAL_SIZE], np.sort(order[VAL_SIZE:])
    xt, yt = fashion_mnist("test")
    return {"pool": (x[pool], y[pool]), "val": (x[val], y[val]), "test": (xt, yt)}


def few_shot_indices(labels: np.ndarray, shots: int, seed: int, num_classes: int | None = None) -> np.ndarray:
    """``shots`` indices per class drawn without replacement with ``seed``.

    Raises:
        ZooError: ``shots`` below 1 or above the images of some class.
    """
    classes = range(num_classes if num_classes is not None else int(labels.max()) + 1)
    rng = np.random.default_rng(seed)
    chosen = []
    for c in classes:
        members = np.flatnonzero(labels == c)
        if shots < 1 or shots > len(members):
            raise ZooError(f"shots={shots} per class, but class {c} has {len(members)} images (need 1..{len(members)})")
        chosen.append(rng.choice(members, shots, replace=False))
    return np.concatenate(chosen)


def to_float(images: np.ndarray) -> torch.Tensor:
    """uint8 [n, 28, 28] -> float [n, 1, 28, 28] in [0, 1]."""
    return torch.from_numpy(np.asarray(images, dtype=np.float32) / 255.0).unsqueeze(1)


@lru_cache(maxsize=1)
def backgrounds() -> np.ndarray:
    """``[2, 128, 128]`` float backgrounds in [0, 1]: brick and grass, 4x block-averaged from 512x512."""
    from skimage import data as skdata

    out = []
    for image in (skdata.brick(), skdata.grass()):
        img = np.asarray(image, dtype=np.float32)[:512, :512] / 255.0
        out.append(img.reshape(128, 4, 128, 4).mean((1, 3)))
    return np.stack(out)


def composite(garments: np.ndarray, background_ids: np.ndarray, rng: np.random.Generator, alpha: float) -> np.ndarray:
    """Paste uint8 garments on random 28x28 crops of their backgrounds; float [n, 28, 28] in [0, 1]."""
    bgs = backgrounds()
    g = np.asarray(garments, dtype=np.float32) / 255.0
    rows, cols = rng.integers(0, 128 - 28, len(g)), rng.integers(0, 128 - 28, len(g))
    crops = np.stack([bgs[b, r : r + 28, c : c + 28] for b, r, c in zip(background_ids, rows, cols)])
    mask = (g > 0.1).astype(np.float32) * alpha
    return mask * g + (1 - mask) * crops


def _garments(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from zoo.lavid.classes import SPURIOUS_GROUPS

    label = np.full(len(y), -1)
    for group, members in enumerate(SPURIOUS_GROUPS):
        label[np.isin(y, members)] = group
    keep = label >= 0
    return x[keep], label[keep]


def spurious_split(
    split: str, seed: int, size: int, correlation: float = 0.95, alpha: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(images [n,1,28,28], labels, groups)`` of the spurious set.

    Args:
        split: ``"train"`` (correlated; garments from the few-shot pool), ``"val"`` (balanced, from the 1,000
            held-out images) or ``"test"`` (balanced 4 x size/4 groups, from the test split).
        seed: Draw of garments, backgrounds and crops (the test split always uses seed 0: one fixed test set).
        size: Number of images.
        correlation: P(brick | footwear) = P(grass | top) in training.
        alpha: Opacity of the garment over the background.
    """
    splits = fmnist_splits()
    source = {"train": "pool", "val": "val", "test": "test"}
    if split not in source:
        raise ZooError(f"spurious split must be train, val or test, not {split!r}")
    x, label = _garments(*splits[source[split]])
    rng = np.random.default_rng(0 if split == "test" else seed + (7 if split == "val" else 0))
    if split == "train":
        idx = rng.choice(len(label), size, replace=False)
        y = label[idx]
        agree = rng.random(size) < correlation
        background = np.where(agree, y, 1 - y)  # footwear (0) with brick (0), top (1) with grass (1)
    else:
        per = size // 4
        idx_list, background_list = [], []
        for y_value in (0, 1):
            members = np.flatnonzero(label == y_value)
            for b in (0, 1):
                idx_list.append(rng.choice(members, per, replace=per > len(members)))
                background_list.append(np.full(per, b))
        idx, background = np.concatenate(idx_list), np.concatenate(background_list)
        y = label[idx]
    images = composite(x[idx], background, rng, alpha)
    groups = 2 * y + background
    return torch.from_numpy(images).unsqueeze(1), torch.from_numpy(y).long(), torch.from_numpy(groups).long()


def fmnist_few_shot(shots: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The few-shot training set of one seed: ``shots`` images per class from the 59k pool."""
    x, y = fmnist_splits()["pool"]
    idx = few_shot_indices(y, shots, seed, 10)
    return to_float(x[idx]), torch.from_numpy(y[idx]).long()


def fmnist_eval(split: str, limit: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Validation (1,000 held-out training images) or test images, as floats, optionally the first ``limit``."""
    if split not in ("val", "test"):
        raise ZooError(f"split must be 'val' or 'test', not {split!r}")
    x, y = fmnist_splits()[split]
    x, y = (x[:limit], y[:limit]) if limit else (x, y)
    return to_float(x), torch.from_numpy(np.array(y)).long()


class EpochPermutationSampler(Sampler[int]):
    """One ``torch.randperm(n, generator)`` per epoch from a generator of its own seeded once with ``seed``.

    It is the data order of :func:`zoo.lavid.student.fit_student` (the evaluation's plain loop), so a recipe run
    and the evaluation's unit of the same seed see the same batches; a DataLoader with ``shuffle=True`` would
    instead draw one extra number per epoch from its generator (the workers' base seed) and shift the order.
    """

    def __init__(self, n: int, seed: int) -> None:
        self.n = n
        self.generator = torch.Generator().manual_seed(seed)

    def __iter__(self):
        return iter(torch.randperm(self.n, generator=self.generator).tolist())

    def __len__(self) -> int:
        return self.n


class FewShotImageDataModule(pl.LightningDataModule):
    """Few-shot Fashion-MNIST or the spurious composite set, with the class signatures S.

    Batches are ``(images, labels)``; ``signatures`` ([C, N*M], rows summing to N), ``name_embeddings``
    ([C, 384]) and ``num_classes`` are set by ``setup``. The validation loader is the 1,000 held-out images
    (balanced composites for the spurious set); the test loader is the test split.

    Args:
        dataset: ``"fmnist"`` or ``"spurious"``.
        shots: Images per class (fmnist).
        spurious_size: Training images of the spurious set.
        correlation: Background-label correlation of the spurious training set.
        alpha: Garment opacity of the composites.
        batch_size: Training batch size (the paper's 16).
        seed: Draw of the training images.
        signature_temperature: None applies the entropy rule.
        val_limit: Use only the first images of the validation split (smoke runs).

    The training order is :class:`EpochPermutationSampler`'s, the evaluation's plain loop's for the same seed.
    """

    def __init__(
        self,
        dataset: str = "fmnist",
        shots: int = 10,
        spurious_size: int = 1000,
        correlation: float = 0.95,
        alpha: float = 1.0,
        batch_size: int = 16,
        seed: int = 0,
        signature_temperature: float | None = None,
        val_limit: int | None = None,
    ) -> None:
        super().__init__()
        _check_dataset(dataset)
        self.save_hyperparameters()
        self.signatures = self.name_embeddings = None
        self.num_classes = 10 if dataset == "fmnist" else 2

    def setup(self, stage: str | None = None) -> None:
        from zoo.lavid.classes import class_targets

        hp = self.hparams
        sig, names = class_targets(hp.dataset, hp.signature_temperature)
        sig.check(self.num_classes)
        self.signature_set, self.signatures, self.name_embeddings = sig, torch.from_numpy(sig.matrix), names
        if hp.dataset == "fmnist":
            self.train_set = fmnist_few_shot(hp.shots, hp.seed)
            self.val_set = fmnist_eval("val", hp.val_limit)
            self.test_set = fmnist_eval("test")
        else:
            self.train_set = spurious_split("train", hp.seed, hp.spurious_size, hp.correlation, hp.alpha)[:2]
            self.val_set = spurious_split("val", hp.seed, hp.val_limit or 400, alpha=hp.alpha)[:2]
            self.test_set = spurious_split("test", 0, 2000, alpha=hp.alpha)[:2]

    def train_dataloader(self) -> DataLoader:
        """Batches in :class:`EpochPermutationSampler`'s order: the evaluation's order for the same seed.

        Lightning builds this loader once per fit (no reload), so the sampler's generator runs on across epochs
        exactly like the plain loop's.
        """
        sampler = EpochPermutationSampler(len(self.train_set[1]), self.hparams.seed)
        return DataLoader(TensorDataset(*self.train_set), self.hparams.batch_size, sampler=sampler)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(*self.val_set), 500)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(*self.test_set), 500)
