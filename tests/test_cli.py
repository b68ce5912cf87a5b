"""The `zoo` command: LightningCLI recipes, registry commands, and one-line errors on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from zoo.cli import main

ROOT = Path(__file__).resolve().parents[1]
TINY_RECIPE = "tests/tiny/recipe.yaml"


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("zoo: error:")]
    assert len(errors) == 1, err
    return errors[0]


def test_zoo_fit_trains_the_tiny_recipe_for_one_epoch(tmp_path):
    """`zoo fit -c RECIPE` as a user runs it: a console script in a fresh process."""
    zoo_script = Path(sys.executable).with_name("zoo")
    command = [str(zoo_script)] if zoo_script.exists() else [sys.executable, "-m", "zoo"]
    result = subprocess.run(
        [*command, "fit", "-c", TINY_RECIPE, f"--trainer.default_root_dir={tmp_path}", "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    config = json.loads((tmp_path / "pretrained" / "config.json").read_text())
    training = config["metadata"]["training"]
    assert config["class_path"] == "tests.tiny.module.TinyClassifier"
    assert training["recipe"] == TINY_RECIPE and training["epochs"] == 1 and training["global_step"] == 8
    assert 0 < training["wall_time_s"] < 300 and training["seed"] == 0
    assert (tmp_path / "pretrained" / "model.safetensors").stat().st_size > 0


def test_python_dash_m_zoo_lists_without_lightning():
    result = subprocess.run([sys.executable, "-m", "zoo", "list"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()


def test_print_config_works(capsys):
    with pytest.raises(SystemExit) as info:
        main(["fit", "-c", TINY_RECIPE, "--print_config"])
    assert info.value.code in (0, None)
    out = capsys.readouterr().out
    assert "class_path: tests.tiny.module.TinyClassifier" in out and "hidden: 16" in out


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("--model.init_args.hiden=3", "Option 'hiden' is not accepted"),
        ("--trainer.max_epochs=abc", "trainer.max_epochs"),
        ("--model.class_path=tests.tiny.module.Nope", "has no attribute 'Nope'"),
        ("--trainer.no_such_flag=1", "unrecognized arguments"),
    ],
)
def test_bad_recipe_key_is_one_line(override, expected, capsys):
    assert main(["fit", "-c", TINY_RECIPE, override]) == 2
    line = _one_error_line(capsys)
    assert expected in line and TINY_RECIPE in line and "--print_config" in line


def test_missing_recipe_file(capsys):
    assert main(["fit", "-c", "recipes/nope/nope.yaml"]) == 2
    assert "does not exist" in _one_error_line(capsys)


def test_unknown_model_is_one_line(tiny_entry, capsys):
    assert main(["info", "tinytest.blbs"]) == 2
    assert "did you mean: tinytest.blobs" in _one_error_line(capsys)


def test_missing_extra_is_one_line(capsys):
    from zoo._registry import PaperRef, PretrainedCfg, register_model, unregister_model

    register_model(
        "scratchcli.a", module="tests.tiny.module:TinyClassifier", requires=("surely_not_installed_pkg",),
        extra="rl", evaluate="tests.tiny.evaluate", pretrained_cfg=PretrainedCfg(paper=PaperRef("T", "0")),
    )  # fmt: skip
    try:
        assert main(["eval", "scratchcli.a"]) == 2
        assert "pip install 'icml26-zoo[rl]'" in _one_error_line(capsys)
    finally:
        unregister_model("scratchcli.a")


def test_corrupted_weights_are_one_line(tiny_entry, hf_cache, hf_offline, capsys):
    weights = tiny_entry.mirror_dir / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    assert main(["demo", "tinytest"]) == 2  # demo loads the pretrained entry
    line = _one_error_line(capsys)
    assert "model.safetensors" in line and "expected" in line


def test_offline_without_cache_or_mirror_is_one_line(tiny_entry, hf_cache, hf_offline, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ZOO_MIRROR", str(tmp_path / "nothing"))
    assert main(["demo", "tinytest"]) == 2
    assert "no offline mirror" in _one_error_line(capsys)


def test_list_and_info(tiny_entry, capsys):
    assert main(["list", "tinytest*"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "paper", "params", "pretrained", "headline", "metric"]
    assert lines[2].startswith("tinytest.blobs") and "yes" in lines[2].split()
    assert main(["info", "tinytest"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "tinytest.blobs"


def test_pin_copies_an_exported_folder_and_prints_hashes(tiny_entry, tmp_path, capsys, monkeypatch):
    from tests.tiny.module import TinyClassifier
    from zoo import save_pretrained
    from zoo._hub import sha256_file

    monkeypatch.chdir(tmp_path)  # the backup goes to runs/pin-backups/ under the working directory
    published = (tiny_entry.mirror_dir / "model.safetensors").read_bytes()
    exported = save_pretrained(TinyClassifier(hidden=12), tmp_path / "export")
    # The shipped mirror holds other weights: pinning over them needs --force, and keeps a backup.
    assert main(["pin", "tinytest.blobs", "--from", str(exported)]) == 2
    line = _one_error_line(capsys)
    assert line.startswith("zoo: error: pass --force") and "model.safetensors" in line
    assert (tiny_entry.mirror_dir / "model.safetensors").read_bytes() == published
    assert main(["pin", "tinytest.blobs", "--from", str(exported), "--force"]) == 0
    pins = json.loads(capsys.readouterr().out)["sha256"]
    assert set(pins) == {"config.json", "model.safetensors"}
    assert pins["model.safetensors"] == sha256_file(tiny_entry.mirror_dir / "model.safetensors")
    (backup,) = (tmp_path / "runs" / "pin-backups").iterdir()
    assert (backup / "model.safetensors").read_bytes() == published
    assert main(["pin", "tinytest.blobs", "--from", str(exported)]) == 0  # the same files again: nothing to lose
    assert main(["pin", "tinytest.blobs", "--from", str(tmp_path / "missing")]) == 2


def test_pin_write_updates_the_papers_pins_file_only_for_that_entry(tiny_entry, tmp_path, capsys, monkeypatch):
    import zoo._pins
    from tests.tiny.module import TinyClassifier
    from zoo import save_pretrained

    pins_file = tmp_path / "pins.json"
    pins_file.write_text(json.dumps({"tinytest.other": {"config.json": "a" * 64}}))
    monkeypatch.setattr(zoo._pins, "pins_path", lambda paper: pins_file)
    monkeypatch.chdir(tmp_path)  # backups go to runs/pin-backups/ here
    assert main(["pin", "tinytest.blobs", "--write"]) == 0  # the mirror matches its pins: nothing to write
    assert json.loads(pins_file.read_text()) == {"tinytest.other": {"config.json": "a" * 64}}
    capsys.readouterr()
    exported = save_pretrained(TinyClassifier(hidden=5), tmp_path / "export")
    assert main(["pin", "tinytest.blobs", "--from", str(exported), "--force", "--write"]) == 0
    printed = json.loads(capsys.readouterr().out)["sha256"]
    assert json.loads(pins_file.read_text()) == {
        "tinytest.blobs": printed,
        "tinytest.other": {"config.json": "a" * 64},
    }
