"""One intra-op thread for the pbsac tests: the networks are tiny and two threads only add contention."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)
