"""Shared fixtures: AdK's states and runs (read once per session with MDAnalysis)."""

import pytest

pytest.importorskip("MDAnalysis")
pytest.importorskip("MDAnalysisTests")


@pytest.fixture(scope="session")
def adk():
    from zoo.promise.structures import load_adk

    return load_adk()
