"""The published BOBA checkpoint: its surrogate reproduces the card's Spearman correlation, its campaign record
is consistent with the card, and the module refuses bad input clearly."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("rdkit")

import zoo  # noqa: E402
from zoo._errors import ZooError  # noqa: E402

NAME = "boba.amide_cap14"


@pytest.fixture(scope="module")
def published():
    return zoo.load(NAME, pretrained=True)


@pytest.fixture(scope="module")
def card():
    return json.loads((zoo.get_entry(NAME).mirror_dir / "metrics.json").read_text())


def test_published_surrogate_reproduces_the_cards_spearman_on_the_heldout_slice(published, card):
    from zoo.boba.evaluate import score_pretrained

    rho = score_pretrained(published)["surrogate_spearman"]
    assert rho == pytest.approx(card["per_seed"]["boba_ucb"]["0"]["surrogate_spearman"], abs=0.02)


def test_published_campaign_matches_the_card(published, card):
    record = published.campaign_record
    seed0 = card["per_seed"]["boba_ucb"]["0"]
    assert record["oracle"] == "test" and record["partition"] == "acid"
    assert record["oracle_calls"] == seed0["oracle_calls"] == len(set(record["labelled"]))
    assert record["surrogate_inferences"] == seed0["surrogate_inferences"]
    assert record["recall_top1pct"] == pytest.approx(seed0["recall_top1pct"], abs=1e-6)
    # the initial design touches every arm once (230 arms <= 455 designs), then one pull per arm scored in a round
    assert int(published.arm_pulls.sum()) == record["num_arms"] + sum(len(e["arms"]) for e in record["rounds"])
    assert published.library_record["n_acids"] * published.library_record["n_amines"] == record["size"]


def test_predict_refuses_unpacked_fingerprints(published):
    with pytest.raises(ZooError, match="packed uint8 fingerprints"):
        published.predict(np.zeros((2, 2048), np.uint8))


def test_bad_campaign_arguments_are_refused():
    from zoo.boba.module import BOBAModule

    with pytest.raises(ZooError, match="strategy must be one of"):
        BOBAModule(strategy="molpal")
    with pytest.raises(ZooError, match="arm_fraction must be in"):
        BOBAModule(arm_fraction=1.5)


def test_recipe_holds_the_tuned_boba_values():
    from pathlib import Path

    import yaml

    from zoo.boba.evaluate import TUNED

    root = Path(__file__).resolve().parents[2]
    recipe = yaml.safe_load((root / zoo.get_entry(NAME).pretrained_cfg.recipe).read_text())
    args = recipe["model"]["init_args"]
    for key, value in TUNED["boba_ucb"].items():
        assert args[key] == value, f"recipe {key}={args[key]} but tuning.json chose {value}"
