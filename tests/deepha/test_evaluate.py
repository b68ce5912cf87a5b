"""The evaluation's bookkeeping: tuned overrides against the recipes, and (arm, seed) pieces read back."""

import json
from types import SimpleNamespace

import pytest

from zoo.deepha import evaluate as E


class _Entry:
    def __init__(self, recipe):
        self.pretrained_cfg = SimpleNamespace(recipe=recipe, sha256={}, has_weights=False)


def _run(seed=1, settings=None):
    entries = {"coa_compressed": _Entry("recipes/deepha/babyai.yaml"), "flat": _Entry("recipes/deepha/flat.yaml")}
    return SimpleNamespace(
        seed=seed, settings=settings or E.PROTOCOL.resolve(), retrain=False, weights=None, cache={},
        entry=entries.__getitem__, uses_published=lambda arm, overrides=(): False,
    )  # fmt: skip


def test_tuned_overrides_only_name_what_differs_from_the_recipe():
    recipe = "recipes/deepha/babyai.yaml"
    values = E._recipe_values(recipe)
    assert set(values) == set(E.KNOBS) and all(v is not None for v in values.values())
    record = {"arms": {"decoupled": {"chosen": {**values, "lr": values["lr"] * 3}}}}
    assert E.tuned_overrides("decoupled", recipe, record) == [f"--model.init_args.lr={values['lr'] * 3}"]
    assert E.tuned_overrides("flat", recipe, record) == []  # an arm not in the record keeps its recipe


def test_load_args_share_the_coa_fit_and_switch_the_arm():
    run = _run()
    assert E.load_args("coa", run)[0] == E.load_args("coa_compressed", run)[0] == "coa_compressed"
    key, overrides, base = E.load_args("coa_skill_only", run)
    assert base == "coa_compressed" and "--model.init_args.arm=coa_skill_only" in overrides
    assert E.load_args("flat", run)[2] is None


def test_pieces_are_keyed_and_read_back(tmp_path):
    run = _run()
    assert E.piece("flat", run) is None or E.CACHE_ENV  # no folder: nothing stored
    paths = {E.piece(arm, run, tmp_path) for arm in E.PROTOCOL.arms}
    paths |= {E.piece("flat", _run(seed=2), tmp_path), E.piece("flat", _run(settings={**run.settings, "window": 2}),
                                                                     tmp_path)}  # fmt: skip
    assert len(paths) == len(E.PROTOCOL.arms) + 2
    stored = {"success_multistep": 0.5}
    E.piece("flat", run, tmp_path).write_text(json.dumps(stored))
    run.cache["pieces"] = str(tmp_path)
    assert E.measure("flat", run) == stored


@pytest.mark.parametrize("arm", ["coa_compressed", "flat"])
def test_tune_trials_are_equal_per_arm(arm):
    from zoo.deepha import tune

    trials = [tune.effective(arm, t) for t in tune.TRIALS]
    assert len(trials) == len(tune.TRIALS) == 4 and trials[0] == {}
    recipe = E._recipe_values(tune.recipe_of(arm))
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
