"""The record of one ``zoo fit|validate|test|predict`` command, handed by the CLI to the export it makes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class RunRecord:
    """What a command knows about itself, and where its exports went.

    Args:
        started: When the command started (``time.perf_counter``); the recipe's wall time is measured from here.
        configs: The recipe files it read, as recorded (``recipes/<paper>/<variant>.yaml`` when packaged).
        command: Its command line (``["zoo", "fit", "-c", ...]``).
        config: The resolved config (recipe + overrides + defaults), set by ZooCLI before the classes are built.
        exports: The folders ExportPretrained wrote, in order.
        skipped: Why an ExportPretrained made no export (a ``fast_dev_run``, an interrupted fit), if it did not.
    """

    started: float | None = field(default_factory=time.perf_counter)
    configs: list[str] = field(default_factory=list)
    command: list[str] | None = None
    config: dict[str, Any] | None = None
    exports: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
