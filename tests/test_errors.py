"""Misleading errors of issue 15 (point 6), and loading your own weights: each error is one line with the fix."""

from __future__ import annotations

import errno
import json
import logging

import pytest
import torch

import zoo
from zoo._errors import ChecksumError, HubUnavailableError, NoPretrainedWeightsError, UnknownModelError, ZooError
from zoo._hub import fetch, publish

REPO = "test-org/tinytest-blobs"


def _one_line(error: BaseException) -> str:
    message = str(error.value if hasattr(error, "value") else error)
    assert "\n" not in message and message, message
    return message


@pytest.fixture
def published(tiny_entry, hub):
    hub.state.repos.pop(REPO, None)
    return publish(tiny_entry.name, REPO)


def _same_weights(a, b) -> bool:
    a, b = a.state_dict(), b.state_dict()
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ------------------------------------------------------------------------------------------------ point 6


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a CUDA GPU")
def test_map_location_cuda_without_a_gpu_names_the_device_not_the_file(tiny_entry, hf_cache, hf_offline, tmp_path):
    for source in (tiny_entry.name, str(tiny_entry.mirror_dir)):
        with pytest.raises(ZooError) as info:
            zoo.load(source, pretrained=True, map_location="cuda")
        message = _one_line(info)
        assert "no CUDA GPU" in message and "map_location='cpu'" in message and "safetensors" not in message
    with pytest.raises(ZooError, match="no CUDA GPU"):
        zoo.load(tiny_entry.name, map_location="cuda:0")  # no weights: still the device's fault, said first
    with pytest.raises(ZooError, match="not a torch device"):
        zoo.load(tiny_entry.name, map_location="gpu")


def _unwritable_cache(monkeypatch, hf_cache):
    """What snapshot_download raises on a read-only HF_HOME (reproduced with `chattr +i` and a read-only
    bind mount, as root cannot be denied by file modes): an OSError with EACCES/EPERM/EROFS."""
    import huggingface_hub

    def snapshot_download(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(hf_cache / ".locks"))

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)


def test_read_only_hf_home_is_not_called_an_unreachable_hub(tiny_entry, published, hf_cache, monkeypatch, caplog):
    import zoo._hub as hub_module

    _unwritable_cache(monkeypatch, hf_cache)
    hub_module._mirror_announced.discard(tiny_entry.name)
    with caplog.at_level(logging.INFO, logger="zoo.hub"):
        assert fetch(tiny_entry) == tiny_entry.mirror_dir  # the mirror still serves, saying why
    (said,) = [r.getMessage() for r in caplog.records if "offline mirror" in r.getMessage()]
    assert "not writable" in said and "HF_HOME" in said and "could not be reached" not in said


def test_read_only_hf_home_without_mirror_is_one_line(tiny_entry, published, hf_cache, monkeypatch, tmp_path):
    _unwritable_cache(monkeypatch, hf_cache)
    monkeypatch.setenv("ZOO_MIRROR", str(tmp_path / "no-mirror"))
    with pytest.raises(HubUnavailableError) as info:
        zoo.load(tiny_entry.name, pretrained=True)
    message = _one_line(info)
    assert "is not writable" in message and "set HF_HOME" in message and "no offline mirror" not in message


def test_another_revision_offline_does_not_silently_load_the_pinned_mirror(tiny_entry, hf_cache, hf_offline):
    with pytest.raises(HubUnavailableError) as info:
        zoo.load(tiny_entry.name, pretrained=True, revision="v9")
    message = _one_line(info)
    assert "'v9'" in message and "drop revision=" in message
    assert zoo.load(tiny_entry.name, pretrained=True, revision="v1") is not None  # the pinned one: the mirror


def test_another_revision_with_the_hub_down_does_not_load_the_mirror(tiny_entry, hf_cache, hub_down):
    with pytest.raises(HubUnavailableError, match="'v9'"):
        fetch(tiny_entry, revision="v9")


def test_corrupted_mirror_file_advice_leads_to_a_working_state(tiny_entry, hf_cache, hf_offline):
    weights = tiny_entry.mirror_dir / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-4] + b"\0\0\0\0")
    with pytest.raises(ChecksumError) as info:
        zoo.load(tiny_entry.name, pretrained=True)
    message = _one_line(info)
    assert "restore it" in message and "delete" not in message  # a shipped mirror file is restored, not deleted
    weights.unlink()  # what the old message advised: now the next error says exactly what is missing
    with pytest.raises(HubUnavailableError) as info:
        zoo.load(tiny_entry.name, pretrained=True)
    message = _one_line(info)
    assert "lacks model.safetensors" in message and "restore it" in message and "no offline mirror" not in message


def test_load_of_a_non_string_is_a_clear_type_error():
    with pytest.raises(TypeError) as info:
        zoo.load(123)
    message = _one_line(info)
    assert isinstance(info.value, ZooError) and "not int 123" in message and "difflib" not in message
    with pytest.raises(TypeError, match="not NoneType"):
        zoo.get_entry(None)


def test_wrong_case_gets_a_suggestion():
    with pytest.raises(UnknownModelError) as info:
        zoo.load("FedGR")
    assert "did you mean: fedgr" in _one_line(info)
    with pytest.raises(UnknownModelError, match="dwp.standard"):
        zoo.load("DWP.Standard")


