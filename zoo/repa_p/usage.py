"""The Usage snippet of the REPA-P cards: rendered by ``zoo card``, run as written by ``tests/test_usage.py``.

It ends with ``prediction: P | truth: T | tolerance: E``: the sampled field's MSE to the solver's field on one
test condition, against the card's mean MSE (single samples vary; the tolerance is twice the card's value).
"""

from string import Template

SNIPPET = Template("""
import zoo
from zoo.repa_p.evaluate import DATA_SEED

model = zoo.load("$name", pretrained=True)
field, charges = model.task.generate("id", 200, seed=DATA_SEED)  # the card's test pairs: solver potential, charges
potential = model.predict(charges[:1])  # one sampled potential [1, 1, 32, 32], physical units (100 DDPM steps)
mse = (potential / model.task.field_scale - field[:1]).square().mean().item()  # in network units, as the card
card = zoo.get_entry("$name").metrics["mse_id"]
print(f"prediction: {mse:.4g} | truth: {card:.4g} | tolerance: {2 * card:.4g}")
""")


def snippet(name: str) -> str:
    """The snippet for the entry ``name``."""
    return SNIPPET.substitute(name=name)
