"""The tuning script: it tunes on the recipes' data, gives both arms the same trials, and its arms can run apart."""

import json
from pathlib import Path

import yaml

from zoo.olaf_world import tune

RECIPES = Path(__file__).resolve().parents[2] / "recipes" / "olaf_world"


def test_tunes_on_the_recipes_data():
    for name in ("align.yaml", "vae.yaml"):
        data = yaml.safe_load((RECIPES / name).read_text())["data"]["init_args"]
        assert data == tune.DATA
    assert tune.DATA["context_b"] == "zoom" and tune.DATA["teacher"] == "phase_correlation"


def test_equal_trials_per_arm_and_the_recipes_steps():
    assert len(tune.trials("lam_vae")) == len(tune.trials("lam_align")) == 6
    for name in ("align.yaml", "vae.yaml"):
        assert yaml.safe_load((RECIPES / name).read_text())["trainer"]["max_steps"] == tune.STEPS
    assert max(tune.STEP_EVALS) == tune.STEPS


def test_save_trial_keeps_the_other_arm(tmp_path):
    out = tmp_path / "trials.json"
    tune.save_trial(out, "lam_vae", [{"config": {"beta": 1e-7}, "evals": []}])
    record = tune.save_trial(out, "lam_align", [{"config": {"align_weight": 0.005}, "evals": []}])
    assert set(record) == {"lam_vae", "lam_align"}
    assert json.loads(out.read_text())["lam_vae"][0]["config"] == {"beta": 1e-7}


def test_write_tuning_refuses_an_unfinished_grid(tmp_path):
    out = tmp_path / "tuning.json"
    try:
        tune.write_tuning({"lam_vae": [], "lam_align": []}, out)
    except SystemExit as error:
        assert "trials done" in str(error)
    else:
        raise AssertionError("an unfinished grid was written")
    assert not out.exists()
