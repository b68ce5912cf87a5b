"""zoo.common.records: the lock is exclusive while held and released after; a missing record reads as empty."""

from __future__ import annotations

import fcntl
import json

import pytest

from zoo.common.records import file_lock, read_record


def _try_lock(path) -> bool:
    with open(path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
        return True


def test_file_lock_is_exclusive_inside_the_block_and_free_after(tmp_path):
    lock = tmp_path / "nested" / "record.lock"  # the folder is created
    with file_lock(lock):
        assert not _try_lock(lock)
    assert _try_lock(lock)


def test_file_lock_is_released_when_the_block_raises(tmp_path):
    lock = tmp_path / "record.lock"
    with pytest.raises(RuntimeError), file_lock(lock):
        raise RuntimeError("a trial failed")
    assert _try_lock(lock)


def test_read_record_is_empty_before_the_first_write_and_the_json_after(tmp_path):
    path = tmp_path / "tuning_stage.json"
    assert read_record(path) == {}
    path.write_text(json.dumps({"trials": [1]}))
    assert read_record(path) == {"trials": [1]}
