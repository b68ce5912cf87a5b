"""Evaluation of the tiny test model through the harness: the MLP against a majority-class reference."""

from __future__ import annotations

import torch

from tests.tiny.module import blobs
from zoo.eval import Arm, Claim, Protocol, Setting, Tuning, beats


def _test(settings: dict):
    return blobs(settings["test_size"], 8, 3, seed=settings["test_seed"])


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    x, y = blobs(512, 8, 3, seed=1234)
    x, y = x[:limit], y[:limit]
    with torch.no_grad():
        return {"accuracy": (module(x).argmax(-1) == y).float().mean().item()}


def score(arm: str, model, run) -> dict[str, float]:
    x, y = _test(run.settings)
    with torch.no_grad():
        return {"accuracy": (model(x).argmax(-1) == y).float().mean().item()}


def majority(run) -> dict[str, float]:
    x, y = _test(run.settings)
    train_labels = blobs(256, 8, 3, run.seed)[1]
    return {"accuracy": (y == train_labels.mode().values).float().mean().item()}


def claims(result: dict) -> list[Claim]:
    accuracy = result["arms"]["tiny"]["accuracy"]
    return [
        beats(result, "accuracy", "tiny", "reference_majority", margin=0.2),
        Claim.at_least("tiny_accuracy", "tiny accuracy >= 0.5", accuracy, 0.5, kind="validity", arm="tiny"),
    ]


PROTOCOL = Protocol(
    method="tiny",
    ablations=(Arm("tiny_narrow", base="tiny", overrides=("--model.init_args.hidden=4",)),),
    references=(Arm("reference_majority", measure=majority),),
    settings={
        "test_size": Setting(512, "test points", minimum=1),
        "test_seed": Setting(1234, "seed of the test blobs"),
        "epochs": Setting(1, "training epochs of a retrained arm", recipe_keys=("trainer.max_epochs",), minimum=1),
    },
    tuning={"tiny": Tuning("none", {}, 0, "fixed test recipe")},
    headline=("accuracy",),
    score=score,
    claims=claims,
    score_pretrained=score_pretrained,
)
