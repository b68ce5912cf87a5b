"""The registry re-pinning of benchmarks/protovar_publish.py (the republish chain writes zoo/protovar/__init__.py)."""

import pytest

from benchmarks.protovar_publish import REGISTRY, rewrite_pins
from zoo.protovar import _PINS


def test_rewriting_the_current_pins_changes_nothing():
    text = REGISTRY.read_text()
    for tag, pins in _PINS.items():
        assert rewrite_pins(text, tag, pins) == text, tag


def test_only_the_tag_block_changes_and_files_are_sorted():
    text = REGISTRY.read_text()
    new = rewrite_pins(text, "tokenizer", {"model.safetensors": "a" * 64, "config.json": "b" * 64})
    namespace: dict = {}
    exec(new[new.index("_PINS:") : new.index("_NUM_PARAMS")], namespace)
    assert namespace["_PINS"] == {**_PINS, "tokenizer": {"config.json": "b" * 64, "model.safetensors": "a" * 64}}
    assert new.index('"config.json": "' + "b" * 64) < new.index('"model.safetensors": "' + "a" * 64)
    assert new.replace(new[new.index("_PINS:") : new.index("_NUM_PARAMS")], "") == text.replace(
        text[text.index("_PINS:") : text.index("_NUM_PARAMS")], ""
    )


def test_a_new_file_joins_the_block():
    text = REGISTRY.read_text()
    pins = {**_PINS["fmnist"], "distilled_ipc50.safetensors": "c" * 64}
    namespace: dict = {}
    new = rewrite_pins(text, "fmnist", pins)
    exec(new[new.index("_PINS:") : new.index("_NUM_PARAMS")], namespace)
    assert namespace["_PINS"]["fmnist"] == pins


@pytest.mark.parametrize(
    ("tag", "pins", "message"),
    [
        ("student", {"config.json": "a" * 64}, "no block for 'student'"),
        ("tokenizer", {"config.json": "not-a-digest"}, "not a sha256"),
    ],
)
def test_bad_tags_and_digests_raise(tag, pins, message):
    with pytest.raises(ValueError, match=message):
        rewrite_pins(REGISTRY.read_text(), tag, pins)
