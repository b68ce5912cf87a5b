"""Run pip with the project's constraints.txt, letting ``ZOO_PINS`` replace individual pins.

tox uses it to test against another Lightning release without a second copy of the constraints:
``ZOO_PINS="lightning==2.4.0 pytorch-lightning==2.4.0" python tools/constrained_pip.py install ...``
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

CONSTRAINTS = Path(__file__).resolve().parents[1] / "constraints.txt"


def canonical(requirement: str) -> str:
    """The normalised project name of a requirement line (PEP 503)."""
    return re.sub(r"[-_.]+", "-", re.split(r"[=<>!~;\[ ]", requirement.strip(), maxsplit=1)[0]).lower()


def merged_constraints(overrides: list[str]) -> str:
    replaced = {canonical(pin) for pin in overrides}
    kept = [
        line
        for line in CONSTRAINTS.read_text().splitlines()
        if line.strip() and not line.startswith("#") and canonical(line) not in replaced
    ]
    return "\n".join(kept + overrides) + "\n"


def main() -> int:
    overrides = os.environ.get("ZOO_PINS", "").split()
    with tempfile.NamedTemporaryFile("w", suffix="-constraints.txt", delete=False) as handle:
        handle.write(merged_constraints(overrides))
    try:
        return subprocess.call([sys.executable, "-m", "pip", *sys.argv[1:], "-c", handle.name])
    finally:
        os.unlink(handle.name)


if __name__ == "__main__":
    sys.exit(main())
