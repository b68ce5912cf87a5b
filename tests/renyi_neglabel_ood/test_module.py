"""The LightningModule with its datamodule (tier 1, small), the published detector's golden slice, bad inputs."""

import json

import lightning.pytorch as pl
import numpy as np
import pytest
import torch

import zoo
from zoo._errors import ZooError
from zoo.renyi_neglabel_ood.data import NegLabelOODDataModule
from zoo.renyi_neglabel_ood.module import RenyiOODModule
from zoo.renyi_neglabel_ood.pipeline import grid_trials

NAME = "renyi_neglabel_ood.fashion_mnist"


def _fit(tune: bool):
    data = NegLabelOODDataModule(tier=1, tier1_dim=48, tier1_images=150, tier1_kappa=40.0)
    model = RenyiOODModule(
        text_dim=48, image_dim=48, num_id=100, center=False, tune=tune, noun_fraction=0.5, adjective_fraction=0.5
    )
    trainer = pl.Trainer(
        max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False
    )
    trainer.fit(model, datamodule=data)
    return model, trainer, data


def test_fit_mines_a_bank_tunes_and_detects():
    model, trainer, data = _fit(tune=True)
    assert model.hparams.num_negatives == len(model.bank_text) == 1000  # half of the 2000 synthetic negatives
    assert model.tuning["trials"] == grid_trials("renyi") == 29
    # the bridge of tier 1 maps a space onto itself: close to the identity on unit vectors
    x = torch.nn.functional.normalize(torch.randn(5, 48), dim=1)
    assert torch.nn.functional.cosine_similarity(x @ model.projection + model.bias, x).min() > 0.95
    metrics = trainer.validate(model, datamodule=data, verbose=False)[0]
    assert metrics["val/auroc_synthetic"] > 0.8


def test_bad_inputs():
    model = RenyiOODModule(text_dim=8, image_dim=16, num_id=3)
    with pytest.raises(ZooError, match=r"expected image features \(N, 16\)"):
        model(torch.zeros(2, 8))
    with pytest.raises(ZooError, match="NaN"):
        model.score_features(np.full((2, 16), np.nan))
    with pytest.raises(ZooError, match="r must be > 1"):
        RenyiOODModule(r=1.0)
    with pytest.raises(ZooError, match="tau must be a positive"):
        RenyiOODModule(tau=0.0)
    with pytest.raises(ZooError, match="tier must be 1 or 2"):
        NegLabelOODDataModule(tier=3)


@pytest.mark.skipif(NAME not in zoo.list_models(), reason="the entry is registered once its card exists")
def test_pretrained_reproduces_its_card_on_a_slice(hf_cache, hf_offline):
    from zoo.renyi_neglabel_ood.evaluate import score_pretrained

    entry = zoo.get_entry(NAME)
    metrics = json.loads((entry.mirror_dir / "metrics.json").read_text())
    recorded = metrics["extras"]["0"]["published_slice"]
    model = zoo.load(NAME, pretrained=True)
    assert len(model.negative_words) == len(model.bank_text) > 100
    measured = score_pretrained(model, limit=recorded["limit"])
    for key in ("tier2_auroc_far", "tier2_auroc_mnist", "tier2_auroc_atari"):
        assert measured[key] == pytest.approx(recorded[key], abs=0.01), key
    card = metrics["per_seed"]["renyi"]["0"]["tier2_auroc_far"]  # all test images, seed 0
    assert measured["tier2_auroc_far"] == pytest.approx(card, abs=0.03)
