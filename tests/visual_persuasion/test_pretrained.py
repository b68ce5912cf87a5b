"""The published heads and optimised edits reproduce the card; the module's input checks."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import zoo


@pytest.fixture(scope="module")
def model():
    return zoo.load("visual_persuasion", pretrained=True)


def test_published_heads_reproduce_the_card_on_8_items(model):
    from zoo.visual_persuasion.evaluate import score_pretrained

    metrics = json.loads((zoo.get_entry("visual_persuasion").mirror_dir / "metrics.json").read_text())
    card = float(np.mean(metrics["extras"]["0"]["cvpo"]["p_per_item"][:8]))  # the card's seed-0 run, same items
    assert score_pretrained(model, limit=8)["p_beats_original"] == pytest.approx(card, abs=0.03)
    published = np.array(metrics["extras"]["0"]["cvpo"]["theta_per_item"])
    assert np.allclose(model.optimised_theta.numpy(), published, atol=1e-4)  # the card scored these edits


def test_forward_gives_every_heads_utility_and_rejects_bad_images(model):
    from zoo.visual_persuasion.images import base_items

    utilities = model(base_items("test")[:2])
    assert utilities.shape == (2, 4) and torch.isfinite(utilities).all()
    with pytest.raises(ValueError, match="uint8 RGB"):
        model(torch.zeros(2, 112, 112, 3))
    with pytest.raises(ValueError, match="uint8 RGB"):
        model(torch.zeros(2, 112, 112, dtype=torch.uint8))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"taste": (1.0, 2.0)}, "6 weights"), ({"ridge_alphas": (1.0, 1.0, 1.0)}, "ridge_alphas"),
     ({"temperature": 0.0}, "temperature"), ({"ssim_floor": 1.5}, "ssim_floor"),
     ({"utility_scale": 0.0}, "utility_scale")],
)  # fmt: skip
def test_bad_module_arguments_are_rejected(kwargs, match):
    from zoo.visual_persuasion.module import VisualPersuasionModule

    with pytest.raises(ValueError, match=match):
        VisualPersuasionModule(**kwargs)


def test_bad_datamodule_arguments_are_rejected():
    from zoo.visual_persuasion.data import PersuasionDataModule

    with pytest.raises(ValueError, match="num_items"):
        PersuasionDataModule(num_items=40)
    with pytest.raises(ValueError, match="num_train_edits"):
        PersuasionDataModule(num_train_edits=2)


def test_the_module_refuses_ddp_in_one_line():
    from types import SimpleNamespace

    from lightning.pytorch.strategies import DDPStrategy

    from zoo._distributed import DistributedRefusedError
    from zoo.visual_persuasion.module import VisualPersuasionModule

    module = VisualPersuasionModule()
    module._trainer = SimpleNamespace(world_size=2, strategy=DDPStrategy())
    with pytest.raises(DistributedRefusedError, match="closed-form"):
        module.setup("fit")
