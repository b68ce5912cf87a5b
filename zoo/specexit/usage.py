"""The Usage snippet of the SpecExit card: rendered by ``zoo card``, run as written by ``tests/test_usage.py``.

It ends with ``prediction: P | truth: T``: the model's answer to the first test problem and the true answer.
"""

from string import Template

SNIPPET = Template("""
import zoo
from zoo.specexit.data import test_problems

model = zoo.load("$name", pretrained=True)
problem = test_problems()[0]  # the first held-out test problem of the card's evaluation
result = model.generate(problem.expression, mode="specexit")  # speculative decoding with the learned early exit
print(problem.expression, "->", result.text)
print("prediction:", model.predict(problem.expression), "| truth:", problem.answer)
""")


def snippet(name: str) -> str:
    """The snippet for the entry ``name``."""
    return SNIPPET.substitute(name=name)
