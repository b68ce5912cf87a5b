"""The Usage snippet of the resettable-sketch cards: rendered by ``zoo card``, run by ``tests/test_usage.py``.

It ends with ``prediction: P | truth: T | tolerance: E``: the sketch's estimate on a random churn stream, the exact
statistic, and three times the card's mean-plus-spread relative error on churn streams.
"""

from string import Template

SNIPPET = Template("""
import zoo
from zoo.resettable_sketch.streams import churn_stream

sketch = zoo.load("$name")  # no learned weights: the sketch is its algorithm, parameters and seed
exact = zoo.load("$name", sketch="exact")  # the same statistic counted exactly (linear space)
ops, keys, deltas = churn_stream(50_000, seed=123)  # 50k updates: 0 = Inc, 1 = Reset of a key
estimate, truth = sketch.update(ops, keys, deltas), exact.update(ops, keys, deltas)
card = zoo.get_entry("$name").metrics  # the card's relative error on such streams: mean and seed spread
error = card["rel_err_final_churn"] + card["rel_err_final_churn_std"]
print(f"prediction: {estimate:.0f} | truth: {truth:.0f} | tolerance: {3 * error * truth:.0f}")
""")


def snippet(name: str) -> str:
    """The snippet for the entry ``name``."""
    return SNIPPET.substitute(name=name)
