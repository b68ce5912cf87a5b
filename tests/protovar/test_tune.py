"""The student-protocol rule of the validation tuning: the fewest steps with headroom, else the largest."""

import pytest

from zoo.protovar import tune


class FakePool:
    """Answers each (arm, point, ...) task from a table, in order, like ``Pool.map``."""

    def __init__(self, table):
        self.table = table

    def map(self, fn, tasks, chunksize=1):
        return [self.table[(task[1]["steps"], task[1]["lr"])][task[0]] for task in tasks]


def scores(full, real, herding):
    return {"full_data": full, "random_real": real, "herding": herding}


GRID = {"steps": [300, 1000], "lr": [0.01, 0.03]}


def test_fewest_steps_whose_headroom_reaches_the_gate():
    table = {
        (300, 0.01): scores(0.80, 0.79, 0.70), (300, 0.03): scores(0.81, 0.80, 0.70),  # headroom 1 point
        (1000, 0.01): scores(0.90, 0.80, 0.84), (1000, 0.03): scores(0.88, 0.80, 0.82),  # 6 points
    }  # fmt: skip
    record = tune.tune_student(FakePool(table), 10, 100, GRID)
    # at 1000 steps lr 0.01 has the better mean of full_data and random_real (0.85 against 0.84)
    assert record["best"] == {"steps": 1000, "lr": 0.01}
    assert record["validation_headroom"] == pytest.approx(0.06)
    assert record["trials"] == 4 and "the fewest steps" in record["note"]


def test_without_headroom_the_largest_gap_is_chosen_and_said():
    table = {
        (300, 0.01): scores(0.80, 0.79, 0.70), (300, 0.03): scores(0.81, 0.80, 0.70),  # 1 point
        (1000, 0.01): scores(0.86, 0.83, 0.84), (1000, 0.03): scores(0.84, 0.84, 0.80),  # 2 points, 0
    }  # fmt: skip
    record = tune.tune_student(FakePool(table), 10, 100, GRID)
    assert record["best"] == {"steps": 1000, "lr": 0.01}
    assert record["validation_headroom"] == pytest.approx(0.02)
    assert "no step count" in record["note"]
