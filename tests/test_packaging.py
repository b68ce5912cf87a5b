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


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wheel")
    wheel_cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*wheel_cmd, "-w", str(folder), str(ROOT)], check=True, capture_output=True)
    (built,) = folder.glob("icml26_zoo-*.whl")
    return built


def test_the_wheel_ships_code_recipes_and_card_text_but_no_weights_and_stays_small(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert wheel.stat().st_size < 20 * 1024 * 1024, f"the wheel is {wheel.stat().st_size / 2**20:.1f} MiB"
    for path in (ROOT / "hub_cards").glob("*/*"):
        shipped = f"zoo/hub_cards/{path.parent.name}/{path.name}" in names
        text = path.name in ("README.md", "config.json", "metrics.json", "pieces.json") or path.suffix == ".png"
        assert shipped == text, f"{path.relative_to(ROOT)}: {'shipped' if shipped else 'missing'}"
    for path in (ROOT / "zoo").glob("*/*"):
        if path.suffix in (".json", ".md", ".txt"):
            assert f"zoo/{path.parent.name}/{path.name}" in names, path  # pins, tuning records, card text
    assert "zoo/cli.py" in names and "zoo/recipes/fedgr/fashion_mnist.yaml" in names
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)
