"""The Usage snippet of the olaf_world cards: rendered by ``zoo card``, run by ``tests/test_usage.py`` (slow).

It ends with ``prediction: P | truth: T | tolerance: E``: the cross-context probe accuracy of the loaded
checkpoint on the held-out Crafter worlds against the card's seed-0 value, within 2 points.
"""

from string import Template

SNIPPET = Template("""
import json

import torch

import zoo
from zoo.olaf_world.clips import ACTION_NAMES, collect
from zoo.olaf_world.evaluate import score_pretrained

model = zoo.load("$name", pretrained=True)  # LAM + trajectory head; no teacher needed at inference
# one held-out clip of world 80 (context B: a cave start seen through the zoomed 11 x 11 view), rendered by crafter
clip = collect([80], steps=3, length=4, stride=3, split="terrain", view_b=11)
videos = torch.as_tensor(clip["videos"]).float() / 255  # (1, 4, 64, 64, 3) in [0, 1]
with torch.no_grad():
    mu = model(videos)  # (1, 3, 32): one latent action per transition
print("true actions:", [ACTION_NAMES[a] for a in clip["actions"][0]], "latent norms:", mu.norm(dim=-1).tolist())
# the card's headline: a linear probe fit on mu of one context, tested on the other (test worlds 30-39 / 80-89)
probe = score_pretrained(model)["probe_acc_cross"]
card = json.loads((zoo.get_entry("$name").mirror_dir / "metrics.json").read_text())
seed0 = card["per_seed"]["$arm"]["0"]["probe_acc_cross"]  # these weights are the card's seed-0 run
print(f"prediction: {probe:.4f} | truth: {seed0:.4f} | tolerance: 0.02")
""")


def snippet(name: str) -> str:
    """The snippet for the entry ``name``."""
    arm = "lam_vae" if name.endswith(".vae") else "lam_align"
    return SNIPPET.substitute(name=name, arm=arm)
