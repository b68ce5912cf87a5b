"""The eval protocol: the recipes are its seed-0 runs, its settings change what is measured, bad ones fail."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from zoo._errors import ZooError
from zoo._eval import paper_arms, run_eval
from zoo.repa_p.evaluate import DATA_SEED, PROTOCOL, measure
from zoo.repa_p.pde import grid_spacing

ROOT = Path(__file__).resolve().parents[2]
ENTRIES = paper_arms("repa_p")
DEFAULTS = {key: setting.default for key, setting in PROTOCOL.settings.items()}


@pytest.mark.parametrize("arm", sorted(ENTRIES))
def test_published_weights_are_seed_zero_of_the_recipe_at_the_default_settings(arm):
    """``run.load`` hands out the published weights at default settings, so they must be that run."""
    entry = ENTRIES[arm]
    recipe = yaml.safe_load((ROOT / entry.pretrained_cfg.recipe).read_text())
    assert recipe["seed_everything"] == 0 == PROTOCOL.published_seed
    assert recipe["trainer"]["max_steps"] == DEFAULTS["max_steps"]
    assert recipe["data"]["init_args"]["seed"] == DATA_SEED
    model = recipe["model"]["init_args"]
    config = json.loads((entry.mirror_dir / "config.json").read_text())
    for key, value in model.items():
        assert config["init_args"][key] == value, f"{entry.name}: published {key} differs from its recipe"
    for key, value in entry.model_args.items():
        assert model[key] == value, f"{entry.name}: registry model_args {key} differs from its recipe"
    training = config["metadata"]["training"]
    assert (training["seed"], training["global_step"]) == (0, DEFAULTS["max_steps"])


def _zero_field(**settings):
    run = SimpleNamespace(settings={**DEFAULTS, **settings}, entry=lambda arm: ENTRIES[arm])
    return measure("reference_zero_field", run)


def test_zero_field_scores_the_source_and_the_true_field():
    """U = 0 leaves the whole source as residual and the whole field as error."""
    from zoo.repa_p.tasks import get_task

    scores = _zero_field(test_conditions=8)
    task = get_task("poisson", 32)
    x0, charge = task.generate("id", 8, DATA_SEED)
    source = charge[..., 1:-1, 1:-1].abs() / grid_spacing(32) ** 2
    assert scores["residual_id"] == pytest.approx(source.mean().item(), rel=1e-5)
    assert scores["mse_id"] == pytest.approx(x0.square().mean().item(), rel=1e-5)
    assert set(scores) == {"residual_id", "mse_id", "residual_ood", "mse_ood", "residual_ood_wall", "mse_ood_wall"}


def test_settings_change_what_is_measured():
    default = _zero_field(test_conditions=8)
    strong = _zero_field(test_conditions=8, test_splits=["id", "ood_strong"])
    assert set(strong) == {"residual_id", "mse_id", "residual_ood", "mse_ood"}
    assert strong["residual_id"] == default["residual_id"]
    # |q| in [1.5, 2.5] (ood_strong) against 4 charges of |q| in [0.5, 1.5] (ood_k4): a larger squared field.
    assert strong["mse_ood"] > 1.3 * default["mse_ood"]
    assert _zero_field(test_conditions=4)["mse_id"] != default["mse_id"]


def test_set_runs_the_protocol_end_to_end_on_a_cheap_slice(hf_cache, hf_offline):
    overrides = ["test_conditions=4", "sample_steps=2", "test_splits=id,ood_wall"]
    result = run_eval("repa_p", seeds=[0], overrides=overrides, arms=["repa_p", "reference_zero_field"])
    assert result["settings"]["test_splits"] == ["id", "ood_wall"]
    assert result["settings"]["overrides"]["sample_steps"] == 2
    assert "residual_ood_wall" not in result["arms"]["repa_p"]  # ood_wall is now the *_ood split
    assert result["arms"]["repa_p"]["steps_to_residual_target"] > 0
    assert {c["versus"] for c in result["claims"]} == {"reference_zero_field"}
    assert set(result["extras"]["0"]["golden"]) == {"repa_p"}  # seed 0 at default recipe settings: published


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("noise=1", "unknown setting 'noise'; valid keys: test_conditions, sample_steps, test_splits, max_steps"),
        ("max_steps=many", "--set max_steps=many: expected an integer"),
        ("max_steps=10", "--set max_steps=10: must be at least 100"),
        ("test_conditions=0", "--set test_conditions=0: must be at least 1"),
    ],
)
def test_bad_settings_give_one_line_errors(pair, message):
    with pytest.raises(ZooError) as error:
        PROTOCOL.parse_overrides([pair])
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("splits", [["ood_k4"], ["id"], ["id", "ood_k5"], ["id", "train"]])
def test_test_splits_need_id_and_a_known_ood_split(splits):
    with pytest.raises(ZooError, match="give id and at least one of"):
        _zero_field(test_splits=splits)


def test_max_steps_retrains_every_arm_through_the_recipe():
    assert PROTOCOL.settings["max_steps"].recipe_keys == ("trainer.max_steps",)
    assert all(not PROTOCOL.settings[key].recipe_keys for key in ("test_conditions", "sample_steps", "test_splits"))
