"""The Lightning pair: the module runs the bandit loop on the datamodule's instances; no weights."""

import lightning.pytorch as pl
import numpy as np
import pytest
import torch

import zoo
from zoo._errors import NoPretrainedWeightsError
from zoo.fair_lin_bandit.data import LinearBanditDataModule
from zoo.fair_lin_bandit.module import FairLinBanditModule


def test_validate_logs_every_p(tmp_path):
    module = FairLinBanditModule(algorithm="fair_ucb", horizon=600, replicates=2)
    data = LinearBanditDataModule(datasets=["phishing", "synthetic"], seeds=[0])
    trainer = pl.Trainer(logger=False, enable_progress_bar=False, enable_checkpointing=False, default_root_dir=tmp_path)
    (metrics,) = trainer.validate(module, datamodule=data, verbose=False)
    for tag in ("1", "0p5", "0", "m1", "m5"):
        assert 0 < metrics[f"val/rp_{tag}"] < 0.9
    assert metrics["val/rp_1"] <= metrics["val/rp_0"] <= metrics["val/rp_m5"]  # p-means are ordered
    assert set(module.curves) == {"phishing", "synthetic"} and len(module.curves["phishing"]) == 600


def test_forward_is_deterministic_and_shaped():
    module = FairLinBanditModule(algorithm="fair_pe", replicates=2)
    arms, mu, horizon = module.example_input_array
    first, second = module(arms, mu, horizon), module(arms, mu, horizon)
    assert first.shape == (1, 64) and torch.equal(first, second)
    assert (first > 0).all() and (first <= 0.9 + 1e-12).all()


def test_no_pretrained_weights():
    with pytest.raises(NoPretrainedWeightsError):
        zoo.load("fair_lin_bandit", pretrained=True)
    with pytest.raises(NotImplementedError, match="no learned weights"):
        FairLinBanditModule.from_pretrained("anything")


@pytest.mark.parametrize(
    "kwargs, match",
    [({"algorithm": "thompson"}, "algorithm"), ({"p": 2.0}, "p <= 1"), ({"horizon": 0}, "horizon")],
)
def test_bad_module_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        FairLinBanditModule(**kwargs)


def test_bad_datamodule_arguments():
    with pytest.raises(ValueError, match="unknown dataset"):
        LinearBanditDataModule(datasets=["iris"])
    with pytest.raises(ValueError, match="K >= 2"):
        LinearBanditDataModule(num_arms=1)


def test_module_rejects_a_zero_mean_for_nash():
    module = FairLinBanditModule(algorithm="oful", horizon=10, replicates=1)
    with pytest.raises(ValueError, match="floor"):
        module.run(np.eye(3), np.array([0.5, 0.0, 0.3]))
