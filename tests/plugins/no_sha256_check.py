"""A pytest plugin that switches off the zoo's sha256 verification (a mutation, for test_hub's self-check)."""

import zoo._hub


def pytest_configure(config):
    zoo._hub.verify_files = lambda *args, **kwargs: None
