"""The detector module on real MiniLM embeddings, the generator module's errors, and the published checkpoints."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from zoo._errors import ZooError
from zoo.aporia.module import AporiaDetector, AporiaGeneratorModule
from zoo.common.minilm import embed

WRONG_CAPITALS = ["Quito", "Santiago", "Bogota", "La Paz", "Caracas", "Brasilia", "Asuncion", "Montevideo", "Havana"]


def _peru_pair():
    genuine = ["The capital of Peru is Lima.", "Lima is the capital of Peru.", "The capital city of Peru is Lima."] * 4
    hallucinated = [f"The capital of Peru is {c}." for c in WRONG_CAPITALS] + [
        f"{c} is the capital of Peru." for c in WRONG_CAPITALS[:3]
    ]
    return genuine + hallucinated, np.r_[np.zeros(len(genuine)), np.ones(len(hallucinated))].astype(np.int64)


def _yen_pair():
    genuine = ["The currency code of Japan is JPY.", "Japan uses the currency code JPY."] * 5
    hallucinated = [f"The currency code of Japan is {c}." for c in ["EUR", "USD", "CNY", "KRW", "GBP", "INR"]] * 2
    return genuine + hallucinated, np.r_[np.zeros(len(genuine)), np.ones(len(hallucinated))].astype(np.int64)


@pytest.fixture(scope="module")
def detector():
    module = AporiaDetector(num_pairs=2, max_labels=40)
    for index, (texts, labels) in enumerate([_peru_pair(), _yen_pair()]):
        batch = {"pair": index, "x": torch.from_numpy(embed(texts)), "y": torch.from_numpy(labels)}
        module.training_step(batch, index)
    module.pairs = [
        {"prompt": "Q: What is the capital of Peru? A:", "model": "toy"},
        {"prompt": "Q: What is the currency code of Japan? A:", "model": "toy"},
    ]
    return module.eval()


def test_detector_classifies_new_responses(detector):
    new = ["The capital of Peru is Lima.", "The capital of Peru is Buenos Aires.", "The capital of Peru is Lima"]
    assert detector.classify(new, prompt="What is the capital of Peru?") == ["genuine", "hallucinated", "genuine"]
    # without a prompt the responses are routed to the pair whose labelled answers they resemble
    assert detector.find_pair(torch.from_numpy(embed(new))) == 0
    assert detector.classify(["The currency code of Japan is JPY.", "The currency code of Japan is AUD."]) == [
        "genuine",
        "hallucinated",
    ]
    z_genuine, z_hallucinated = detector.reference_sets(0)
    assert len(z_genuine) == 12 and len(z_hallucinated) == 12


def test_detector_bad_inputs(detector):
    with pytest.raises(ZooError, match="no fitted pair"):
        detector.classify(["x"], prompt="What is the capital of Mars?")
    with pytest.raises(ZooError, match="non-empty list"):
        detector.classify("The capital of Peru is Lima.")
    with pytest.raises(ZooError, match="not fitted"):
        AporiaDetector(num_pairs=1).classify(["The capital of Peru is Lima."])


def test_detector_round_trip_keeps_pairs(detector, tmp_path):
    from zoo._serialization import load_folder, save_pretrained

    save_pretrained(detector, tmp_path)
    assert json.loads((tmp_path / "pairs.json").read_text())[1]["prompt"].startswith("Q: What is the currency")
    again = load_folder(tmp_path)
    assert again.pairs == detector.pairs
    assert again.classify(["The capital of Peru is Quito."], prompt="Q: What is the capital of Peru? A:") == [
        "hallucinated"
    ]


def test_generator_errors():
    with pytest.raises(ValueError, match="unknown generator arch"):
        AporiaGeneratorModule(arch="rnn")
    with pytest.raises(ValueError, match="divisible"):
        AporiaGeneratorModule(d_model=130, n_heads=4)
    with pytest.raises(ZooError, match="no tokenizer"):
        AporiaGeneratorModule(d_model=32, n_layers=1, n_heads=2).sample("Q: What is the capital of Peru? A:")
