"""The published detector: SAE quality, and its card's AUROC reproduced on a slice of the test texts."""

import json

import numpy as np
import pytest
import torch

import zoo
from zoo._registry import get_entry

NAME = "sae_transition_ood.docstrings"
pytestmark = pytest.mark.skipif(NAME not in zoo.list_models(), reason="the published entry is registered with its card")


@pytest.fixture(scope="module")
def detector():
    return zoo.load(NAME, pretrained=True)


def test_sae_quality_per_layer(detector):
    from zoo.sae_transition_ood.domains import chunks
    from zoo.sae_transition_ood.features import token_positions
    from zoo.sae_transition_ood.sae import sae_quality

    metadata = json.loads((get_entry(NAME).mirror_dir / "config.json").read_text())["metadata"]["sae_quality"]
    assert max(metadata["dead_fraction"]) < 0.2, metadata["dead_fraction"]
    assert max(metadata["fvu"]) <= 0.2, metadata["fvu"]  # the bound, on the 40k-token training sample
    hidden = detector.hidden_states()
    states = hidden.map_ids([c.ids for c in chunks("docstrings", "validation", 60)], lambda s: s)
    tokens = np.concatenate([s[:, token_positions(s.shape[1], 20)].transpose(1, 0, 2) for s in states])
    held_out = sae_quality(detector.saes, torch.from_numpy(tokens))
    # held-out ID validation texts (not in the issue): above the training FVU (40k tokens for 2 x 2.75 M weights)
    assert max(held_out["fvu"]) <= 0.3, held_out["fvu"]


def test_checkpoint_reproduces_card_auroc(detector):
    from zoo.sae_transition_ood.evaluate import score_pretrained

    metrics = json.loads((get_entry(NAME).mirror_dir / "metrics.json").read_text())
    # this checkpoint is seed 0; docstrings vs pyref sits near 0.5, where 200 texts per side are too few (0.440
    # there vs 0.418 on 1,000): the check uses docstrings vs wikipedia
    expected = metrics["per_seed"]["transition"]["0"]["auroc_docstrings_vs_wikipedia"]
    measured = score_pretrained(detector, limit=200, ood="wikipedia")["auroc_docstrings_vs_wikipedia"]
    assert measured == pytest.approx(expected, abs=0.02)


def test_explain_reports_five_transitions(detector):
    found = detector.explain("The capital of France is Paris. About 66,078,000 people live in France.")
    assert len(found) == 5
    assert all(item["nll"] >= found[-1]["nll"] and 0 <= item["layer"] < 6 for item in found)
    assert all(isinstance(item["token_text"], str) for item in found)
