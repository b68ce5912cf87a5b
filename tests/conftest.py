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
