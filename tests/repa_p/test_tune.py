"""The tuning record: its score, the validity gates, the gated selection and tuning.json's own choice."""

from __future__ import annotations

import json

import pytest
import yaml

from zoo.repa_p import tune

ZERO = {"residual": 2.0, "mse": 0.01, "residual_spectral": 10.0}


def _trial(residual: float, mse: float, stage: int = 4, spectral: float = 5.0, **extra) -> dict:
    final = {"residual": residual, "mse": mse, "residual_spectral": spectral}
    record = {"arm": "pidm", "stage": stage, "c_res": 0.01, "val_residual": residual, "val_mse": mse}
    return record | {"val_residual_spectral": spectral, "score": tune.score(final, ZERO, stage)} | extra


def test_score_is_the_geometric_mean_of_the_two_ratios_up_to_stage_4():
    # residual ratio 0.5, MSE ratio 0.125: sqrt(0.0625) = 0.25
    assert tune.score({"residual": 1.0, "mse": 0.00125}, ZERO, stage=4) == pytest.approx(0.25)
    assert tune.score(ZERO, ZERO, stage=4) == pytest.approx(1.0)


def test_stage_5_scores_the_spectral_residual_against_the_zero_fields():
    assert tune.STAGE == tune.SPECTRAL_STAGE == 5
    final = {"residual": 9.0, "mse": 1.0, "residual_spectral": 2.5}  # the 5-point residual and MSE do not enter
    assert tune.score(final, ZERO) == pytest.approx(0.25)


def test_gates_need_a_residual_below_the_zero_fields_and_at_most_0_3x_its_mse():
    assert tune.passes_gates(_trial(1.99, 0.003), ZERO)
    assert not tune.passes_gates(_trial(2.0, 0.001), ZERO)  # equal residual is not below
    assert not tune.passes_gates(_trial(1.0, 0.0031), ZERO)


def test_stage_5_gates_on_the_spectral_residual():
    assert tune.passes_gates(_trial(3.0, 0.003, stage=5, spectral=9.9), ZERO)  # 5-point above zero: not read
    assert not tune.passes_gates(_trial(1.0, 0.003, stage=5, spectral=10.0), ZERO)
    assert not tune.passes_gates(_trial(1.0, 0.0031, stage=5, spectral=1.0), ZERO)


def test_select_prefers_the_gated_trial_of_the_latest_stage():
    rough = _trial(2.67, 5.5e-5, c_res=0.01)  # lower score, residual above the zero field's
    smooth = _trial(1.79, 8.4e-5, c_res=0.01, late_physics_factor=100.0)
    assert rough["score"] < smooth["score"]
    assert tune.select([rough, smooth], ZERO) is smooth
    assert tune.select([rough], ZERO) is rough  # none passes: the lowest score of all
    older = _trial(0.5, 1e-6, stage=3)  # better, but an earlier stage does not compete
    assert tune.select([older, rough, smooth], ZERO) is smooth


def test_the_recorded_selection_is_what_select_gives_and_what_the_recipes_use():
    record = json.loads(tune.TUNING_FILE.read_text())
    zero = record["zero_field"]
    for arm, chosen in record["selection"].items():
        best = tune.select([t for t in record["trials"] if t["arm"] == arm], zero)
        assert {k: best.get(k) for k in chosen} == chosen
        assert tune.passes_gates(best, zero)
        recipe = yaml.safe_load((tune.TUNING_FILE.parents[2] / tune.RECIPES[arm]).read_text())
        init = recipe["model"]["init_args"]
        assert init["c_res"] == chosen["c_res"]
        assert init.get("late_physics_factor", 1.0) == chosen["late_physics_factor"]
        assert init.get("late_physics_from", 1.0) == chosen["late_physics_from"]
        assert init.get("late_physics_ramp", "step") == chosen["late_physics_ramp"]


def test_tune_does_not_import_the_evaluation():
    """No import circle: the evaluation reads the tuning record, the tuning never imports the evaluation."""
    import subprocess
    import sys

    code = "import sys, zoo.repa_p.tune; assert 'zoo.repa_p.evaluate' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
