"""Run REPA-P's tests on one intra-op thread.

The models here are tiny (16 x 16 grids, width 8): with two OpenMP threads on a shared 2-core machine the
threads mostly wait for each other (measured: 65 s for this folder on two threads against 7 s on one).
"""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
