"""The evaluation's inputs: the tuning record belongs to the recipe, and the tuning stands without the evaluation."""

import json
import subprocess
import sys

import yaml


def test_tuning_record_matches_the_recipe():
    from zoo._recipes import resolve_recipe
    from zoo.sae_transition_ood.evaluate import CHOSEN, PROTOCOL
    from zoo.sae_transition_ood.tune import GRIDS, RECIPE, TUNING_FILE, recipe_train_args

    record = json.loads(TUNING_FILE.read_text())
    assert record["train_args"] == recipe_train_args()  # the SAEs were tuned with the recipe's training
    assert record["grids"] == json.loads(json.dumps(GRIDS))
    with open(resolve_recipe(RECIPE)) as handle:
        model = yaml.safe_load(handle)["model"]["init_args"]
    chosen = CHOSEN[model["id_domain"]]["transition"]
    assert (model["k_sae"], model["top_k"], model["alpha"]) == (chosen["k_sae"], chosen["top_k"], chosen["alpha"])
    assert set(PROTOCOL.tuning) == set(PROTOCOL.arms)  # every arm says how it was tuned


def test_tuning_does_not_import_the_evaluation():
    code = "import sys, zoo.sae_transition_ood.tune; print('zoo.sae_transition_ood.evaluate' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
