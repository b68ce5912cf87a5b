"""The evaluation's bookkeeping: tuned overrides against the recipes, which fit each arm gets, timed arms, claims."""

import json
from pathlib import Path

import pytest

import zoo
from zoo.deepha import evaluate as E
from zoo.eval import Run
from zoo.eval.engine import evaluation
from zoo.eval.result import assemble


def test_tuned_overrides_only_name_what_differs_from_the_recipe():
    recipe = "recipes/deepha/babyai.yaml"
    values = E.recipe_values(recipe)
    assert set(values) == {*E.KNOBS, *E.SCHEDULE_KNOB} and all(values[k] is not None for k in E.KNOBS)
    record = {"arms": {"decoupled": {"chosen": {**values, "lr": values["lr"] * 3}}}}
    assert E.tuned_overrides("decoupled", recipe, record) == [f"--model.init_args.lr={values['lr'] * 3}"]
    assert E.tuned_overrides("flat", recipe, record) == []  # an arm not in the record keeps its recipe


def test_a_complete_plateau_tuning_sets_lr_epochs_and_schedule_and_an_unfinished_one_nothing(tmp_path, monkeypatch):
    chosen = {"lr": 0.0015, "max_epochs": 14, "schedule_epochs": 30}
    plateau = {
        "level_set": "default",
        "note": "plateau trials",
        "rule": {"first_check": 4, "max_epochs": 30},
        "arms": {"flat": {"chosen": chosen, "complete": False, "done_lr": [7.5e-4, 1.5e-3, 3e-3], "score": 0.7}},
    }
    assert E.plateau_entry("flat", record=plateau) == {}  # an unfinished grid changes nothing
    plateau["arms"]["flat"]["complete"] = True
    flat = {"chosen": {"lr": 0.003, "max_epochs": 8, "p_drop": 0.3}, "trials": [{}] * 4, "score": 0.6}
    base = {"arms": {"flat": flat}, "note": "tuning.json", "grid": {"lr": [0.001, 0.003]}}
    overrides = E.tuned_overrides("flat", record=base, plateau=E.plateau_entry("flat", record=plateau)["chosen"])
    expected = ["--model.init_args.lr=0.0015", "--trainer.max_epochs=14", "--model.init_args.schedule_epochs=30"]
    assert overrides == expected
    assert E.tuned_overrides("flat", record=base) == []  # tuning.json alone: the recipe's values

    (tmp_path / "plateau.json").write_text(json.dumps(plateau))
    monkeypatch.setattr(E, "plateau_file", lambda name="default": tmp_path / "plateau.json")
    monkeypatch.setattr(E, "tuning_record", lambda: base)
    assert E._tunings()["flat"].grid == {"lr": [0.001, 0.003]}  # LEVEL_SET None: tuning.json's record
    monkeypatch.setattr(E, "LEVEL_SET", "default")
    tuning = E._tunings()
    assert tuning["flat"].split == "validation" and tuning["flat"].trials == 3
    assert tuning["flat"].grid["lr"] == [7.5e-4, 1.5e-3, 3e-3] and "0.7" in tuning["flat"].note
    assert tuning["decoupled"].split == "none"  # no entry in either record


def test_every_arm_carries_its_switch_and_tuned_values():
    for arm in E.TRAINED:
        plateau = E.plateau_entry(arm, E.plateau_record(E.LEVEL_SET)).get("chosen")
        expected = (*E.ARM_SWITCH.get(arm, ()), *E.tuned_overrides(arm, plateau=plateau))
        assert tuple(E.PROTOCOL.arm(arm).overrides) == expected, arm
    assert E.PROTOCOL.arm("coa").overrides == E.PROTOCOL.arm("coa_compressed").overrides
    assert "--model.init_args.arm=coa_skill_only" in E.PROTOCOL.arm("coa_skill_only").overrides


def test_latency_metrics_are_never_measured_beside_another_piece():
    """Every arm reports ms_per_step (wall clock), so every arm must be timed: the harness then measures it alone."""
    assert all(E.PROTOCOL.is_timed(arm) for arm in E.PROTOCOL.arms)


@pytest.mark.skipif("deepha.babyai" not in zoo.list_models(), reason="deepha has no published entry yet")
def test_coa_and_coa_compressed_share_one_fit_and_the_published_weights(monkeypatch):
    fits = []

    def fake_fit(recipe, seed, overrides=(), seed_args=()):
        fits.append((recipe, seed, list(overrides)))
        return object()

    monkeypatch.setattr("zoo.eval.run.fit_recipe", fake_fit)
    entries = evaluation("deepha").entries
    run = Run(E.PROTOCOL, "deepha", 1, E.PROTOCOL.resolve(), entries)
    assert run.load("coa") is run.load("coa_compressed")  # one fit serves both
    assert fits == [("recipes/deepha/babyai.yaml", 1, list(E.PROTOCOL.arm("coa_compressed").overrides))]
    for arm in ("decoupled", "coa_skill_only", "coa_grounding_only", "flat"):
        run.load(arm)
        assert fits[-1] == (E.recipe_of(arm), 1, list(E.PROTOCOL.arm(arm).overrides)), arm
    assert len(fits) == 5
    published = Run(E.PROTOCOL, "deepha", 0, E.PROTOCOL.resolve(), entries)
    assert {
        arm for arm in E.PROTOCOL.arms if E.PROTOCOL.arm(arm).measure is None and published.uses_published(arm)
    } == {
        "coa_compressed",
        "coa",
        "flat",
        "reference_oracle_coa",
    }
    assert run.load("reference_oracle_coa") is run.load("coa_compressed")  # the oracle acts with the method's fit
    assert published.entry("coa").name == "deepha.babyai"


