"""Every script in benchmarks/ runs: each with ``--smoke``, its smallest arguments (slow: minutes in all)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "benchmarks").rglob("*.py"))


def test_benchmarks_are_timing_scripts_one_folder_per_paper():
    from zoo._registry import PAPER_NAMES

    stray = [p for p in (ROOT / "benchmarks").iterdir() if not p.is_dir() and p.name != "README.md"]
    assert not stray, f"benchmarks/ keeps one folder per paper (or zoo/ for the core): move {stray}"
    folders = {p.name for p in (ROOT / "benchmarks").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders <= {*PAPER_NAMES, "zoo"}, folders - {*PAPER_NAMES, "zoo"}
    assert not list((ROOT / "benchmarks").rglob("*.sh")), "pipelines are `zoo reproduce` steps, not scripts"
    for script in SCRIPTS:
        assert "--smoke" in (ROOT / script).read_text(), f"{script}: give it a --smoke run (its smallest arguments)"


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_runs_with_its_smallest_arguments(script):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ZOO_QUIET": "1"}
    result = subprocess.run(
        [sys.executable, script, "--smoke"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, f"{script} --smoke failed:\n{result.stderr[-3000:]}"
    assert result.stdout.strip(), f"{script} --smoke printed no measurement"
