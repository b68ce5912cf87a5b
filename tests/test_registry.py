"""The registry: names, lookup, errors, and the lightness of `import zoo`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import zoo
from zoo._errors import MissingExtraError, NoPretrainedWeightsError, UnknownModelError, ZooError
from zoo._registry import PAPER_NAMES, PaperRef, PretrainedCfg, register_model, resolve_name, unregister_model

HEAVY = ("torch", "lightning", "transformers", "rdkit", "gymnasium", "faiss", "flwr", "mujoco", "sklearn", "scipy")

PAPER = PaperRef(title="T", arxiv="0000.00001")


@pytest.fixture
def scratch():
    names = []

    def register(name, **kwargs):
        kwargs.setdefault("pretrained_cfg", PretrainedCfg(paper=PAPER))
        names.append(name)
        return register_model(name, module="tests.tiny.module:TinyClassifier", **kwargs)

    yield register
    for name in names:
        unregister_model(name)


def test_paper_names_are_the_nineteen_in_order():
    assert len(PAPER_NAMES) == 19 and PAPER_NAMES[2] == "fedgr" and PAPER_NAMES[-1] == "gemq"
    assert {zoo.get_entry(n).paper for n in zoo.list_models()} <= set(PAPER_NAMES)


def test_list_and_filter(tiny_entry):
    assert "tinytest.blobs" in zoo.list_models()
    assert zoo.list_models("tinytest") == ["tinytest.blobs"]
    assert zoo.list_models("tiny*.b*") == ["tinytest.blobs"]
    assert "tinytest.blobs" in zoo.list_models(pretrained=True)
    assert "tinytest.blobs" not in zoo.list_models(pretrained=False)
    assert zoo.list_models("no-such-*") == []


def test_bare_paper_name_resolves_to_default(scratch):
    scratch("scratchp.only")
    assert resolve_name("scratchp") == "scratchp.only"  # a single tag is the default
    scratch("scratchq.a")
    scratch("scratchq.b", default=True)
    assert zoo.get_entry("scratchq").name == "scratchq.b"


def test_paper_without_default_lists_its_tags(scratch):
    scratch("scratchr.a")
    scratch("scratchr.b")
    with pytest.raises(UnknownModelError, match=r"no default tag.*scratchr\.a, scratchr\.b"):
        zoo.get_entry("scratchr")


def test_duplicate_and_malformed_names_raise(scratch):
    scratch("scratchs.a")
    with pytest.raises(ZooError, match="registered twice"):
        scratch("scratchs.a")
    for bad in ("nodot", "a.", ".b", "a-b.c", "a.b-c"):
        with pytest.raises(ZooError, match="paper.tag"):
            register_model(bad, module="x:y", pretrained_cfg=PretrainedCfg(paper=PAPER))


def test_unknown_name_suggests_close_matches(tiny_entry):
    with pytest.raises(UnknownModelError) as info:
        zoo.load("tinytest.blob")
    message = str(info.value)
    assert "tinytest.blobs" in message and "\n" not in message
    with pytest.raises(UnknownModelError, match="zoo list"):
        zoo.get_entry("qqqqqqqqqq")


def test_model_info_is_json_and_complete(tiny_entry):
    info = zoo.model_info("tinytest")
    json.dumps(info)
    cfg = info["pretrained_cfg"]
    for key in ("hf_hub_id", "revision", "sha256", "license", "paper", "recipe", "datasets", "metrics", "notes"):
        assert key in cfg
    assert cfg["paper"]["arxiv"] == "0000.00000" and info["pretrained"] is True
    assert info["mirror"] and info["name"] == "tinytest.blobs"


def test_missing_optional_extra_names_the_pip_command(scratch):
    scratch("scratcht.a", requires=("surely_not_installed_pkg",), extra="fl")
    with pytest.raises(MissingExtraError, match=r"pip install 'icml26-zoo\[fl\]'"):
        zoo.load("scratcht.a")


def test_pretrained_true_without_weights_says_so(scratch):
    scratch("scratchu.a", pretrained_cfg=PretrainedCfg(paper=PAPER, notes="a sketch has no learned weights"))
    assert zoo.load("scratchu.a") is not None
    with pytest.raises(NoPretrainedWeightsError, match="a sketch has no learned weights"):
        zoo.load("scratchu.a", pretrained=True)


def test_load_builds_with_model_args_and_overrides(tiny_entry):
    module = zoo.load("tinytest.blobs", hidden=5)
    assert module.net[0].out_features == 5
    assert zoo.load("tinytest.blobs").net[0].out_features == 12
    with pytest.raises(ZooError, match="does not accept 'widht'"):
        zoo.load("tinytest.blobs", widht=3)


def test_import_zoo_is_light():
    code = (
        "import sys, zoo; first = set(sys.modules); zoo.list_models(); second = set(sys.modules);"
        "print(repr((sorted(first), sorted(second))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    after_import, after_list = eval(out)
    for heavy in HEAVY:
        assert heavy not in after_import, f"`import zoo` imported {heavy}"
        assert heavy not in after_list, f"`zoo.list_models()` imported {heavy} (a paper __init__ is not light)"
    assert not [m for m in after_import if m.split(".")[:2][-1] in PAPER_NAMES], "`import zoo` imported a paper"


def test_register_paper_takes_a_table_and_reads_its_pins_from_pins_json(tmp_path, monkeypatch):
    import json

    import zoo._pins
    from zoo._registry import Entry, register_paper

    pins = tmp_path / "pins.json"
    pins.write_text(json.dumps({"scratchw.pinned": {"config.json": "a" * 64, "model.safetensors": "b" * 64}}))
    monkeypatch.setattr(zoo._pins, "pins_path", lambda paper: pins)
    table = {
        "pinned": Entry(arm="m", default=True, description="with weights"),
        "bare": Entry(arm="ref", notes="A rule: it has no learned weights.", model_args={"hidden": 3}),
    }
    try:
        entries = register_paper("scratchw", PAPER, table, module="tests.tiny.module:TinyClassifier", task="other")
        pinned, bare = (zoo.get_entry(e.name) for e in entries)
        assert pinned.pretrained_cfg.has_weights and not bare.pretrained_cfg.has_weights
        assert pinned.default and pinned.eval_arm == "m" and bare.model_args == {"hidden": 3}
        assert pinned.pretrained_cfg.hf_hub_id == "icml26-zoo/scratchw-pinned" and pinned.pretrained_cfg.task == "other"
        assert zoo.get_entry("scratchw").name == "scratchw.pinned"
    finally:
        for name in ("scratchw.pinned", "scratchw.bare"):
            unregister_model(name)
    with pytest.raises(ZooError, match="Entry does not take colour"):
        Entry(colour="red")
    pins.write_text(json.dumps({"scratchw.gone": {"config.json": "a" * 64}}))
    with pytest.raises(ZooError, match="pins scratchw.gone, which scratchw's ENTRIES lack"):
        register_paper("scratchw", PAPER, table, module="tests.tiny.module:TinyClassifier")


def test_zoo_info_says_which_commit_the_card_was_measured_at():
    info = zoo.model_info("fedgr")
    assert info["card_provenance"]["commits"] and len(info["card_provenance"]["commits"][0]) == 40
