"""The Usage snippets of the APORIA cards: rendered by ``zoo card``, run as written by ``tests/test_usage.py``.

The detector's snippet ends with ``prediction: P | truth: T``: its label for one held-out response of a pair it
was fitted on, against that response's true label. A generator's snippet prints its greedy fact accuracy against
the card's (``| tolerance: E``).
"""

from string import Template

DETECTOR = Template("""
import zoo

detector = zoo.load("$name", pretrained=True)  # one fitted APORIA-LP direction per (prompt, generator) pair
pair = detector.pairs[0]  # its prompt, and responses held out of the fit with their true labels
response, truth = pair["heldout"][0], pair["heldout_labels"][0]
label = detector.classify([response], prompt=pair["prompt"], model=pair.get("model"))[0]
print(pair["prompt"], "->", repr(response))
print("prediction:", label, "| truth:", ("genuine", "hallucinated")[int(truth)])
""")

GENERATOR = Template("""
import zoo

model = zoo.load("$name", pretrained=True)  # a small LM trained on the country-facts corpus
accuracy = model.greedy_accuracy(facts=200)  # greedy answers to 200 fact questions
card = zoo.get_entry("$name").metrics["greedy_accuracy"]  # the card's, over its fact set and seeds
print(f"prediction: {accuracy:.3f} | truth: {card:.3f} | tolerance: 0.1")
""")


def snippet(name: str) -> str:
    """The snippet for the entry ``name``."""
    template = DETECTOR if name == "aporia.socrates_mini" else GENERATOR
    return template.substitute(name=name)
