"""The search grid that grows past its edge (``zoo.eval.grid``)."""

from zoo.eval.grid import extend_past_edge

GRID = (0.01, 0.02, 0.05)


def test_grid_runs_first():
    assert extend_past_edge(GRID, [], None, (0.0, 1.0)) == list(GRID)
    assert extend_past_edge(GRID, [0.01], 0.01, (0.0, 1.0)) == list(GRID)  # an edge is only known once all ran


def test_interior_best_stops():
    assert extend_past_edge(GRID, GRID, 0.02, (0.0, 1.0)) == list(GRID)
    assert extend_past_edge(GRID, [*GRID, 0.1], 0.05, (0.0, 1.0)) == [*GRID, 0.1]  # 0.05 is interior now


def test_edges_extend_within_limits():
    assert extend_past_edge(GRID, GRID, 0.01, (0.0, 1.0)) == [0.005, *GRID]
    assert extend_past_edge(GRID, GRID, 0.05, (0.0, 1.0)) == [*GRID, 0.1]
    assert extend_past_edge(GRID, GRID, 0.05, (0.0, 0.08)) == list(GRID)  # not past the limit
    assert extend_past_edge(GRID, GRID, 0.01, (0.006, 1.0)) == list(GRID)
    assert extend_past_edge(GRID, GRID, 0.05, (0.0, 1.0), factor=10) == [*GRID, 0.5]


def test_no_scored_trial_adds_nothing():
    assert extend_past_edge(GRID, GRID, None, (0.0, 1.0)) == list(GRID)
