"""Plateau tuning (issue #71): the stopping rule, the grid extension, the record, the schedule replay, level sets."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from zoo.deepha import tune_plateau as T


def _checks(*values, first=1):
    return [{"epoch": first + i, "success_all": v} for i, v in enumerate(values)]


def test_plateau_is_reached_after_patience_checks_without_improvement():
    assert T.best_check([]) is None and not T.plateau_reached([], 3)
    history = _checks(0.2, 0.4, 0.4, 0.39, 0.4, first=4)  # a tie is no improvement: epoch 5 stays the best
    assert T.best_check(history)["epoch"] == 5
    assert not T.plateau_reached(history[:4], 3) and T.plateau_reached(history, 3)
    assert not T.plateau_reached(_checks(0.1, 0.2, 0.3, 0.4), 1)  # still improving
    assert T.best_check(_checks(0.1 + 0.2, 0.3))["epoch"] == 1  # float sums of equal counts tie


def _trial(lr, score, stopped="plateau", epoch=10):
    return {"lr": lr, "best": {"epoch": epoch, "success_all": score, "success_multistep": score}, "stopped": stopped}


def test_the_grid_runs_first_then_grows_past_the_edge_the_best_sits_on():
    grid = (1e-3, 2e-3, 4e-3)
    assert T.planned_rates([], grid) == list(grid)
    assert T.planned_rates([_trial(4e-3, 0.9)], grid) == list(grid)  # an edge is known only once the grid ran
    interior = [_trial(1e-3, 0.5), _trial(2e-3, 0.6), _trial(4e-3, 0.55)]
    assert T.planned_rates(interior, grid) == list(grid)
    top = [_trial(1e-3, 0.5), _trial(2e-3, 0.6), _trial(4e-3, 0.7)]
    assert T.planned_rates(top, grid) == [*grid, 8e-3]
    assert T.planned_rates([*top, _trial(8e-3, 0.65)], grid) == [*grid, 8e-3]  # 4e-3 is interior now
    bottom = [_trial(1e-3, 0.7), _trial(2e-3, 0.6), _trial(4e-3, 0.5)]
    assert T.planned_rates(bottom, grid) == [5e-4, *grid]
    assert T.planned_rates(bottom, grid, limits=(1e-3, 1.0)) == list(grid)  # not past the limit
    assert T.choose([_trial(1e-3, 0.6), _trial(2e-3, 0.6)])["lr"] == 1e-3  # ties: the smaller rate


def test_a_trials_key_ignores_the_knobs_it_sets_and_the_recipes_comments(tmp_path, monkeypatch):
    """``tune --apply`` writes the chosen lr and epochs into the recipe: the trials stay; another recipe value or
    another fixed knob (p_noise from tuning.json) makes other trials."""
    from zoo.deepha import evaluate as E

    recipe = tmp_path / "flat.yaml"
    text = Path(E.RECIPES["flat"]).read_text()
    recipe.write_text(text)
    monkeypatch.setitem(E.RECIPES, "flat", str(recipe))
    key = T.trial_key("flat", 1.5e-3, "default", False)
    assert T.trial_key("flat", 3e-3, "default", False) != key
    assert T.trial_key("flat", 1.5e-3, "two_step", False) != key
    applied = text.replace("max_epochs: 8 ", "max_epochs: 14 ").replace("lr: 0.003 ", "lr: 0.0015 ")
    assert applied != text
    recipe.write_text(applied.replace("seed_everything: 0", "seed_everything: 0  # a new comment"))
    assert T.trial_key("flat", 1.5e-3, "default", False) == key
    recipe.write_text(text.replace("d_model: 128", "d_model: 64"))
    assert T.trial_key("flat", 1.5e-3, "default", False) != key
    recipe.write_text(text)
    record = E.tuning_record()
    flat = record["arms"]["flat"]
    monkeypatch.setattr(E, "tuning_record", lambda: {**record, "arms": {"flat": {**flat, "chosen": {**flat["chosen"],
                        "p_noise": 0.5}}}})  # fmt: skip
    assert T.trial_key("flat", 1.5e-3, "default", False) != key


def _finished(arm, lr, score, dry=True, stopped="plateau"):
    trial = _trial(lr, score, stopped)
    trial.update(key=T.trial_key(arm, lr, "default", dry), arm=arm, level_set="default", dry=dry, total_s=100.0)
    return trial


def test_the_record_keeps_every_trial_resumes_and_flags_edges(tmp_path, monkeypatch):
    monkeypatch.setattr(T, "LOCK", tmp_path / "lock")
    path = tmp_path / "plateau.json"
    for lr, score in ((7.5e-4, 0.4), (1.5e-3, 0.55), (3e-3, 0.5)):
        T.add_trial(_finished("flat", lr, score), path)
    record = json.loads(path.read_text())
    flat = record["arms"]["flat"]
    assert flat["done_lr"] == [7.5e-4, 1.5e-3, 3e-3] and flat["planned_lr"] == list(T.LR_GRID)
    assert flat["chosen"] == {"lr": 1.5e-3, "max_epochs": 10, "schedule_epochs": T.DRY["max_epochs"]}
    assert not flat["complete"] and record["progress"]["trials_done"] == 3
    assert record["progress"]["trials_planned"] == 4 * len(T.ARMS)
    low, high = record["progress"]["core_hours_left_estimate"]
    assert 0 < low < high
    T.add_trial(_finished("flat", 6e-3, 0.6, stopped="max_epochs"), path)  # the top edge wins: one more rate
    flat = json.loads(path.read_text())["arms"]["flat"]
    assert flat["planned_lr"] == [*T.LR_GRID, 1.2e-2] and flat["lr_at_edge"] and flat["epoch_edge"]
    T.add_trial(_finished("flat", 6e-3, 0.3), path)  # the same key replaces its trial
    record = json.loads(path.read_text())
    assert len(record["trials"]) == 4 and record["arms"]["flat"]["complete"]
    stale = {**_finished("flat", 6e-3, 0.9), "key": "another-recipe"}
    T.add_trial(stale, path)  # kept in the file, not used
    record = json.loads(path.read_text())
    assert len(record["trials"]) == 5 and record["arms"]["flat"]["score"] == 0.55
    assert "4 of 20 planned trials done" in T.report(record)


def test_the_check_scores_from_the_first_check_on_and_stops_the_fit_at_the_plateau(monkeypatch):
    scores = iter([0.3, 0.5, 0.45, 0.5])
    monkeypatch.setattr(T, "validation_success", lambda *a: {"success_all": next(scores), "success_multistep": 0.0})

    class Trainer:
        current_epoch, should_stop = 0, False

    class Module:
        training = False

        def train(self):
            self.training = True

    check, trainer, module = T.PlateauCheck("flat", None, 2, first_check=2, patience=2), Trainer(), Module()
    stopped_at = None
    for epoch in range(6):
        trainer.current_epoch = epoch
        check.on_train_epoch_end(trainer, module)
        if trainer.should_stop:
            stopped_at = epoch + 1
            break
    assert [c["epoch"] for c in check.history] == [2, 3, 4, 5] and stopped_at == 5 and module.training
    assert T.best_check(check.history)["epoch"] == 3


def _fit(max_epochs, schedule_epochs, snapshots=None):
    """A toy DeepHA fit over two batches of the example episode (seconds)."""
    import lightning.pytorch as pl
    from torch.utils.data import DataLoader

    from zoo.deepha.data import example_batch
    from zoo.deepha.module import DeepHAModule

    class Snapshot(pl.Callback):
        def on_train_epoch_end(self, trainer, module):
            if snapshots is not None:
                snapshots.append({k: v.clone() for k, v in module.state_dict().items()})

    pl.seed_everything(0)
    module = DeepHAModule(arm="coa", d_model=32, n_layer=1, n_head=2, max_len=64, lr=0.01, num_threads=1,
                          schedule_epochs=schedule_epochs)  # fmt: skip
    loader = DataLoader(example_batch() * 4, batch_size=2, collate_fn=list)
    trainer = pl.Trainer(max_epochs=max_epochs, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=[Snapshot()])  # fmt: skip
    trainer.fit(module, loader)
    return module, trainer


def test_schedule_epochs_replays_the_first_epochs_of_a_longer_fit_exactly():
    snapshots = []
    _fit(4, 0, snapshots)
    short, _ = _fit(2, 4)
    for key, value in short.state_dict().items():
        assert torch.equal(value, snapshots[1][key]), key
    plain, _ = _fit(2, 0)  # its own 2-epoch schedule: other weights
    assert not all(torch.equal(v, plain.state_dict()[k]) for k, v in short.state_dict().items())
    with pytest.raises(ValueError, match="schedule_epochs"):
        from zoo.deepha.module import DeepHAModule

        DeepHAModule(schedule_epochs=-1)


# ---------------------------------------------------------------------------------------------------- level sets


def test_level_sets_keep_the_published_seeds_and_the_two_step_levels_are_playable():
    from zoo.deepha.demos import LEVEL_SETS, LEVELS, MULTISTEP_LEVELS, TRAIN_LEVELS, bot_episode, level_set, split_seed

    assert LEVEL_SETS["default"].train == TRAIN_LEVELS and LEVEL_SETS["default"].multistep == MULTISTEP_LEVELS
    assert split_seed("test", "BossLevel", 3) == 2_600_003 and len(LEVELS) <= 10  # appended: old seeds unchanged
    for levels in LEVEL_SETS.values():
        assert set(levels.multistep) <= set(levels.train)
    for level in ("PutNextLocalS5N3", "OpenTwoDoors"):
        assert level in LEVEL_SETS["two_step"].multistep
        for i in range(2):  # the bot solves them and every mission word is in the vocabulary
            demo = bot_episode(level, split_seed("train", level, i))
            assert demo is not None and len(demo["motor"]) > 1
    with pytest.raises(ValueError, match="level_set"):
        level_set("three_step")


def test_the_data_option_takes_a_level_set_and_refuses_two_answers():
    from zoo.deepha.data import BabyAIDemoDataModule
    from zoo.deepha.demos import LEVEL_SETS, TRAIN_LEVELS

    assert BabyAIDemoDataModule().levels == TRAIN_LEVELS  # the default is today's
    assert BabyAIDemoDataModule(level_set="two_step").levels == LEVEL_SETS["two_step"].train
    with pytest.raises(ValueError, match="not both"):
        BabyAIDemoDataModule(levels=("GoToLocal",), level_set="two_step")


def test_the_evaluation_reads_the_level_set_from_the_settings_and_defaults_to_todays():
    from zoo.deepha import evaluate as E
    from zoo.deepha.demos import LEVEL_SETS

    levels = sorted({*LEVEL_SETS["two_step"].train, *LEVEL_SETS["default"].train})
    scores = {f"success_{lv.lower()}": i / 10 for i, lv in enumerate(levels)}
    default = E.level_means(scores, LEVEL_SETS["default"])
    assert default["success_multistep"] == pytest.approx(
        np.mean([scores["success_putnextlocal"], scores["success_unlocklocal"], scores["success_synth"]])
    )
    two = E.level_means(scores, LEVEL_SETS["two_step"])
    assert two["success_multistep"] == pytest.approx(
        np.mean([scores["success_putnextlocals5n3"], scores["success_unlocklocal"], scores["success_opentwodoors"]])
    )
    scores["success_multistep"] = 0.5
    result = {
        "settings": {"level_set": "two_step"},
        "per_seed": {"flat": {0: scores}, "reference_oracle_coa": {0: scores}},
    }
    text = E.gates(result)[0].text
    assert "OpenTwoDoors seed 0" in text and "Synth" not in text
    result["settings"] = {}  # today's settings: today's levels
    assert "Synth seed 0" in E.gates(result)[0].text


# ---------------------------------------------------------------------------------------------------- the oracle
