"""The eval protocol: the recipes are its seed-0 runs, its settings change what is measured, bad ones fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

import zoo
from zoo._errors import ZooError
from zoo.eval import Run
from zoo.eval.engine import Request, evaluation, measure, measure_task
from zoo.eval.result import assemble
from zoo.repa_p import evaluate
from zoo.repa_p.evaluate import CHECK_EVERY, DATA_SEED, PROTOCOL
from zoo.repa_p.pde import grid_spacing

ROOT = Path(__file__).resolve().parents[2]
ENTRIES = evaluation("repa_p").entries
DEFAULTS = PROTOCOL.resolve()


def _run(seed: int = 0, **settings) -> Run:
    return Run(PROTOCOL, "repa_p", seed, PROTOCOL.resolve(settings), ENTRIES)


@pytest.mark.parametrize("arm", sorted(ENTRIES))
def test_published_weights_are_seed_zero_of_the_recipe_at_the_default_settings(arm):
    """``run.load`` hands out the published weights at default settings, so they must be that run."""
    entry = ENTRIES[arm]
    recipe = yaml.safe_load((ROOT / entry.pretrained_cfg.recipe).read_text())
    assert recipe["seed_everything"] == 0 == PROTOCOL.published_seed
    assert recipe["trainer"]["max_steps"] == DEFAULTS["max_steps"]
    assert recipe["trainer"]["val_check_interval"] == CHECK_EVERY
    assert recipe["data"]["init_args"]["test_splits"] == DEFAULTS["test_splits"]
    assert recipe["data"]["init_args"]["num_test"] == DEFAULTS["test_conditions"]
    assert recipe["model"]["init_args"]["sample_steps"] == DEFAULTS["sample_steps"]
    assert recipe["data"]["init_args"]["seed"] == DATA_SEED
    model = recipe["model"]["init_args"]
    config = json.loads((entry.mirror_dir / "config.json").read_text())
    for key, value in model.items():
        assert config["init_args"][key] == value, f"{entry.name}: published {key} differs from its recipe"
    for key, value in entry.model_args.items():
        assert model[key] == value, f"{entry.name}: registry model_args {key} differs from its recipe"
    training = config["metadata"]["training"]
    assert (training["seed"], training["global_step"]) == (0, DEFAULTS["max_steps"])


SCORES = {f"{m}_{s}" for m in evaluate.METRICS for s in ("id", "ood")} | set(evaluate.TARGETS)


def _reference(arm="reference_zero_field", target=20.0, **settings):
    run = _run(**settings)
    for quantity in evaluate.TARGETS.values():
        run.memo(f"target_{quantity}", lambda: target)  # PIDM's runs are not needed
    return measure_task(PROTOCOL, run, (arm,))[arm]


def _zero_field(**settings):
    return _reference(**settings)


def test_zero_field_scores_the_source_and_the_true_field():
    """U = 0 leaves the whole source as residual and the whole field as error."""
    from zoo.repa_p.tasks import get_task

    scores = _zero_field(test_conditions=8)
    task = get_task("poisson", 32)
    x0, charge = task.generate("id", 8, DATA_SEED)
    source = charge[..., 1:-1, 1:-1].abs() / grid_spacing(32) ** 2
    assert scores["residual_id"] == pytest.approx(source.mean().item(), rel=1e-5)
    assert scores["mse_id"] == pytest.approx(x0.square().mean().item(), rel=1e-5)
    assert set(scores) == SCORES
    # It needs no training: 0 steps when its validation residuals (~2, ~11) meet the target, else past the end.
    assert scores["steps_to_residual_target"] == scores["steps_to_spectral_target"] == 0
    late = _reference(target=1.0e-3, test_conditions=8)
    assert late["steps_to_residual_target"] == late["steps_to_spectral_target"] == DEFAULTS["max_steps"] + CHECK_EVERY


def test_fd_solver_reference_is_the_physical_limit():
    scores = _reference("reference_fd_solver", target=1e-6, test_conditions=8)
    # Round-off of a residual whose terms are O(q / h^2) ~ 1e3 (the zero field scores ~2), and float32 test fields.
    assert scores["residual_id"] < 1e-5 and scores["residual_ood"] < 1e-5 and scores["residual_spectral_id"] < 1e-5
    assert scores["mse_id"] < 1e-12 and scores["steps_to_residual_target"] == 0


def test_noisy_exact_fails_the_five_point_residual_and_passes_the_spectral_one():
    """Issue 75's noise test: white noise of rms 1% of the fields' spread on the exact solution."""
    zero = _zero_field(test_conditions=16)
    noisy = _reference("reference_noisy_exact", test_conditions=16)
    assert noisy["residual_id"] > zero["residual_id"]  # the 5-point residual reads pixel roughness
    assert noisy["residual_spectral_id"] < 0.1 * zero["residual_spectral_id"]  # the spectral one does not
    assert noisy["mse_id"] < 1e-3 * zero["mse_id"]


def test_noisy_exact_has_the_asked_rms_and_is_fixed():
    x0 = torch.randn(64, 1, 32, 32, generator=torch.Generator().manual_seed(3)) * 0.1
    noise = evaluate.noisy_exact(x0) - x0
    assert noise.square().mean().sqrt().item() == pytest.approx(evaluate.NOISE_RMS * x0.std().item(), rel=0.02)
    assert torch.equal(evaluate.noisy_exact(x0), evaluate.noisy_exact(x0))


def test_settings_change_what_is_measured():
    default = _zero_field(test_conditions=8)
    strong = _zero_field(test_conditions=8, test_splits=["id", "ood_strong"])
    assert set(strong) == SCORES
    assert strong["residual_id"] == default["residual_id"]
    # |q| in [1.5, 2.5] (ood_strong) against 4 charges of |q| in [0.5, 1.5] (ood_k4): a larger squared field.
    assert strong["mse_ood"] > 1.3 * default["mse_ood"]
    assert _zero_field(test_conditions=4)["mse_id"] != default["mse_id"]


def test_set_runs_the_protocol_end_to_end_on_a_cheap_slice(hf_cache, hf_offline, monkeypatch):
    monkeypatch.setenv("ZOO_EVAL_CACHE", "off")  # measure, never read a stored piece
    overrides = PROTOCOL.parse_overrides(
        ["test_conditions=4", "sample_steps=2", "test_splits=id,ood_wall", "target_seeds=0"]
    )
    pieces = measure("repa_p", Request(arms=("repa_p", "reference_zero_field"), seeds=(0,), overrides=overrides))
    result = assemble(
        PROTOCOL, "repa_p.poisson_32", pieces, PROTOCOL.resolve(overrides), seeds=[0], overrides=overrides
    )
    assert result["settings"]["test_splits"] == ["id", "ood_wall"]
    assert result["settings"]["overrides"]["sample_steps"] == 2
    assert "residual_ood_wall" not in result["arms"]["repa_p"]  # ood_wall is now the *_ood split
    assert result["arms"]["repa_p"]["steps_to_spectral_target"] > 0
    claims = PROTOCOL.claims(result)  # the claims of the arms measured: repa_p against the zero field
    assert {(c.arm, c.versus, c.kind) for c in claims} == {("repa_p", "reference_zero_field", "paper")}
    assert set(result["extras"]["0"]["golden"]) == {"repa_p"}  # seed 0 at default recipe settings: published
    # The targets are PIDM's final validation residuals (seed 0 only here), read from its published curve.
    pidm = json.loads((ENTRIES["pidm"].mirror_dir / "config.json").read_text())["metadata"]["val_history"]
    targets = result["extras"]["0"]["targets"]
    assert targets == pytest.approx({q: pidm[-1][q] for q in ("residual", "residual_spectral")})


def test_validation_target_averages_pidm_fits_of_the_target_seeds_once_per_run(hf_cache, hf_offline, monkeypatch):
    """Seed 1's target needs PIDM's fits of seeds 0 (published), 1 and 2: through run.for_seed, measured once."""
    from zoo.repa_p.module import REPAPModule

    trained = []

    def fit(run, recipe, overrides=()):  # the harness's fit, recorded: a module with a made-up final check
        trained.append((recipe, run.seed))
        module = REPAPModule(**ENTRIES["pidm"].model_args)
        module.val_history = [{"step": 5000, "residual": 9.0, "mse": 0.1, "residual_spectral": 2.0 + run.seed}]
        return module

    monkeypatch.setattr(Run, "fit", fit)
    run = _run(1)
    published = zoo.load(ENTRIES["pidm"].name, pretrained=True).val_history[-1]["residual_spectral"]
    assert evaluate.validation_target(run) == pytest.approx((published + 3.0 + 4.0) / 3)
    assert evaluate.validation_target(run) == pytest.approx((published + 3.0 + 4.0) / 3)
    assert trained == [(ENTRIES["pidm"].pretrained_cfg.recipe, 1), (ENTRIES["pidm"].pretrained_cfg.recipe, 2)]
    with pytest.raises(ZooError, match="give at least one PIDM seed"):
        evaluate.validation_target(_run(1, target_seeds=[]))


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        (
            "noise=1",
            "unknown setting 'noise'; valid keys: test_conditions, sample_steps, test_splits, max_steps, target_seeds",
        ),
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
    others = ("test_conditions", "sample_steps", "test_splits", "target_seeds")
    assert all(not PROTOCOL.settings[key].recipe_keys for key in others)


def test_steps_to_target_is_the_first_check_at_or_below_it_and_one_interval_past_the_end_if_none():
    curve = [[100, 9.0, 0.1, 5.0], [200, 3.0, 0.1, 2.0], [300, 4.0, 0.1, 1.0]]  # rows of evaluate.CURVE
    assert evaluate._steps_to(curve, "residual_spectral", 2.0) == 200
    assert evaluate._steps_to(curve, "residual", 3.5) == 200  # the 5-point column is read for its own target
    assert evaluate._steps_to(curve, "residual_spectral", 0.5) == 300 + CHECK_EVERY
