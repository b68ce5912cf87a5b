"""The README's Python examples run as written, and print what their comments say they print."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_python_block_runs_and_prints_what_it_shows(block, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ZOO_QUIET": "1", "HF_HOME": str(tmp_path / "hf")}
    result = subprocess.run(
        [sys.executable, "-c", block], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    printed = result.stdout.splitlines()
    shown = [line.split("#", 1)[1].strip() for line in block.splitlines() if line.startswith("print(") and "#" in line]
    assert len(printed) >= len(shown)
    for expected in shown:
        assert expected in printed, f"the README shows {expected!r}, the code printed {printed}"
