"""The Usage snippet of the ProMiSE card: rendered by ``zoo card``, run as written by ``tests/test_usage.py``.

It samples one apo ensemble, scores it with the model-agnostic harness, then re-scores the card's seed-0 test
ensembles with the debiased decoder (tuned on validation again, as ``zoo eval`` does) and prints the success
against the card's seed-0 ``ddpm_debiased`` run, which these weights are (tolerance: one ensemble of 20).
"""

from string import Template

SNIPPET = Template("""
import json

import zoo
from zoo.promise.evaluate import score_pretrained, target
from zoo.promise.harness import score_ensembles

model = zoo.load("$name", pretrained=True)
apo = model.ensemble("apo", n=10, seed=0)  # (10, 214, 3) C-alpha coordinates in A (debiased decoding)
ligand = model.ensemble("ligand", n=10, seed=1)
print(score_ensembles(target(), {"apo": [apo], "ligand": [ligand]}))  # coverage, success, context delta, ...
scores = score_pretrained(model)  # seed 0's 20 test ensembles per context, w and T tuned on validation
card = json.loads((zoo.get_entry("$name").mirror_dir / "metrics.json").read_text())
truth = card["per_seed"]["ddpm_debiased"]["0"]["multistate_success"]  # the card's seed-0 run: these weights
print(f"prediction: {scores['multistate_success']:.3f} | truth: {truth:.3f} | tolerance: 0.051")
""")


def snippet(name: str) -> str:
    """The snippet for the entry ``name``."""
    return SNIPPET.substitute(name=name)
