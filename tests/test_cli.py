"""The `zoo` command: LightningCLI recipes, registry commands, and one-line errors on bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from zoo._errors import ZooError
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
    monkeypatch.setenv("ZOO_HUB_CARDS", str(tmp_path / "nothing"))
    assert main(["demo", "tinytest"]) == 2
    assert "no offline mirror" in _one_error_line(capsys)


def test_list_and_info(tiny_entry, capsys):
    assert main(["list", "tinytest*"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "paper", "params", "pretrained", "headline", "metric"]
    assert lines[2].startswith("tinytest.blobs") and "yes" in lines[2].split()
    assert main(["info", "tinytest"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "tinytest.blobs"


def test_eval_writes_the_schema_and_the_card(tiny_entry, tmp_path, capsys, monkeypatch):
    for variable in ("ZOO_QUIET", "HF_HUB_DISABLE_PROGRESS_BARS"):  # restored after the test
        monkeypatch.setenv(variable, "0")
    out = tmp_path / "out.json"
    assert main(["--quiet", "eval", "tinytest", "--json", str(out), "--seeds", "0", "3", "4", "--card"]) == 0
    result = json.loads(out.read_text())
    assert list(result) == [
        "name",
        "zoo_version",
        "settings",
        "seeds",
        "arms",
        "per_seed",
        "claims",
        "extras",
        "timings",
    ]
    assert result["seeds"] == [0, 3, 4] and set(result["arms"]) == {"tiny", "reference_majority"}
    assert result["arms"]["tiny"]["accuracy"] > result["arms"]["reference_majority"]["accuracy"]
    assert result["arms"]["tiny"]["n_seeds"] == 3 and "accuracy_std" in result["arms"]["tiny"]
    assert set(result["per_seed"]["tiny"]) == {"0", "3", "4"}
    assert result["settings"]["references"] == ["reference_majority"] and "tiny" in result["settings"]["tuning"]
    claims_printed = capsys.readouterr().err
    assert "tiny_beats_reference_majority_accuracy" in claims_printed and "holds" in claims_printed
    folder = tiny_entry.mirror_dir
    assert json.loads((folder / "metrics.json").read_text()) == result
    assert (folder / "README.md").is_file() and (folder / "results.png").is_file()
    assert tiny_entry.metrics["accuracy"] == result["arms"]["tiny"]["accuracy"]  # the registry reads the card
    assert os.environ.get("ZOO_QUIET") == "1"


def test_eval_settings_are_listed_and_overridden(tiny_entry, tmp_path, capsys):
    assert main(["eval", "tinytest", "--settings"]) == 0
    listing = capsys.readouterr().out
    assert "test_size = 512" in listing and "test_seed = 1234" in listing
    out = tmp_path / "out.json"
    assert main(["--quiet", "eval", "tinytest", "--seeds", "0", "--set", "test_size=64", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["settings"]["test_size"] == 64 and result["settings"]["overrides"] == {"test_size": 64}


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("nope=1", "unknown setting 'nope'; valid keys: test_size, test_seed, epochs"),
        ("test_size=many", "--set test_size=many: expected an integer"),
        ("test_size=0", "--set test_size=0: must be at least 1"),
        ("test_size", "expected KEY=VALUE"),
    ],
)
def test_eval_bad_setting_is_one_line(tiny_entry, capsys, pair, message):
    assert main(["eval", "tinytest", "--seeds", "0", "--set", pair]) == 2
    assert message in _one_error_line(capsys)


def test_eval_scores_local_weights_in_place_of_the_method(tiny_entry, tmp_path):
    import torch

    from tests.tiny.module import TinyClassifier
    from zoo import save_pretrained
    from zoo._eval import run_eval

    torch.manual_seed(5)
    folder = save_pretrained(TinyClassifier(hidden=12), tmp_path / "mine")  # untrained: near chance
    mine = run_eval("tinytest", seeds=[0], weights=folder)
    published = run_eval("tinytest", seeds=[0])
    assert mine["arms"]["tiny"]["accuracy"] != published["arms"]["tiny"]["accuracy"]
    assert str(folder) in mine["settings"]["source"]


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


def test_piece_file_is_off_without_its_folder_and_keyed_by_everything_that_decides_the_result(tmp_path, monkeypatch):
    from zoo._eval import piece_file

    monkeypatch.delenv("ZOO_TEST_EVAL_CACHE", raising=False)
    assert piece_file("ZOO_TEST_EVAL_CACHE", "arm-seed0", lambda: 1 / 0) is None  # the key is never computed
    monkeypatch.setenv("ZOO_TEST_EVAL_CACHE", str(tmp_path))
    path = piece_file("ZOO_TEST_EVAL_CACHE", "arm-seed0", lambda: {"lr": 0.1, "recipe": "a"})
    assert path.parent == tmp_path and path.name.startswith("arm-seed0-") and path.suffix == ".json"
    assert path == piece_file("ZOO_TEST_EVAL_CACHE", "arm-seed0", lambda: {"recipe": "a", "lr": 0.1})
    assert path != piece_file("ZOO_TEST_EVAL_CACHE", "arm-seed0", lambda: {"lr": 0.2, "recipe": "a"})


def test_pin_write_rewrites_the_changed_digest_where_the_registry_spells_it(tmp_path):
    from zoo.cli import write_pins

    a, b, c = "a" * 64, "b" * 64, "c" * 64
    registry = tmp_path / "registry.py"
    registry.write_text(f'_PINS = {{\n    "x": {{"config.json": "{a}", "model.safetensors": "{b}"}},\n}}\n')
    other = tmp_path / "other.py"
    other.write_text("# no pins here\n")
    old = {"config.json": a, "model.safetensors": b}
    assert write_pins(old, old, [registry, other]) == {}  # nothing changed: nothing written
    before = registry.read_text()
    assert write_pins(old, {"config.json": a, "model.safetensors": c}, [registry], dry=True) == {
        registry: ["model.safetensors"]
    }
    assert registry.read_text() == before  # dry: checked, not written
    assert write_pins(old, {"config.json": a, "model.safetensors": c}, [registry, other]) == {
        registry: ["model.safetensors"]
    }
    assert registry.read_text() == f'_PINS = {{\n    "x": {{"config.json": "{a}", "model.safetensors": "{c}"}},\n}}\n'


@pytest.mark.parametrize(
    ("new", "spelled", "message"),
    [
        ({"config.json": "a" * 64, "model.safetensors": "c" * 64, "extra.json": "d" * 64}, 1, "differ from"),
        ({"config.json": "a" * 64, "model.safetensors": "c" * 64}, 0, "no source file"),
        ({"config.json": "a" * 64, "model.safetensors": "c" * 64}, 2, "(2x)"),
    ],
)
def test_pin_write_refuses_what_it_cannot_do_exactly_and_writes_nothing(tmp_path, new, spelled, message):
    from zoo.cli import write_pins

    registry = tmp_path / "registry.py"
    text = f'A = "{"a" * 64}"\n' + f'B = "{"b" * 64}"\n' * spelled
    registry.write_text(text)
    with pytest.raises(ZooError, match=re.escape(message)):
        write_pins({"config.json": "a" * 64, "model.safetensors": "b" * 64}, new, [registry])
    assert registry.read_text() == text


def test_eval_calls_prepare_once_with_every_seed_and_load_returns_what_it_provides(tiny_entry, monkeypatch):
    import tests.tiny.evaluate as tiny_evaluation
    import zoo._lightning_cli
    from tests.tiny.module import TinyClassifier
    from zoo._eval import run_eval

    seen = []

    def prepare(runs):
        seen.append([run.seed for run in runs])
        for run in runs:
            if run.seed == 1:  # not the published seed: load would train the recipe
                run.provide("tiny", TinyClassifier(hidden=12).eval())

    def no_training(*args, **kwargs):
        raise AssertionError("the provided model was not used")

    monkeypatch.setattr(tiny_evaluation, "prepare", prepare, raising=False)
    monkeypatch.setattr(zoo._lightning_cli, "ZooCLI", no_training)
    result = run_eval("tinytest", seeds=[0, 1])
    assert seen == [[0, 1]]
    assert set(result["per_seed"]["tiny"]) == {"0", "1"}


def test_pin_write_through_the_command(tiny_entry, tmp_path, capsys, monkeypatch):
    from tests.tiny.module import TinyClassifier
    from zoo import save_pretrained

    monkeypatch.chdir(tmp_path)  # backups go to runs/pin-backups/ here
    assert main(["pin", "tinytest.blobs", "--write"]) == 0  # the mirror matches its pins: nothing to write
    assert "sha256" in json.loads(capsys.readouterr().out)
    exported = save_pretrained(TinyClassifier(hidden=12), tmp_path / "export")
    published = (tiny_entry.mirror_dir / "model.safetensors").read_bytes()
    # The tiny entry computes its pins at run time: no source file spells them, so --write refuses in one line,
    # before anything is copied.
    assert main(["pin", "tinytest.blobs", "--from", str(exported), "--force", "--write"]) == 2
    assert "is spelled in no source file" in _one_error_line(capsys)
    assert (tiny_entry.mirror_dir / "model.safetensors").read_bytes() == published
    assert not (tmp_path / "runs" / "pin-backups").exists()