@pytest.mark.skipif("deepha.babyai" not in zoo.list_models(), reason="deepha has no published entry yet")
def test_claims_on_the_card_pieces_have_kinds_and_the_headroom_gate_is_per_seed():
    card = json.loads((zoo.get_entry("deepha").mirror_dir / "metrics.json").read_text())
    pieces = [
        {"arm": arm, "seed": int(seed), "scores": scores}
        for arm, runs in card["per_seed"].items()
        for seed, scores in runs.items()
    ]
    settings = {key: card["settings"][key] for key in E.PROTOCOL.settings}
    result = assemble(E.PROTOCOL, card["name"], pieces, settings, seeds=card["seeds"])
    claims = {claim["id"]: claim for claim in result["claims"]}
    assert [c["id"] for c in card["claims"]] == list(claims)
    flat = [scores["success_multistep"] for scores in card["per_seed"]["flat"].values()]
    gate = claims["headroom_flat_multistep"]
    assert gate["kind"] == "headroom" and gate["value"] == max(flat) and gate["holds"] == (max(flat) <= 0.85)
    assert claims["kv_cache_identical_outputs"]["kind"] == "validity"
    method = (E.PROTOCOL.method_name, *E.PROTOCOL.method_variants)  # coa: the method's weights, full context
    assert all(c["arm"] in method for c in claims.values() if c["kind"] == "paper")


@pytest.mark.parametrize("arm", ["coa_compressed", "flat"])
def test_tune_trials_are_equal_per_arm(arm):
    from zoo.deepha import tune

    trials = [tune.effective(arm, t) for t in tune.TRIALS]
    assert len(trials) == len(tune.TRIALS) == 4 and trials[0] == {}
    recipe = E.recipe_values(tune.recipe_of(arm))
    for trial in trials[1:]:  # each departure is one knob, set to the value the recipe does not hold
        assert all(v in tune.ALTERNATIVES[k] and v != recipe[k] for k, v in trial.items())
    if arm == "flat":  # the drop trial is the recipe trial: one fit, counted once per trial
        assert trials[3] == {}


def test_validation_success_averages_levels_on_validation_seeds(monkeypatch):
    """The tuning score: per-level success on validation episodes, coa_compressed with the protocol's W."""
    from zoo.deepha import evaluate, tune

    rates = {"GoToLocal": 1.0, "PickupLoc": 0.5, "PutNextLocal": 0.0, "UnlockLocal": 0.5, "Synth": 0.25}
    calls = []

    def fake_episodes(make_policy, level, split, count, horizon):
        calls.append((make_policy(), split, count))
        hits = round(rates[level] * count)
        return [{"success": i < hits} for i in range(count)]

    class Model:
        def batch_policy(self, window):
            return window

    monkeypatch.setattr(evaluate, "episodes", fake_episodes)
    score = tune.validation_success(Model(), "coa_compressed", count=4)
    assert score["success"] == rates
    assert score["success_all"] == pytest.approx(0.45)
    assert score["success_multistep"] == pytest.approx(0.25)
    window = evaluate.PROTOCOL.settings["window"].default
    assert calls == [(window, "validation", 4)] * 5
    calls.clear()
    tune.validation_success(Model(), "flat", count=4)
    assert {c[0] for c in calls} == {None}  # full context for every other arm


def test_apply_writes_the_plateau_choice_into_copies_of_the_recipes(tmp_path, monkeypatch):
    """tuning.json's knobs, then a complete plateau entry's lr, epochs and schedule span (a new line); comments
    stay; an incomplete plateau entry changes nothing."""
    from zoo.deepha import tune

    for key in ("coa", "flat"):
        copy = tmp_path / Path(E.RECIPES[key]).name
        copy.write_text(Path(E.RECIPES[key]).read_text())
        monkeypatch.setitem(E.RECIPES, key, str(copy))
    record = E.tuning_record()
    assert tune.apply_to_recipes(record, plateau={}) == []  # the recipes hold tuning.json's choices
    chosen = {"lr": 0.0015, "max_epochs": 14, "schedule_epochs": 30}
    plateau = {"arms": {"flat": {"complete": True, "chosen": chosen}, "coa_compressed": {"chosen": chosen}}}
    changed = tune.apply_to_recipes(record, plateau=plateau)
    flat = Path(E.RECIPES["flat"]).read_text()
    assert [line.split(": ", 1)[1] for line in changed] == ["lr = 0.0015", "max_epochs = 14", "schedule_epochs = 30"]
    assert E.recipe_values(E.RECIPES["flat"]) | chosen == E.recipe_values(E.RECIPES["flat"])
    assert "    schedule_epochs: 30  # " in flat and "# every arm the same budget" in flat
    assert tune.apply_to_recipes(record, plateau=plateau) == []  # idempotent
