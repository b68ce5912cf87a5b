"""Progress bars for long work outside Lightning's loops (``zoo eval``, data generation).

Every bar goes through :func:`track`, so ``--quiet`` (or ``ZOO_QUIET=1``) silences them all.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def quiet() -> bool:
    """Whether progress output is switched off (``zoo ... --quiet`` sets ``ZOO_QUIET=1``)."""
    return os.environ.get("ZOO_QUIET", "") not in ("", "0")


def track(iterable: Iterable[T], desc: str, total: int | None = None, leave: bool = False) -> Iterator[T]:
    """Iterate with a tqdm bar on stderr unless quiet.

    Args:
        iterable: What to iterate.
        desc: Label of the bar.
        total: Length, if ``iterable`` has none.
        leave: Keep the finished bar on screen.
    """
    from tqdm.auto import tqdm

    yield from tqdm(iterable, desc=desc, total=total, leave=leave, disable=quiet(), dynamic_ncols=True)
