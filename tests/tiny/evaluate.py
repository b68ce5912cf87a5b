"""Evaluation of the tiny test model: the MLP against a majority-class baseline, in the zoo's eval schema."""

from __future__ import annotations

import torch

from tests.tiny.module import TinyClassifier, blobs

TEST_SIZE = 512


def _train(seed: int, steps: int = 60) -> TinyClassifier:
    torch.manual_seed(seed)
    model = TinyClassifier()
    x, y = blobs(256, 8, 3, seed)
    optimizer = model.configure_optimizers()
    for _ in range(steps):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    return model.eval()


def score_pretrained(module: TinyClassifier, limit: int | None = None) -> dict[str, float]:
    x, y = blobs(TEST_SIZE, 8, 3, seed=1234)
    x, y = x[:limit], y[:limit]
    with torch.no_grad():
        return {"accuracy": (module(x).argmax(-1) == y).float().mean().item()}


def evaluate(name: str, *, seeds: list[int] | None = None, retrain: bool = False) -> dict:
    seeds = seeds or [0, 1]
    x, y = blobs(TEST_SIZE, 8, 3, seed=1234)
    mlp, majority = [], []
    for seed in seeds:
        mlp.append(score_pretrained(_train(seed))["accuracy"])
        train_labels = blobs(256, 8, 3, seed)[1]
        majority.append((y == train_labels.mode().values).float().mean().item())
    return {
        "settings": {"test_size": TEST_SIZE, "retrain": retrain},
        "seeds": seeds,
        "arms": {"tiny": {"accuracy": sum(mlp) / len(mlp)}, "majority": {"accuracy": sum(majority) / len(majority)}},
        "timings": {},
    }
