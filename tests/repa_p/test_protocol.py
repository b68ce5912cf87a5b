"""The recipes are seed 0 of the ``zoo eval`` protocol: they must not drift apart."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from zoo._registry import get_entry
from zoo.repa_p.evaluate import ENTRIES, SETTINGS, module_args

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("arm", sorted(ENTRIES))
def test_recipe_is_seed_zero_of_the_eval_protocol(arm):
    entry = get_entry(ENTRIES[arm])
    recipe = yaml.safe_load((ROOT / entry.pretrained_cfg.recipe).read_text())
    assert recipe["seed_everything"] == 0
    assert recipe["trainer"]["max_steps"] == SETTINGS["max_steps"]
    assert recipe["trainer"]["val_check_interval"] == SETTINGS["val_every"]
    model = recipe["model"]["init_args"]
    for key, value in module_args(arm).items():
        assert model[key] == value, f"{entry.pretrained_cfg.recipe}: {key} differs from the eval protocol"
        assert entry.model_args[key] == value, f"{entry.name}: registry model_args {key} differs from the protocol"
    data = recipe["data"]["init_args"]
    for key in ("task", "size", "num_train", "num_val", "batch_size"):
        assert data[key] == SETTINGS[key]
    assert data["seed"] == SETTINGS["data_seed"]
