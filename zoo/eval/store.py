"""The evaluation cache: measured pieces and stored fits under ``ZOO_EVAL_CACHE``, keyed by what decides them.

A piece is one arm's metrics for one seed. Its key is the evaluation, the arm, the seed, the resolved settings,
``--retrain``, the digest of ``--weights`` and the digest of the code that measures it (:func:`code_digest`:
the zoo's core, ``zoo/common``, ``zoo/quant``, the paper's package with its pins and tuning files, and its
recipes), so a cached piece is always a measurement by the code at hand; change the code and it is measured
again. A stored fit is the exported folder of one recipe fit (recipe text, seed, overrides, code digest), so
worker processes and resumed runs share fits instead of training twice; a lock file makes concurrent workers
wait for one fit rather than repeat it.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from zoo._paths import eval_cache

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
#: Folders of zoo/ that every paper's code may use (the other top-level folders are papers).
CORE_FOLDERS = ("eval", "common", "quant")
CODE_SUFFIXES = (".py", ".json", ".txt", ".yaml", ".yml")


def digest(value: Any) -> str:
    """sha256 (hex) of a JSON-able value, keys sorted."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


#: Files that only measure or describe a fit (never imported by training): a change to them keeps stored fits.
#: ``tuning_*.json`` are the records of tuning stages (a trial written mid-run must not retrain stored fits; what
#: a record chooses reaches a fit as recipe values or overrides, which key it).
EVALUATION_ONLY = ("evaluate*.py", "tune*.py", "usage.py", "publish.py", "tuning_*.json")
#: Core files that only measure, publish or print: the harness except ``eval/run.py`` (which runs the fits).
CORE_EVALUATION_ONLY = ("eval/*.py", "_cards.py", "_readme.py", "_demo.py", "cli.py")
CORE_TRAINING = ("eval/run.py",)


@functools.cache
def code_digest(paper: str, training: bool = False) -> str:
    """sha256 over the source files that decide a paper's results (read once per process).

    Args:
        paper: The paper's package name under ``zoo/``.
        training: Only the files a fit depends on (the key of stored fits): the evaluation's own code, tuning
            scripts, card text and the core's measuring and publishing files are left out, so adding an arm or a
            claim does not retrain every arm.
    """
    from zoo._recipes import recipes_root

    files = sorted(PACKAGE_ROOT.glob("*.py"))
    for folder in (*CORE_FOLDERS, paper):
        files += sorted(p for p in (PACKAGE_ROOT / folder).rglob("*") if p.suffix in CODE_SUFFIXES)
    if training:
        skipped = {p for pattern in CORE_EVALUATION_ONLY for p in PACKAGE_ROOT.glob(pattern)}
        skipped -= {PACKAGE_ROOT / name for name in CORE_TRAINING}
        skipped |= {p for pattern in EVALUATION_ONLY for p in (PACKAGE_ROOT / paper).glob(pattern)}
        files = [path for path in files if path not in skipped]
    files += sorted((recipes_root() / paper).rglob("*.yaml"))
    hasher = hashlib.sha256()
    for path in files:
        hasher.update(path.name.encode())
        hasher.update(path.read_bytes())
    return hasher.hexdigest()


def folder_digest(folder: str | Path) -> str:
    """sha256 over the files of a folder (``--weights``), by name and content."""
    hasher = hashlib.sha256()
    for path in sorted(Path(folder).iterdir()):
        if path.is_file():
            hasher.update(path.name.encode())
            hasher.update(path.read_bytes())
    return hasher.hexdigest()


class PieceCache:
    """Measured pieces as JSON files ``<root>/pieces/<paper>/<arm>-seed<seed>-<key>.json``.

    Args:
        root: The cache folder (None: caching off, every read misses and nothing is written).
    """

    def __init__(self, root: Path | None = None) -> None:
        self.root = root

    @classmethod
    def default(cls) -> PieceCache:
        return cls(eval_cache())

    def path(self, paper: str, arm: str, seed: int, key: Any) -> Path | None:
        if self.root is None:
            return None
        return self.root / "pieces" / paper / f"{arm}-seed{seed}-{digest(key)[:16]}.json"

    def read(self, path: Path | None) -> dict[str, Any] | None:
        if path is None or not path.is_file():
            return None
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError:  # a piece cut off by a kill: measure it again
            return None

    def write(self, path: Path | None, piece: dict[str, Any]) -> None:
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_text(json.dumps(piece, allow_nan=False))
        os.replace(temporary, path)  # a reader never sees half a piece


class FitStore:
    """Trained modules shared by the pieces of one evaluation: in memory, and as exported folders on disk.

    Args:
        root: The cache folder (None: fits live in memory only, for this process).
    """

    def __init__(self, root: Path | None = None) -> None:
        self.root = root
        self.memory: dict[str, Any] = {}

    def folder(self, key: Any) -> Path | None:
        return None if self.root is None else self.root / "fits" / digest(key)[:24]

    @contextlib.contextmanager
    def locked(self, key: Any) -> Iterator[None]:
        """Hold the fit's lock file, so a second process waits for this fit instead of repeating it."""
        folder = self.folder(key)
        if folder is None:
            yield
            return
        folder.parent.mkdir(parents=True, exist_ok=True)
        with open(folder.with_suffix(".lock"), "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
