"""Readers for data sets that ship in system packages (no downloads at run time)."""

from __future__ import annotations

import gzip
from functools import lru_cache
from pathlib import Path

import numpy as np

from zoo._errors import ZooError
from zoo.common.labels import FASHION_MNIST_CLASSES  # noqa: F401 - re-exported, its old home

FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")


def _read_idx(path: Path, offset: int) -> np.ndarray:
    with gzip.open(path, "rb") as handle:
        return np.frombuffer(handle.read(), dtype=np.uint8, offset=offset)


@lru_cache(maxsize=2)
def fashion_mnist(split: str = "train", root: str | Path = FASHION_MNIST_DIR) -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST from the Debian package ``dataset-fashion-mnist``.

    Args:
        split: ``"train"`` (60,000 images) or ``"test"`` (10,000).
        root: Folder with the four ``*-ubyte.gz`` files.

    Returns:
        ``(images, labels)``: uint8 ``[N, 28, 28]`` and int64 ``[N]``, read-only.
    """
    if split not in ("train", "test"):
        raise ZooError(f"Fashion-MNIST split must be 'train' or 'test', not {split!r}")
    prefix = "train" if split == "train" else "t10k"
    root = Path(root)
    images_path = root / f"{prefix}-images-idx3-ubyte.gz"
    labels_path = root / f"{prefix}-labels-idx1-ubyte.gz"
    if not images_path.is_file() or not labels_path.is_file():
        raise ZooError(
            f"Fashion-MNIST is not installed at {root}; install it with `sudo apt-get install dataset-fashion-mnist` "
            "(make test / make demo do this when run as root)"
        )
    images = _read_idx(images_path, 16).reshape(-1, 28, 28)
    labels = _read_idx(labels_path, 8).astype(np.int64)
    labels.setflags(write=False)
    return images, labels
