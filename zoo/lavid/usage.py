"""The Usage snippet of the LaViD cards: rendered by ``zoo card``, run as written by ``tests/test_usage.py``."""

from zoo.common.usage import fashion_mnist_classifier

PREPROCESSING = "# predict() applies model.pretrained_cfg: pixels to [0, 1] (the network normalises them itself)"


def snippet(name: str) -> str:
    """The snippet for the entry ``name``."""
    return fashion_mnist_classifier(name, PREPROCESSING)
