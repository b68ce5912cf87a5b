"""The published ``promise.adk``: its encoder is the datamodule's, it reproduces its card, the card holds its claims."""

from __future__ import annotations

import json

import pytest
import torch

import zoo
from zoo._registry import get_entry
from zoo.eval.engine import evaluation

NAME = "promise.adk"
if NAME not in zoo.list_models():  # registered once its cards (the 3-seed `zoo eval promise`) exist
    pytest.skip(f"{NAME} is not registered", allow_module_level=True)


@pytest.fixture(scope="module")
def card():
    return json.loads((get_entry(NAME).mirror_dir / "metrics.json").read_text())


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """The published weights from the offline mirror (a private HF cache, offline), loaded once."""
    import huggingface_hub.constants as hf_constants

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path_factory.mktemp("hf_cache")))
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
        return zoo.load(NAME, pretrained=True)


def test_one_entry_serves_every_ddpm_arm():
    assert {arm: entry.name for arm, entry in evaluation(NAME).entries.items()} == {"ddpm_debiased": NAME}


def test_published_encoder_matches_the_datamodules(published):
    """The encoder is recomputed from the data (a float64 PCA): equal up to float64 round-off, which depends on
    the number of BLAS threads (a 1-core machine differs from a 2-core one in the last bits)."""
    from zoo.promise.data import ProMiSEDataModule

    data = ProMiSEDataModule()
    data.setup()
    for key, value in data.encoder().items():
        mine = getattr(published, key)
        torch.testing.assert_close(mine, value.to(mine.dtype), rtol=0, atol=1e-10, msg=key)


def test_checkpoint_reproduces_its_cards_debiased_success(published, card):
    """Seed 0's debiased decoding (w, T from the card's run) on the 20 test ensembles: within 0.1 of the card."""
    from zoo.promise.evaluate import score_pretrained

    seed0 = card["per_seed"]["ddpm_debiased"]["0"]
    decoding = {"guidance": seed0["guidance"], "temperature": seed0["temperature"]}
    scores = score_pretrained(published, decoding=decoding)
    # Inclusive 0.1 (measured: seed 0 gives 0.50 against the 3-seed mean 0.58).
    mean = card["arms"]["ddpm_debiased"]["multistate_success"]
    assert scores["multistate_success"] == pytest.approx(mean, abs=0.1 + 1e-9)
    # Same weights, same noise: seed 0's own run, up to one ensemble of 20 flipping on float summation order.
    assert scores["multistate_success"] == pytest.approx(seed0["multistate_success"], abs=0.051)


def test_card_reports_every_arm_and_metric(card):
    arms = card["arms"]
    assert set(arms) == {"ddpm_debiased", "ddpm_biased", "ddpm_no_reweight", "ddpm_reweight_only",
                         "positive_control", "negative_control", "anm", "reference_train_resample",
                         "reference_train_resample_reweighted"}  # fmt: skip
    for arm, metrics in arms.items():
        for key in ("multistate_success", "coverage_open", "coverage_closed", "context_delta", "path_fidelity_rmsd"):
            assert key in metrics and f"{key}_std" in metrics, (arm, key)
        assert metrics["n_seeds"] >= 3
    assert "rmsd_open_closed" in arms["positive_control"]
    assert {"success_exposure_85", "success_exposure_70", "success_exposure_50"} <= set(arms["ddpm_biased"])
    assert card["settings"]["tuning"]["ddpm_biased"]["trials"] == card["settings"]["tuning"]["ddpm_debiased"]["trials"]
    claims = {claim["id"]: claim for claim in card["claims"]}
    assert claims["rmsd_open_closed"]["holds"] and claims["positive_control_success"]["holds"]
    assert claims["negative_control_success"]["holds"] and claims["negative_control_covers_closed"]["holds"]
