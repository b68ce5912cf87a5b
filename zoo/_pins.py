"""The sha256 pins of a paper's published files: ``zoo/<paper>/pins.json``, written by ``zoo pin NAME --write``.

A pins file maps each published entry to the sha256 of every file that loading needs::

    {"fedgr.fashion_mnist": {"config.json": "64b7...", "model.safetensors": "15f0..."}}

Pins are data, not code: no digest is spelled in a Python file, and re-pinning an entry rewrites this file only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from zoo._errors import ZooError

PINS_FILE = "pins.json"


def pins_path(paper: str) -> Path:
    """``zoo/<paper>/pins.json`` (inside the installed package or the checkout)."""
    return Path(__file__).resolve().parent / paper / PINS_FILE


def read_pins(paper: str) -> dict[str, dict[str, str]]:
    """Every pinned entry of ``paper``: ``{name: {file: sha256}}`` (empty when the paper publishes nothing)."""
    path = pins_path(paper)
    if not path.is_file():
        return {}
    try:
        pins = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ZooError(
            f"{path} is not valid JSON ({error}); restore it with git or re-run `zoo pin NAME --write`"
        ) from None
    return pins


def write_pins(name: str, files: Mapping[str, str]) -> Path:
    """Set the pins of entry ``name`` in its paper's pins file (the other entries' pins are kept).

    Args:
        name: The full registry name ``paper.tag``.
        files: sha256 by file name, as :func:`zoo._hub.pinned_files` reads them from the entry's folder.

    Returns:
        The pins file written.
    """
    paper = name.split(".", 1)[0]
    pins = read_pins(paper)
    pins[name] = dict(sorted(files.items()))
    path = pins_path(paper)
    path.write_text(json.dumps(dict(sorted(pins.items())), indent=2) + "\n")
    return path
