"""The Hub round trip with the real huggingface_hub client against the test server on 127.0.0.1."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import zoo
from zoo._errors import ChecksumError, HubUnavailableError, ZooError
from zoo._hub import fetch, publish, sha256_file

pytestmark = pytest.mark.hub
REPO = "test-org/tinytest-blobs"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def published(tiny_entry, hub):
    """The tiny entry published to the test server (fresh repo per test), tagged v1; yields the commit."""
    hub.state.repos.pop(REPO, None)
    commit = publish(tiny_entry.name, REPO)
    return commit


def _weights(module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in module.state_dict().items()}


def _same(a, b) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _mirror_weights(entry):
    return _weights(zoo.load_folder(entry.mirror_dir))


def test_publish_uploads_the_folder_and_tags(tiny_entry, hub, published):
    repo = hub.state.repos[REPO]
    assert repo.tags["v1"] == published and repo.branches["main"] == published
    for name in ("config.json", "model.safetensors"):
        assert hub.file_bytes(REPO, "v1", name) == (tiny_entry.mirror_dir / name).read_bytes()
    with pytest.raises(ZooError, match="tag 'v1' already exists"):
        publish(tiny_entry.name, REPO)


def test_load_by_tag_and_by_commit(tiny_entry, hub, published, hf_cache):
    expected = _mirror_weights(tiny_entry)
    folder = fetch(tiny_entry)  # pinned revision: the tag v1
    assert str(folder).startswith(str(hf_cache)) and folder.name == published
    assert _same(_weights(zoo.load(tiny_entry.name, pretrained=True)), expected)
    assert _same(_weights(zoo.load(tiny_entry.name, pretrained=True, revision=published)), expected)


def test_offline_load_from_cache_makes_no_request(tiny_entry, hub, published, hf_cache, monkeypatch):
    fetch(tiny_entry)
    import huggingface_hub.constants as hf_constants

    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    before = len(hub.state.requests)
    folder = fetch(tiny_entry)
    assert len(hub.state.requests) == before
    assert str(folder).startswith(str(hf_cache))


def test_offline_env_var_in_a_fresh_process(tiny_entry, hub, published, tmp_path):
    """HF_HUB_OFFLINE=1 as users set it: a new process loads from the cache an earlier process filled."""
    home = tmp_path / "home"
    script = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(ROOT)!r})
        from zoo._registry import PaperRef, PretrainedCfg, register_model
        register_model("tinytest.blobs", module="tests.tiny.module:TinyClassifier",
                       pretrained_cfg=PretrainedCfg(paper=PaperRef("T", "0"), hf_hub_id={REPO!r}, revision="v1",
                                                    sha256={dict(tiny_entry.pretrained_cfg.sha256)!r}))
        import zoo, hashlib
        from zoo._hub import fetch
        print(fetch(zoo.get_entry("tinytest.blobs")))
    """)
    env = {**os.environ, "HF_HOME": str(home), "ZOO_MIRROR": str(tmp_path / "no-mirror")}
    online = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert online.returncode == 0, online.stderr
    before = len(hub.state.requests)
    offline = subprocess.run(
        [sys.executable, "-c", script], env={**env, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True
    )
    assert offline.returncode == 0, offline.stderr
    assert offline.stdout == online.stdout and str(home) in offline.stdout
    assert len(hub.state.requests) == before


def test_tampered_blob_in_cache_is_detected(tiny_entry, hub, published, hf_cache):
    folder = fetch(tiny_entry)
    blob = (folder / "model.safetensors").resolve()
    blob.write_bytes(blob.read_bytes()[:-8] + b"\0" * 8)
    expected = tiny_entry.pretrained_cfg.sha256["model.safetensors"]
    with pytest.raises(ChecksumError) as info:
        zoo.load(tiny_entry.name, pretrained=True)
    message = str(info.value)
    assert "model.safetensors" in message and expected in message and "\n" not in message
    assert blob.exists(), "a tampered file must not be deleted or replaced behind the user's back"


def test_truncated_file_on_the_hub_is_detected(tiny_entry, hub, published, hf_cache):
    commit = hub.state.repos[REPO].resolve("v1")
    commit.files["config.json"] = commit.files["config.json"][:20]
    with pytest.raises(ChecksumError, match="config.json"):
        fetch(tiny_entry)


def test_wrong_revision_raises_the_hubs_own_error(tiny_entry, hub, published, hf_cache):
    from huggingface_hub.errors import RevisionNotFoundError

    with pytest.raises(RevisionNotFoundError):
        zoo.load(tiny_entry.name, pretrained=True, revision="no-such-tag")


def test_hub_down_falls_back_to_the_mirror_and_says_so_once(tiny_entry, hf_cache, hub_down, caplog):
    import zoo._hub as hub_module

    hub_module._mirror_announced.discard(tiny_entry.name)
    with caplog.at_level(logging.INFO, logger="zoo.hub"):
        folder = fetch(tiny_entry)
        fetch(tiny_entry)
    assert folder == tiny_entry.mirror_dir
    said = [r for r in caplog.records if "offline mirror" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING  # shows in Python without any logging setup


def test_offline_with_empty_cache_uses_the_mirror(tiny_entry, hf_cache, hf_offline):
    assert fetch(tiny_entry) == tiny_entry.mirror_dir
    assert _same(_weights(zoo.load(tiny_entry.name, pretrained=True)), _mirror_weights(tiny_entry))


def test_offline_with_empty_cache_and_no_mirror_is_one_clear_line(
    tiny_entry, hf_cache, hf_offline, tmp_path, monkeypatch
):
    monkeypatch.setenv("ZOO_MIRROR", str(tmp_path / "empty"))
    with pytest.raises(HubUnavailableError) as info:
        zoo.load(tiny_entry.name, pretrained=True)
    message = str(info.value)
    assert "\n" not in message and "HF_HUB_OFFLINE" in message and REPO in message


def test_tampered_mirror_is_detected(tiny_entry, hf_cache, hf_offline):
    config = tiny_entry.mirror_dir / "config.json"
    config.write_text(config.read_text().replace('"hidden": 12', '"hidden": 13'))
    with pytest.raises(ChecksumError, match="config.json.*offline mirror"):
        zoo.load(tiny_entry.name, pretrained=True)


def test_publish_refuses_a_folder_that_does_not_match_its_pins(tiny_entry, hub):
    weights = tiny_entry.mirror_dir / "model.safetensors"
    weights.write_bytes(weights.read_bytes() + b"x")
    with pytest.raises(ZooError, match="zoo pin"):
        publish(tiny_entry.name, "test-org/other")


def test_sha256_file_matches_hashlib(tmp_path):
    import hashlib

    path = tmp_path / "blob"
    path.write_bytes(os.urandom(3 << 20))
    assert sha256_file(path) == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_these_tests_fail_without_the_sha256_check():
    """Mutation check: with verify_files switched off, the integrity tests above must fail."""
    # "not slow" keeps this test out of the child run, which would otherwise recurse.
    child = [sys.executable, "-m", "pytest", "-q", "-p", "tests.plugins.no_sha256_check", "-m", "hub and not slow"]
    result = subprocess.run([*child, __file__], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode != 0
    for test in ("tampered_blob_in_cache", "truncated_file_on_the_hub", "tampered_mirror", "publish_refuses"):
        assert f"FAILED tests/test_hub.py::test_{test}" in result.stdout, result.stdout[-2000:]


def _publish_full_card(hub) -> tuple[str, str]:
    """Publish dwp.standard's real hub_cards folder (README.md card, metrics.json, figure) to its repo."""
    entry = zoo.get_entry("dwp.standard")
    repo = entry.pretrained_cfg.hf_hub_id
    hub.state.repos.pop(repo, None)
    return repo, publish(entry.name, repo)


def test_publish_a_full_card_then_load_it_in_a_fresh_process(hub, tmp_path):
    """A real card goes through `POST /api/validate-yaml`; a new process then loads the repo over HF_ENDPOINT."""
    entry = zoo.get_entry("dwp.standard")
    repo, commit = _publish_full_card(hub)
    assert (entry.mirror_dir / "README.md").is_file()
    for name in ("README.md", "metrics.json", "config.json", "model.safetensors"):
        assert hub.file_bytes(repo, commit, name) == (entry.mirror_dir / name).read_bytes(), name
    assert any(request.startswith("POST /api/validate-yaml") for request in hub.state.requests)
    script = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(ROOT)!r})
        import torch, zoo
        from zoo._hub import fetch
        print(fetch(zoo.get_entry("dwp.standard")))                              # the pinned tag v1, sha256-checked
        by_name = zoo.load("dwp.standard", pretrained=True).state_dict()
        by_repo = zoo.load("hf-hub:{repo}").state_dict()
        print(by_name.keys() == by_repo.keys() and all(torch.equal(by_name[k], by_repo[k]) for k in by_name))
    """)
    home = tmp_path / "home"
    # No offline mirror in the child: the weights can only come from the Hub double.
    env = {**os.environ, "HF_HOME": str(home), "ZOO_MIRROR": str(tmp_path / "no-mirror")}
    child = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr[-3000:]
    folder, same = child.stdout.split()
    assert folder.startswith(str(home)) and Path(folder).name == commit and same == "True"


def test_the_full_card_publish_fails_if_the_double_leaves_request_bodies_unread(hub):
    """Mutation check: the double's body reading is what the publish test above relies on."""
    hub.state.read_bodies = False
    try:
        with pytest.raises(Exception):  # noqa: B017 - whatever the client makes of a corrupted response
            _publish_full_card(hub)
    finally:
        hub.state.read_bodies = True
    _publish_full_card(hub)  # and the connection pool recovers


def test_download_copies_verified_files_into_a_mirror_that_zoo_mirror_serves_offline(
    tiny_entry, hf_cache, hf_offline, tmp_path, monkeypatch, capsys
):
    from zoo.cli import main

    target = tmp_path / "my-mirror"
    assert main(["download", "tinytest.blobs", "--to", str(target)]) == 0  # offline: from the shipped mirror
    assert "ZOO_MIRROR=" in capsys.readouterr().err
    copied = target / "tinytest.blobs"
    assert set(tiny_entry.pretrained_cfg.sha256) <= {p.name for p in copied.iterdir()}
    monkeypatch.setenv("ZOO_MIRROR", str(target))
    loaded = zoo.load("tinytest.blobs", pretrained=True)
    assert loaded.net[0].out_features == 12 and zoo.get_entry("tinytest.blobs").mirror_dir == copied
