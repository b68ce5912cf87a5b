"""Regenerate README.md's models table from hub_cards/*/metrics.json (``--check``: fail if it is stale).

Usage: python tools/readme_table.py [--check]
"""

import sys
from pathlib import Path

from zoo._readme import update_readme

README = Path(__file__).resolve().parents[1] / "README.md"

if __name__ == "__main__":
    current = update_readme(README, check="--check" in sys.argv)
    if "--check" in sys.argv and not current:
        sys.exit("README.md's models table is stale: run `python tools/readme_table.py`")
    print("README.md models table is current" if current else "README.md models table rewritten")
