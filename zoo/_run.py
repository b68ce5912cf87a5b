"""Facts about the running ``zoo`` command, recorded without importing anything heavy."""

import time

#: When the command started (perf_counter) and which recipe files it read.
RUN_INFO: dict = {"start": None, "configs": []}


def mark_start() -> None:
    """Record the start of the command; the recipe's wall time is measured from here."""
    RUN_INFO["start"] = time.perf_counter()
