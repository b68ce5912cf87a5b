"""The Usage snippet of the sae_transition_ood card: rendered by ``zoo card``, run by ``tests/test_usage.py``.

It ends with ``prediction: P | truth: T | tolerance: E``: the AUROC of the published detector on 100 docstring
test texts against 100 Python-reference test texts, against the card's seed-0 value on 1,000 per side.
"""

from string import Template

SNIPPET = Template("""
import zoo
from zoo.sae_transition_ood.detector import auroc
from zoo.sae_transition_ood.domains import chunks

detector = zoo.load("$name", pretrained=True)  # 7 TopK SAEs on MiniLM-L6 + transition counts (ID: docstrings)
inside = [c.text for c in chunks("docstrings", "test", 100)]  # held-out stdlib docstrings
outside = [c.text for c in chunks("pyref", "test", 100)]  # the Python language reference (near OOD)
scores_in, scores_out = detector.score_texts(inside), detector.score_texts(outside)  # higher = more OOD
print(detector.explain(outside[0])[:2])  # the most surprising layer transitions of one OOD text
card = zoo.get_entry("$name").metrics["auroc_docstrings_vs_pyref"]  # card: mean over 3 seeds, 1,000 per side
print(f"prediction: {auroc(scores_in, scores_out):.3f} | truth: {card:.3f} | tolerance: 0.05")
""")


def snippet(name: str) -> str:
    """The snippet for the entry ``name``."""
    return SNIPPET.substitute(name=name)
