"""The Usage snippet of the DWP cards: rendered by ``zoo card``, run as written by ``tests/test_usage.py``.

A snippet ends with one line ``prediction: P | truth: T`` (``| tolerance: E`` for a number), which the test checks.
"""

from zoo.common.usage import fashion_mnist_classifier

PREPROCESSING = """\
# predict() applies model.pretrained_cfg: pixels to [0, 1], then mean 0.2860 / std 0.3530 (raw [0, 1] input
# fed straight to model(x) scores far lower, so forward() warns about it)"""


def snippet(name: str) -> str:
    """The snippet for the entry ``name``."""
    return fashion_mnist_classifier(name, PREPROCESSING)
