"""The Usage snippet of the BOBA card: rendered by ``zoo card``, run by ``tests/test_usage.py``.

It ends with ``prediction: P | truth: T | tolerance: E``: the published surrogate's Spearman correlation with the
test oracle on the held-out slice, recomputed here, against the card's value for the published seed (0).
"""

from string import Template

SNIPPET = Template("""
import json

from rdkit import Chem

import zoo
from zoo.boba.evaluate import score_pretrained
from zoo.boba.library import packed_fingerprint

model = zoo.load("$name", pretrained=True)  # surrogate ensemble of seed 0's campaign + its round logs
amide = Chem.MolFromSmiles("O=C(NCc1ccccc1)c1ccc(O)cc1")  # 4-hydroxy-N-benzylbenzamide, a library-like amide
mean, std = model.predict(packed_fingerprint(amide)[None])  # O1: max Tanimoto to CDK2 ligands (test half)
print(f"predicted O1 score {mean[0]:.3f} +- {std[0]:.3f}")
campaign = model.campaign_record  # 1% initial design + 6 rounds of 0.35%, UCB1 over acid arms
print(f"campaign: recall {campaign['recall_top1pct']:.3f} of the top 1% with {campaign['oracle_calls']} oracle calls")
rho = score_pretrained(model)["surrogate_spearman"]  # 2,000 held-out molecules (enumerated if not cached)
card = json.loads((zoo.get_entry("$name").mirror_dir / "metrics.json").read_text())["per_seed"]["boba_ucb"]["0"]
print(f"prediction: {rho:.4f} | truth: {card['surrogate_spearman']:.4f} | tolerance: 0.02")
""")


def snippet(name: str) -> str:
    """The snippet for the entry ``name``."""
    return SNIPPET.substitute(name=name)
