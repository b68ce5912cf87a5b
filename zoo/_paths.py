"""Where the zoo keeps what it computes once and reuses: one data-cache root, one evaluation cache.

* ``ZOO_CACHE_DIR`` (default ``$XDG_CACHE_HOME/icml26-zoo``, i.e. ``~/.cache/icml26-zoo``) holds every paper's
  derived data (``cache_dir("boba")`` = ``$ZOO_CACHE_DIR/boba``: built libraries, embeddings, rendered clips...).
* ``ZOO_EVAL_CACHE`` (default ``$ZOO_CACHE_DIR/eval``; ``off`` disables it) holds ``zoo eval``'s measured pieces
  and stored fits, keyed by everything that decides them (see :mod:`zoo.eval.store`).

Both are outside git and can be deleted at any time: what is there is rebuilt on demand.
"""

from __future__ import annotations

import os
from pathlib import Path

OFF = ("off", "0", "false", "no")


def cache_root() -> Path:
    """``$ZOO_CACHE_DIR``, else ``$XDG_CACHE_HOME/icml26-zoo`` (``~/.cache/icml26-zoo``)."""
    if os.environ.get("ZOO_CACHE_DIR"):
        return Path(os.environ["ZOO_CACHE_DIR"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "icml26-zoo"


def cache_dir(*parts: str, create: bool = True) -> Path:
    """A folder under the data-cache root, e.g. ``cache_dir("boba")``; created unless ``create`` is False.

    Args:
        *parts: Sub-folders, the paper's name first.
        create: Create the folder (and its parents).
    """
    path = cache_root().joinpath(*parts)
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def eval_cache() -> Path | None:
    """``$ZOO_EVAL_CACHE`` (default ``$ZOO_CACHE_DIR/eval``), or None when it is set to ``off``."""
    value = os.environ.get("ZOO_EVAL_CACHE", "")
    if value.strip().lower() in OFF:
        return None
    return Path(value).expanduser() if value else cache_root() / "eval"
