"""Shared fixtures of the GEMQ tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """The small LM is per-operation-overhead bound: one intra-op thread is fastest (10x on a loaded machine)."""
    from zoo.quant.moe.quantizers import torch_threads

    with torch_threads(1):
        yield
