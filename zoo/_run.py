"""Facts about the running ``zoo`` command, recorded without importing anything heavy."""

import time

#: When the command started (perf_counter), which recipe files it read, its command line and the
#: resolved config (recipe + overrides, set by ZooCLI) that ExportPretrained records.
RUN_INFO: dict = {"start": None, "configs": [], "command": None, "config": None}


def mark_start() -> None:
    """Record the start of the command; the recipe's wall time is measured from here."""
    RUN_INFO["start"] = time.perf_counter()
