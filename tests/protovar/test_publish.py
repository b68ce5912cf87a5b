"""ProtoVAR's pins live in ``zoo/protovar/pins.json`` alone, in the form ``zoo pin --write`` (and ``python -m
zoo.protovar.publish distilled``) rewrites, and they are the digests of the card folders' files."""

import re
from pathlib import Path

import pytest

import zoo
from zoo import _pins
from zoo._hub import pinned_files

ENTRIES = ("protovar.fmnist", "protovar.tokenizer", "protovar.teacher")


@pytest.mark.parametrize("name", ENTRIES)
def test_the_registry_pins_are_pins_json_and_the_mirrors_files(name):
    pins = _pins.read_pins("protovar")[name]
    assert dict(zoo.get_entry(name).pretrained_cfg.sha256) == pins
    assert pinned_files(zoo.get_entry(name).mirror_dir) == pins  # `zoo pin NAME --write` has nothing to write


def test_no_digest_is_spelled_in_the_papers_code():
    package = Path(_pins.pins_path("protovar")).parent
    for path in package.glob("*.py"):
        assert not re.search(r"[0-9a-f]{64}", path.read_text()), path


def test_re_pinning_one_entry_rewrites_pins_json_as_it_is(tmp_path, monkeypatch):
    source = _pins.pins_path("protovar")
    copy = tmp_path / "protovar" / _pins.PINS_FILE
    copy.parent.mkdir()
    copy.write_text(source.read_text())
    monkeypatch.setattr(_pins, "pins_path", lambda paper: tmp_path / paper / _pins.PINS_FILE)
    pins = _pins.read_pins("protovar")
    _pins.write_pins("protovar.fmnist", pins["protovar.fmnist"])
    assert copy.read_text() == source.read_text()  # sorted keys, indent 2: a re-pin changes only its entry's lines
    _pins.write_pins("protovar.fmnist", {**pins["protovar.fmnist"], "model.safetensors": "f" * 64})
    changed = _pins.read_pins("protovar")
    assert changed["protovar.fmnist"]["model.safetensors"] == "f" * 64
    assert {k: v for k, v in changed.items() if k != "protovar.fmnist"} == {
        k: v for k, v in pins.items() if k != "protovar.fmnist"
    }
