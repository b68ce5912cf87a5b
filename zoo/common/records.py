"""JSON records that several processes update (tuning trials): an exclusive file lock, a read and an atomic write."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the lock file ``path`` (created, with its folder) inside the ``with`` block.

    Args:
        path: The lock file; every process that updates the same record must name the same one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_record(path: Path) -> dict[str, Any]:
    """The JSON record at ``path``, or ``{}`` before the first write."""
    return json.loads(path.read_text()) if path.is_file() else {}


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Write ``record`` as JSON (indent 1) to ``path`` through a temporary file, so a kill never leaves half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(temporary, path)
