"""Packaging: the wheel ships the offline mirror; CITATION.cff cites the software and all 19 papers."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

import zoo
from zoo._registry import PAPER_NAMES, get_entry

ROOT = Path(__file__).resolve().parents[1]


def test_citation_lists_the_nineteen_papers_and_the_registered_ones():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["type"] == "software"
    references = citation["references"]
    assert len(references) == len(PAPER_NAMES) == 19
    cited = " ".join(str(reference) for reference in references)
    for name in zoo.list_models():
        arxiv = get_entry(name).pretrained_cfg.paper.arxiv
        assert not arxiv or arxiv in cited, f"{name}: arXiv {arxiv} is not in CITATION.cff"


@pytest.mark.slow
def test_wheel_ships_the_offline_mirror(tmp_path):
    wheel_cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*wheel_cmd, "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("icml26_zoo-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    mirrored = [p for p in (ROOT / "hub_cards").glob("*/*") if p.is_file()]
    for path in mirrored:
        assert f"zoo/hub_cards/{path.parent.name}/{path.name}" in names
    assert "zoo/cli.py" in names and not any(n.startswith("tests/") for n in names)
