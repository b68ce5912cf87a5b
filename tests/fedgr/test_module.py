"""The Lightning module and datamodule, the recipes, the published checkpoints and the optional Flower extra."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
import torch
import yaml

import zoo
from zoo._errors import MissingExtraError, ZooError
from zoo.eval.engine import evaluation
from zoo.fedgr.evaluate import PROTOCOL, score_pretrained, sieve_scores

ROOT = Path(__file__).resolve().parents[2]
GOLDEN_TOLERANCE = 0.005  # the checkpoint is the seed-0 run of the eval: it must reproduce it (0.5 points)
ARMS = ("fedgr", "fedavg", "fedprox", "coteaching")  # the arms with published checkpoints
PUBLISHED_SEED = PROTOCOL.published_seed


def _entry(arm):
    return evaluation("fedgr").entries[arm]


def _card(arm):
    return json.loads((_entry(arm).mirror_dir / "metrics.json").read_text())


def _recipe(arm):
    return yaml.safe_load((ROOT / _entry(arm).pretrained_cfg.recipe).read_text())


def _get(recipe, dotted):
    for part in dotted.split("."):
        recipe = recipe[part]
    return recipe


# The baselines' golden checks are slow-marked to keep the paper's default tests near 45 s; FedGR's runs by default.
GOLDEN_ARMS = [arm if arm == "fedgr" else pytest.param(arm, marks=pytest.mark.slow) for arm in ARMS]


@pytest.mark.parametrize("arm", GOLDEN_ARMS)
def test_pretrained_checkpoint_reproduces_its_card_accuracy(arm, hf_offline):
    card = _card(arm)
    published = card["per_seed"][arm][str(PUBLISHED_SEED)]
    module = zoo.load(_entry(arm).name, pretrained=True)
    accuracy = score_pretrained(module)["accuracy"]
    assert accuracy == pytest.approx(published["accuracy"], abs=GOLDEN_TOLERANCE)
    if arm == "fedgr":
        from zoo.fedgr.federation import FederationSpec, fashion_mnist_federation

        scores = sieve_scores(module, fashion_mnist_federation(FederationSpec(seed=PUBLISHED_SEED)))
        assert scores["noise_f1"] == pytest.approx(published["noise_f1"], abs=GOLDEN_TOLERANCE)


def test_pretrained_fedgr_on_a_small_slice_and_its_metadata(hf_offline):
    module = zoo.load("fedgr", pretrained=True)
    assert score_pretrained(module, limit=500)["accuracy"] > 0.6
    config = json.loads((zoo.get_entry("fedgr").mirror_dir / "config.json").read_text())
    metadata = config["metadata"]
    assert len(metadata["noise_estimates"]) == 10 and metadata["schedule"]["gmm_frozen_after_round"] == 15
    assert metadata["federation"]["spec"]["noise"] == "symmetric"
    assert metadata["gmm"]["means"][0] < metadata["gmm"]["means"][1]


def test_the_protocol_lists_every_published_arm():
    assert set(ARMS) == set(evaluation("fedgr").entries) and set(ARMS) <= set(PROTOCOL.arms)


@pytest.mark.parametrize("arm", ARMS)
def test_recipes_are_the_default_runs_of_the_evaluation(arm):
    """Seed 0 at default settings scores the published weights, so each recipe must be exactly that run."""
    from dataclasses import fields

    from zoo.fedgr.federation import FederationSpec

    recipe = _recipe(arm)
    assert recipe["model"]["init_args"]["method"] == arm
    assert recipe["data"] == _recipe("fedgr")["data"]  # every arm trains on the same clients
    for key, setting in PROTOCOL.settings.items():
        for recipe_key in setting.recipe_keys:
            assert _get(recipe, recipe_key) == setting.default, (key, recipe_key)
    for seed_key in PROTOCOL.seed_args:
        assert _get(recipe, seed_key) == PUBLISHED_SEED, seed_key
    # measure() rebuilds the clients from the settings: the recipe's other data arguments must be the defaults
    names = {f.name for f in fields(FederationSpec)}
    data_args = {k: v for k, v in recipe["data"]["init_args"].items() if k in names}
    assert FederationSpec(**data_args) == FederationSpec(seed=PUBLISHED_SEED)


def test_forward_accepts_uint8_and_float_images():
    module = zoo.load("fedgr").eval()
    images = torch.randint(0, 256, (3, 28, 28), dtype=torch.uint8)
    torch.testing.assert_close(module(images), module(images.float().unsqueeze(1) / 255.0))
    assert module.predict(images).shape == (3,)


def test_bad_arguments_give_clear_errors():
    from zoo.fedgr.data import FedNoisyDataModule
    from zoo.fedgr.module import FedGRModule

    with pytest.raises(ValueError, match="method must be one of"):
        FedGRModule(method="scaffold")
    with pytest.raises(ValueError, match="noise must be one of"):
        FedNoisyDataModule(noise="gaussian")
    module = FedGRModule(num_clients=10, samples_per_client=600)
    datamodule = FedNoisyDataModule(samples_per_client=32, val_size=0)
    datamodule.setup()
    with pytest.raises(ZooError, match="samples_per_client to match"):
        module.training_step(next(iter(datamodule.train_dataloader())), 0)


def test_loading_does_not_need_flower_and_the_flower_engine_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "flwr", None)  # as if flwr were not installed
    for name in [m for m in sys.modules if m.startswith(("zoo.fedgr.flower", "flwr."))]:
        monkeypatch.delitem(sys.modules, name)
    assert zoo.load("fedgr.fedavg") is not None
    with pytest.raises(MissingExtraError, match=r"pip install 'icml26-zoo\[fl\]'"):
        importlib.import_module("zoo.fedgr.flower")


def test_a_short_fit_records_the_test_curve_and_the_clients_validation_curve(tmp_path):
    import lightning.pytorch as pl

    from zoo.fedgr.config import LocalConfig
    from zoo.fedgr.data import FedNoisyDataModule
    from zoo.fedgr.module import FedGRModule

    module = FedGRModule(samples_per_client=30, curve_test_limit=50, local=LocalConfig(epochs=1))
    data = FedNoisyDataModule(samples_per_client=30, val_size=0, client_val_fraction=0.2)
    trainer = pl.Trainer(max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=tmp_path)  # fmt: skip
    trainer.fit(module, datamodule=data)
    assert len(module.test_curve) == 2 and len(module.client_val_curve) == 2
    assert all(0.0 <= v <= 1.0 for v in module.test_curve + module.client_val_curve)
    metadata = module.export_metadata()
    assert metadata["test_curve"] == [round(v, 4) for v in module.test_curve]
    assert metadata["federation"]["client_sizes"] == [24] * 10  # 6 of each client's 30 samples held out