def test_no_weights_message_is_short_with_the_fix_first():
    name = zoo.list_models("resettable_sketch", pretrained=False)[0]
    assert len(zoo.get_entry(name).pretrained_cfg.notes) > 500  # the notes that used to be pasted in whole
    with pytest.raises(NoPretrainedWeightsError) as info:
        zoo.load(name, pretrained=True)
    message = _one_line(info)
    assert message.startswith(f"use zoo.load({name!r}) without pretrained=True") and len(message) < 250


# ------------------------------------------------------------------------------------- your own weights


def test_load_an_exported_folder_by_path(tiny_entry, tmp_path, monkeypatch):
    from tests.tiny.module import TinyClassifier

    torch.manual_seed(3)
    module = TinyClassifier(hidden=7)
    folder = zoo.save_pretrained(module, tmp_path / "runs" / "mine" / "pretrained")
    monkeypatch.chdir(tmp_path)
    for reference in ("runs/mine/pretrained", str(folder), folder):
        loaded = zoo.load(reference)
        assert _same_weights(loaded, module) and not loaded.training
    assert zoo.load("runs/mine/pretrained", hidden=7).net[0].out_features == 7
    with pytest.raises(ZooError) as info:
        zoo.load("runs/other/pretrained")
    assert "is not a folder" in _one_line(info) and "did you mean" not in str(info.value)
    with pytest.raises(ZooError, match="hf-hub:org/repo"):
        zoo.load("org/repo")
    with pytest.raises(ZooError, match="applies to Hub repos"):
        zoo.load(folder, revision="v1")


def test_a_folder_must_name_a_torch_module(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"class_path": "os.system", "init_args": {"command": "true"}}))
    with pytest.raises(ZooError, match="not a torch module"):
        zoo.load(str(tmp_path))


def test_load_any_hub_repo_by_reference(tiny_entry, hub, hf_cache, tmp_path):
    from huggingface_hub import HfApi

    from tests.tiny.module import TinyClassifier

    torch.manual_seed(4)
    module = TinyClassifier(hidden=5)
    folder = zoo.save_pretrained(module, tmp_path / "export")
    api = HfApi()
    hub.state.repos.pop("someone/my-tiny", None)
    api.create_repo("someone/my-tiny", exist_ok=True)
    api.upload_folder(repo_id="someone/my-tiny", folder_path=str(folder))
    assert _same_weights(zoo.load("hf-hub:someone/my-tiny"), module)

    hub.state.repos.pop("someone/not-zoo", None)
    api.create_repo("someone/not-zoo", exist_ok=True)
    api.upload_file(repo_id="someone/not-zoo", path_in_repo="config.json", path_or_fileobj=b'{"hidden_size": 8}')
    with pytest.raises(ZooError, match="has no class_path"):
        zoo.load("hf-hub:someone/not-zoo")


def test_a_registered_repo_by_reference_is_checked_against_the_pins(tiny_entry, hub, published, hf_cache):
    import shutil

    commit = hub.state.repos[REPO].resolve("v1")
    original = commit.files["model.safetensors"]
    commit.files["model.safetensors"] = original[:-4] + b"\0\0\0\0"
    with pytest.raises(ChecksumError, match="model.safetensors"):
        zoo.load(f"hf-hub:{REPO}")
    commit.files["model.safetensors"] = original
    shutil.rmtree(hf_cache)
    assert _same_weights(zoo.load(f"hf-hub:{REPO}"), zoo.load(tiny_entry.name, pretrained=True))


# ----------------------------------------------------------------------------------- a new user's small dead ends


def test_zoo_list_into_a_closed_pipe_and_zoo_version_end_quietly():
    import subprocess
    import sys

    piped = subprocess.run(
        f"{sys.executable} -m zoo list | head -1", shell=True, capture_output=True, text=True, timeout=120
    )
    assert piped.stdout.startswith("name") and "Traceback" not in piped.stderr and "BrokenPipe" not in piped.stderr
    version = subprocess.run([sys.executable, "-m", "zoo", "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.strip() == f"icml26-zoo {zoo.__version__}"


def test_from_pretrained_of_a_missing_folder_says_so_instead_of_blaming_the_hub(tmp_path, monkeypatch):
    from zoo.dwp.module import DWPModule

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ZooError, match="typo-folder is neither a folder here .* nor a Hub repo id ORG/NAME"):
        DWPModule.from_pretrained("typo-folder")


def test_floats_holding_0_255_pixels_are_told_to_be_uint8_or_scaled():
    import numpy as np

    model = zoo.load("dwp.standard")
    with pytest.raises(ZooError, match="0-255 pixels stored as floats; pass them as uint8"):
        model.predict(np.full((2, 28, 28), 200.0))
    with pytest.raises(ZooError, match="pass them unnormalised"):
        model.predict(np.full((2, 28, 28), -1.5))


def test_push_to_hub_without_a_network_names_the_hub(monkeypatch, tmp_path):
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    monkeypatch.setattr(constants, "HF_HUB_ETAG_TIMEOUT", 2)
    with pytest.raises(HubUnavailableError, match="could not reach the Hub at http://127.0.0.1:9 to push me/my-dwp"):
        zoo.load("dwp.standard").push_to_hub("me/my-dwp")
