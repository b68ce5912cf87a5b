"""The registry re-pinning of benchmarks/protovar_publish.py: `zoo pin --write` on ProtoVAR's `_PINS` table."""

import pytest

import zoo
from zoo.cli import _registry_sources, write_pins

ENTRIES = ("protovar.fmnist", "protovar.tokenizer", "protovar.teacher")


@pytest.mark.parametrize("name", ENTRIES)
def test_every_pin_is_spelled_once_where_zoo_pin_write_rewrites_it(name):
    old = dict(zoo.get_entry(name).pretrained_cfg.sha256)
    assert write_pins(old, old, _registry_sources()) == {}  # the current pins: nothing to write
    edits = write_pins(old, {file: "f" * 64 for file in old}, _registry_sources(), dry=True)
    ((source, files),) = edits.items()
    assert source.parts[-2:] == ("protovar", "__init__.py") and sorted(files) == sorted(old)
