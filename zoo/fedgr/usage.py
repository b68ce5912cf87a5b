"""The Usage snippet of the FedGR cards: rendered by ``zoo card``, run as written by ``tests/test_usage.py``.

A snippet ends with one line ``prediction: P | truth: T`` (``| tolerance: E`` for a number), which the test checks.
"""

from string import Template

SNIPPET = Template("""
import zoo
from zoo.common.datasets import fashion_mnist

model = zoo.load("$name", pretrained=True)
images, labels = fashion_mnist("test")  # uint8 [10000, 28, 28], as shipped (Debian dataset-fashion-mnist)
# predict() applies model.pretrained_cfg: pixels to [0, 1] (the network normalises them itself)
ids = model.predict(images[:1])
print("prediction:", model.label_names[ids[0]], "| truth:", model.label_names[labels[0]])
""")


def snippet(name: str) -> str:
    """The snippet for the entry ``name``."""
    return SNIPPET.substitute(name=name)
