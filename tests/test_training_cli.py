"""Training with the zoo's CLI: packaged recipes, per-run folders, your own weights, the `lightning` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import zoo
from zoo._errors import RecipeError
from zoo._recipes import packaged_recipes, recipes_root, resolve_recipe
from zoo.cli import lightning_main, main

ROOT = Path(__file__).resolve().parents[1]
TINY_RECIPE = "tests/tiny/recipe.yaml"


def _errors(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith(("zoo: error:", "lightning:"))]


# ------------------------------------------------------------------------------------------ recipes by name


def test_every_registry_recipe_is_packaged_and_resolves_from_anywhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert "dwp/standard" in packaged_recipes()
    for name in zoo.list_models():
        recipe = zoo.get_entry(name).pretrained_cfg.recipe
        assert recipe.startswith("recipes/"), recipe
        assert Path(resolve_recipe(recipe)).resolve() == (recipes_root() / recipe.removeprefix("recipes/")).resolve()
    assert (
        resolve_recipe("dwp/standard") == resolve_recipe("dwp/standard.yaml") == resolve_recipe("recipes/dwp/standard")
    )
    with pytest.raises(RecipeError, match="did you mean dwp/standard"):
        resolve_recipe("dwp/standrad")


def test_fit_by_recipe_name_prints_its_config(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no recipes/ here: the packaged copy is used
    with pytest.raises(SystemExit) as info:
        main(["fit", "-c", "dwp/standard", "--print_config"])
    assert info.value.code in (0, None)
    assert "class_path: zoo.dwp.module.DWPModule" in capsys.readouterr().out


def test_every_recipe_keeps_lightnings_logger_and_checkpoints():
    import yaml

    for path in sorted(recipes_root().rglob("*.yaml")):
        trainer = yaml.safe_load(path.read_text())["trainer"]
        logger = trainer.get("logger")
        assert isinstance(logger, dict) and logger["class_path"].endswith("CSVLogger"), f"{path}: no CSVLogger"
        assert logger["init_args"]["save_dir"] == trainer["default_root_dir"], path
        assert trainer.get("enable_checkpointing", True) is True, f"{path}: checkpointing is off"


# ------------------------------------------------------------------------------------ runs and own weights


def _fit(root: Path, *extra: str) -> None:
    logger = ["--trainer.logger+=lightning.pytorch.loggers.CSVLogger", f"--trainer.logger.save_dir={root}"]
    args = ["fit", "-c", TINY_RECIPE, f"--trainer.default_root_dir={root}", *logger, "--trainer.logger.name="]
    assert main([*args, "--trainer.enable_checkpointing=true", "--trainer.enable_progress_bar=false", *extra]) == 0


def test_each_run_has_its_own_folder_and_says_where_it_went(tmp_path, capsys):
    root = tmp_path / "runs"
    _fit(root)
    out = capsys.readouterr().out
    first = root / "version_0" / "pretrained"
    assert f"zoo: weights     {first}" in out and f"zoo: logs        {root / 'version_0'}" in out
    assert "zoo: checkpoint" in out and "--ckpt_path" in out
    assert (root / "version_0" / "metrics.csv").is_file() and list((root / "version_0" / "checkpoints").glob("*.ckpt"))
    exported = (first / "model.safetensors").read_bytes()

    _fit(root, "--model.init_args.hidden=9")  # a later run does not overwrite the earlier export
    second = root / "version_1" / "pretrained"
    assert (first / "model.safetensors").read_bytes() == exported
    assert (root / "pretrained").resolve() == second.resolve()  # the latest finished run
    training = json.loads((second / "config.json").read_text())["metadata"]["training"]
    assert "--model.init_args.hidden=9" in training["command"]
    assert training["config"]["model"]["init_args"]["hidden"] == 9 and training["zoo"] == zoo.__version__
    assert training["git"] is None or len(training["git"]["commit"]) == 40
    assert zoo.load(str(second)).net[0].out_features == 9


def test_only_a_finished_fit_moves_the_latest_export_and_a_smoke_run_writes_nothing(tmp_path, capsys):
    root = tmp_path / "runs"
    _fit(root)
    link, first = root / "pretrained", root / "version_0" / "pretrained"
    weights = (first / "model.safetensors").read_bytes()
    capsys.readouterr()

    _fit(root, "--trainer.fast_dev_run=true")
    assert "zoo: weights     none: a fast_dev_run trains a few batches only" in capsys.readouterr().out
    assert link.resolve() == first.resolve() and (first / "model.safetensors").read_bytes() == weights
    assert not list(root.glob("run-*")) and [p.name for p in root.glob("version_*")] == ["version_0"]

    _fit(root, "--trainer.limit_train_batches=2")  # trained on part of the data: exported, but not the latest
    out = capsys.readouterr().out
    partial = root / "version_1" / "pretrained"
    assert f"zoo: weights     {partial}" in out and "limit_train_batches=2 trained on part of the data" in out
    assert link.resolve() == first.resolve() and (first / "model.safetensors").read_bytes() == weights
    training = json.loads((partial / "config.json").read_text())["metadata"]["training"]
    assert training["unfinished"].startswith("limit_train_batches=2")


def test_an_exported_folder_with_a_flipped_bit_is_refused_and_an_old_one_loads_with_a_notice(tmp_path, caplog):
    from zoo._errors import ChecksumError

    _fit(tmp_path / "runs")
    folder = tmp_path / "runs" / "version_0" / "pretrained"
    config = json.loads((folder / "config.json").read_text())
    assert set(config["files"]) == {"model.safetensors"}
    assert oct((folder / "model.safetensors").stat().st_mode & 0o777) == oct(
        (folder / "config.json").stat().st_mode & 0o777
    )
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match="model.safetensors does not match the sha256 its config.json records"):
        zoo.load(str(folder))
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    del config["files"]  # a folder exported before exports recorded checksums
    (folder / "config.json").write_text(json.dumps(config))
    assert zoo.load(str(folder)) is not None
    assert "exported before exports recorded checksums" in caplog.text


def test_test_refuses_an_untrained_model_and_takes_weights(tmp_path, capsys):
    root = tmp_path / "runs"
    _fit(root)
    capsys.readouterr()
    folder = root / "version_0" / "pretrained"
    common = ["-c", TINY_RECIPE, f"--trainer.default_root_dir={tmp_path}", "--trainer.enable_progress_bar=false"]

    assert main(["test", *common]) == 2
    (line,) = _errors(capsys)
    assert "untrained TinyClassifier" in line and "--weights DIR" in line and "--untrained" in line
    assert main(["test", *common, "--untrained"]) == 0
    capsys.readouterr()
    assert main(["test", *common, "--weights", str(folder)]) == 0
    scored = capsys.readouterr().out
    assert "val/acc" in scored
    assert main(["validate", *common, f"--weights={folder}"]) == 0

    assert main(["test", *common, "--ckpt_path", str(folder / "model.safetensors")]) == 2
    (line,) = _errors(capsys)
    assert "not a Lightning .ckpt" in line and f"--weights {folder}" in line
    (ckpt,) = (root / "version_0" / "checkpoints").glob("*.ckpt")
    assert main(["test", *common, "--ckpt_path", str(ckpt)]) == 0
    assert main(["test", *common, "--weights", str(tmp_path / "nope")]) == 2
    assert "is not a folder" in _errors(capsys)[0]


def test_weights_of_another_model_are_refused(tmp_path, capsys):
    folder = tmp_path / "other"
    (folder).mkdir()
    (folder / "config.json").write_text(json.dumps({"class_path": "torch.nn.Linear", "init_args": {}}))
    assert main(["test", "-c", TINY_RECIPE, f"--trainer.default_root_dir={tmp_path}", "--weights", str(folder)]) == 2
    (line,) = _errors(capsys)
    assert "holds a torch.nn.Linear" in line and "TinyClassifier" in line


# ------------------------------------------------------------------------------------- `lightning` command


def test_lightning_fit_goes_through_the_zoo(capsys):
    with pytest.raises(SystemExit) as info:
        lightning_main(["fit", "-c", TINY_RECIPE, "--print_config"])
    assert info.value.code in (0, None)
    assert "class_path: tests.tiny.module.TinyClassifier" in capsys.readouterr().out


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("lightning_sdk") is not None, reason="lightning-sdk is installed"
)
def test_lightning_other_subcommands_name_lightning_sdk(capsys):
    assert lightning_main(["login"]) == 2
    (line,) = _errors(capsys)
    assert "pip install lightning-sdk" in line


def test_lightning_console_script_is_installed():
    script = Path(sys.executable).with_name("lightning")
    if not script.exists():
        pytest.skip("the zoo is not installed in this interpreter's environment")
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, env={**os.environ}, cwd=ROOT)
    assert result.returncode == 0 and "fit,validate,test,predict" in result.stdout
