"""A search grid that grows past its edge: no chosen value may sit at the border of the values tried."""

from __future__ import annotations

from collections.abc import Collection, Iterable


def extend_past_edge(
    grid: Iterable[float],
    done: Collection[float],
    best: float | None,
    limits: tuple[float, float],
    factor: float = 2.0,
) -> list[float]:
    """The values to try: the grid and every value tried, plus the next one past an edge where the best trial sits.

    Args:
        grid: The base grid.
        done: The values of the finished trials.
        best: The value of the chosen finished trial (None: no trial scored, nothing is added).
        limits: No value below ``limits[0]`` or above ``limits[1]`` is added.
        factor: The step past an edge (``x / factor`` below, ``x * factor`` above).
    """
    values = sorted({*grid, *done})
    if best is None or not set(values) <= set(done):  # the grid first: an edge is only known once every value ran
        return values
    if best == values[0] and values[0] / factor >= limits[0]:
        return [values[0] / factor, *values]
    if best == values[-1] and values[-1] * factor <= limits[1]:
        return [*values, values[-1] * factor]
    return values
