"""The Usage snippet of the visual persuasion card: rendered by ``zoo card``, run by ``tests/test_usage.py``.

It ends with ``prediction: P | truth: T | tolerance: E``: P(the published optimised edit is chosen over the
original) on the first 8 test items against the card's seed-0 value on the same items.
"""

from string import Template

SNIPPET = Template("""
import json

import numpy as np

import zoo
from zoo.visual_persuasion.evaluate import per_item_p
from zoo.visual_persuasion.images import base_items

model = zoo.load("$name", pretrained=True)  # 4 ridge utility heads on frozen EfficientNet-Lite0 + CVPO's edits
items = base_items("test")[:8]  # 8 of the 32 test items: crops of scikit-image photos, uint8 (8, 112, 112, 3)
edited = [model.editor().edit(item, theta) for item, theta in zip(items, model.optimised_theta.numpy())]
print(model(np.stack(edited[:1])).tolist())  # the first optimised edit's utility under the 4 heads (3: held out)
p = per_item_p(model, items, edited, trials=100, seed=0, heads=(0, 1, 2))  # optimised vs original, both orders
metrics = json.loads((zoo.get_entry("$name").mirror_dir / "metrics.json").read_text())
truth = np.mean(metrics["extras"]["0"]["cvpo"]["p_per_item"][:8])  # the card's seed-0 run on the same 8 items
print(f"prediction: {p.mean():.3f} | truth: {truth:.3f} | tolerance: 0.03")
""")


def snippet(name: str) -> str:
    """The snippet for the entry ``name``."""
    return SNIPPET.substitute(name=name)
