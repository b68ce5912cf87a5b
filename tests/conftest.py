"""Test session setup: a Hub test server on 127.0.0.1 and a private HF cache, before huggingface_hub loads.

``HF_ENDPOINT`` must be set before ``huggingface_hub`` is imported (it reads its constants at import),
so this happens at the top of the conftest, which pytest imports before any test module.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from tests.hub_server import HubTestServer

_SESSION_DIR = Path(tempfile.mkdtemp(prefix="zoo-tests-"))
HUB = HubTestServer().start()
os.environ["HF_ENDPOINT"] = HUB.endpoint
os.environ["HF_HUB_DISABLE_XET"] = "1"  # the test server speaks no Xet
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_ETAG_TIMEOUT"] = "5"
os.environ["HF_HOME"] = str(_SESSION_DIR / "hf_home")
os.environ["HF_TOKEN"] = "hf_test_token"
os.environ.pop("HF_HUB_OFFLINE", None)
os.environ.pop("HF_HUB_CACHE", None)
assert "huggingface_hub" not in sys.modules, "huggingface_hub was imported before the test Hub was configured"

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def hub() -> HubTestServer:
    """The Hub test server (``HF_ENDPOINT`` points at it)."""
    return HUB


@pytest.fixture
def hf_cache(tmp_path, monkeypatch) -> Path:
    """A fresh, empty HF cache for one test."""
    import huggingface_hub.constants as hf_constants

    cache = tmp_path / "hf_cache"
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(cache))
    return cache


@pytest.fixture
def hf_offline(monkeypatch):
    """HF_HUB_OFFLINE=1 for one test (huggingface_hub reads it at import, so patch the constant too)."""
    import huggingface_hub.constants as hf_constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)


@pytest.fixture
def hub_down(hub):
    """The Hub answers every request with HTTP 503 during the test."""
    hub.set_online(False)
    yield hub
    hub.set_online(True)


def pytest_sessionfinish(session, exitstatus) -> None:
    HUB.stop()


TINY_NAME = "tinytest.blobs"


@pytest.fixture
def tiny_entry(tmp_path, monkeypatch):
    """Register the test-only tiny model as ``tinytest.blobs``, with an offline mirror under tmp_path."""
    import torch

    from tests.tiny.module import TinyClassifier
    from zoo._hub import pinned_files
    from zoo._registry import PaperRef, PretrainedCfg, register_model, unregister_model
    from zoo._serialization import save_pretrained

    cards = tmp_path / "hub_cards"
    monkeypatch.setenv("ZOO_MIRROR", str(cards))
    torch.manual_seed(0)
    save_pretrained(TinyClassifier(hidden=12), cards / TINY_NAME, training={"wall_time_s": 61.0, "seed": 0})
    entry = register_model(
        TINY_NAME,
        module="tests.tiny.module:TinyClassifier",
        description="Tiny test-only MLP on Gaussian blobs",
        model_args={"hidden": 12},
        evaluate="tests.tiny.evaluate:PROTOCOL",
        arm="tiny",
        pretrained_cfg=PretrainedCfg(
            paper=PaperRef(title="A Tiny Test Paper", arxiv="0000.00000", authors=("A. Tester",)),
            hf_hub_id="test-org/tinytest-blobs",
            revision="v1",
            sha256=pinned_files(cards / TINY_NAME),
            license="mit",
            recipe="tests/tiny/recipe.yaml",
            task="tabular-classification",
            datasets=("blobs",),
            headline="accuracy",
            num_params=sum(p.numel() for p in TinyClassifier(hidden=12).parameters()),
            notes="Test-only entry.",
        ),
    )
    yield entry
    unregister_model(TINY_NAME)
