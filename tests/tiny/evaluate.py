"""Evaluation of the tiny test model through the harness: the MLP against a majority-class reference."""

from __future__ import annotations

import torch

from tests.tiny.module import blobs
from zoo._eval import Claim, Protocol, Setting, Tuning, beats

PROTOCOL = Protocol(
    method="tiny",
    references=("reference_majority",),
    settings={
        "test_size": Setting(512, "test points", minimum=1),
        "test_seed": Setting(1234, "seed of the test blobs"),
        "epochs": Setting(1, "training epochs of a retrained arm", recipe_keys=("trainer.max_epochs",), minimum=1),
    },
    tuning={"tiny": Tuning("none", {}, 0, "fixed test recipe")},
    headline=("accuracy",),
)


def _test(settings: dict):
    return blobs(settings["test_size"], 8, 3, seed=settings["test_seed"])


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    x, y = blobs(512, 8, 3, seed=1234)
    x, y = x[:limit], y[:limit]
    with torch.no_grad():
        return {"accuracy": (module(x).argmax(-1) == y).float().mean().item()}


def measure(arm: str, run) -> dict[str, float]:
    x, y = _test(run.settings)
    if arm == "reference_majority":
        train_labels = blobs(256, 8, 3, run.seed)[1]
        return {"accuracy": (y == train_labels.mode().values).float().mean().item()}
    with torch.no_grad():
        return {"accuracy": (run.load(arm)(x).argmax(-1) == y).float().mean().item()}


def claims(result: dict) -> list[Claim]:
    return [
        beats(result, "accuracy", "tiny", "reference_majority", margin=0.2),
        Claim.at_least("tiny_accuracy", "tiny accuracy >= 0.5", result["arms"]["tiny"]["accuracy"], 0.5),
    ]
