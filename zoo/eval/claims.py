"""Claims: the checked statements of an evaluation, and the helpers that compare arms over seeds.

Every claim has a kind:

* ``paper``: what the paper claims: the method against another arm (a baseline, an ablation, a reference).
  Only these count as "claims held" on a card; a claim whose arms do not involve the method cannot be one.
* ``headroom``: a gate on the task: the strongest simple rule leaves room above it. A gate holds only if it
  holds on every seed and dataset separately (:meth:`Claim.gate`), not only on the mean.
* ``validity``: a control, a data check, a property true by construction; never a result.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zoo._errors import ZooError

KINDS = ("paper", "headroom", "validity")
MIN_SEEDS = 3  # headline arms of a published card


def reaches(value: float, threshold: float) -> bool:
    """``value >= threshold`` up to float rounding (1e-12 relative), so a gap of exactly the threshold holds
    (0.35 - 0.25 >= 0.10) while thresholds written 1e-9 off to mean a strict inequality stay strict. Every claim
    compares through it; so should a paper's own gate.

    Args:
        value: The measured value.
        threshold: The least value that reaches it.
    """
    return bool(value >= threshold - 1e-12 * max(1.0, abs(threshold)))


def rounded(value: float) -> float:
    """A metric as results store it: a finite float rounded to 6 decimals (a non-finite one raises)."""
    value = float(value)
    if not math.isfinite(value):
        raise ZooError(f"a metric is {value}; every metric must be a finite number")
    return round(value, 6)


@dataclass(frozen=True)
class Claim:
    """One checked statement.

    Args:
        id: Short stable identifier, e.g. ``"beats_reference_zero_field"``.
        text: The statement in words, with the threshold.
        value: The measured value.
        threshold: The value it is compared with.
        holds: Whether the statement holds.
        versus: The arm the subject is compared with, if any.
        kind: ``paper``, ``headroom`` or ``validity`` (see the module docstring).
        arm: The arm the statement is about (the method for a paper claim), if any.
    """

    id: str
    text: str
    value: float
    threshold: float
    holds: bool
    versus: str | None = None
    kind: str = "paper"
    arm: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ZooError(f"claim {self.id!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")

    @classmethod
    def at_least(cls, id: str, text: str, value: float, threshold: float, **kwargs: Any) -> Claim:
        """``value >= threshold`` (:func:`reaches`); ``kwargs`` are ``versus``, ``kind``, ``arm``."""
        return cls(id, text, rounded(value), threshold, reaches(value, threshold), **kwargs)

    @classmethod
    def at_most(cls, id: str, text: str, value: float, threshold: float, **kwargs: Any) -> Claim:
        """``value <= threshold``; ``kwargs`` are ``versus``, ``kind``, ``arm``."""
        return cls(id, text, rounded(value), threshold, reaches(-value, -threshold), **kwargs)

    @classmethod
    def gate(
        cls, id: str, text: str, values: Mapping[str, float], threshold: float, at_most: bool = False, **kwargs: Any
    ) -> Claim:
        """A headroom gate that must hold on every unit (seed, dataset) separately: the value is the worst unit.

        Args:
            id: Identifier.
            text: The statement (the units are appended).
            values: The gate's value per unit, e.g. ``{"seed 0": 0.78, "seed 1": 0.81}``.
            threshold: The bound every unit must reach.
            at_most: The value must be at most ``threshold`` (else at least).
            **kwargs: ``versus``, ``arm`` (``kind`` is ``headroom``).
        """
        if not values:
            raise ZooError(f"gate {id!r} has no unit to check")
        worst = max(values.values()) if at_most else min(values.values())
        units = ", ".join(f"{unit} {value:.4g}" for unit, value in values.items())
        make = cls.at_most if at_most else cls.at_least
        return make(id, f"{text} on every unit ({units})", worst, threshold, kind="headroom", **kwargs)


def per_seed_values(result: Mapping[str, Any], arm: str, metric: str) -> dict[str, float]:
    """``{seed: value}`` of one arm's metric over the seeds that measured it."""
    runs = result["per_seed"].get(arm, {})
    return {seed: scores[metric] for seed, scores in runs.items() if metric in scores}


def paired_gains(
    result: Mapping[str, Any],
    metric: str,
    arm: str,
    other: str,
    higher_is_better: bool = True,
    relative: bool = False,
) -> list[float]:
    """Per-seed gains of ``arm`` over ``other`` on the seeds where both measured ``metric``.

    Args:
        result: The eval result.
        metric: The metric.
        arm: The arm whose gain it is.
        other: The arm it is compared with.
        higher_is_better: Else the gain is ``other - arm``.
        relative: Divide each gain by ``|other|``.

    Raises:
        ZooError: If the two arms share no seed with the metric.
    """
    mine, theirs = per_seed_values(result, arm, metric), per_seed_values(result, other, metric)
    seeds = [seed for seed in mine if seed in theirs]
    if not seeds:
        raise ZooError(f"claim on {metric}: arms {arm!r} and {other!r} share no seed that measured it")
    gains = []
    for seed in seeds:
        a, b = mine[seed], theirs[seed]
        gain = a - b if higher_is_better else b - a
        gains.append(gain / abs(b) if relative and b else gain)
    return gains


def std(values: Sequence[float]) -> float:
    """Sample standard deviation (``ddof=1``); 0.0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def mean_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """``(mean, low, high)``: the two-sided Student-t interval of the mean of ``values`` (seeds, or paired gains).

    Raises:
        ValueError: For fewer than two values (no spread, no interval).
    """
    from scipy.stats import t

    n = len(values)
    if n < 2:
        raise ValueError(f"an interval of the mean needs at least 2 values (seeds), got {n}")
    mean = sum(values) / n
    half = float(t.ppf(0.5 + level / 2, n - 1)) * std(values) / n**0.5
    return mean, mean - half, mean + half


def beats(
    result: Mapping[str, Any],
    metric: str,
    arm: str,
    other: str,
    margin: float = 0.0,
    higher_is_better: bool = True,
    relative: bool = False,
    kind: str = "paper",
) -> Claim:
    """Claim that ``arm`` beats ``other`` on ``metric`` by at least ``margin``, by more than the seed spread.

    The value is the mean paired gain over the seeds both arms measured (``other - arm`` when lower is better;
    divided by ``|other|`` when ``relative``). The claim holds when the gain is at least ``margin`` and also
    larger than the sample standard deviation of the per-seed gains: a gap inside the seed spread is no result.
    """
    gains = paired_gains(result, metric, arm, other, higher_is_better, relative)
    mean = sum(gains) / len(gains)
    spread = std(gains)
    sign = "" if higher_is_better else " (lower is better)"
    unit = " relative" if relative else ""
    text = (
        f"{arm} beats {other} on {metric}{sign} by >= {margin:g}{unit} and by more than the seed spread "
        f"({spread:.3g} over {len(gains)} seeds)"
    )
    holds = reaches(mean, margin) and (len(gains) < 2 or mean > spread)
    return Claim(f"{arm}_beats_{other}_{metric}", text, rounded(mean), margin, bool(holds), other, kind, arm)


def ratio_of_means(result: Mapping[str, Any], metric: str, arm: str, other: str) -> float:
    """``mean(arm) / mean(other)`` of a metric over the seeds (the summaries in ``result["arms"]``)."""
    denominator = result["arms"][other][metric]
    if denominator == 0:
        raise ZooError(f"ratio of {metric}: {other}'s mean is 0")
    return result["arms"][arm][metric] / denominator


def claims_table(result: Mapping[str, Any]) -> str:
    """The claims as a fixed-width table (``zoo eval`` prints it), with their kinds."""
    rows = [("claim", "kind", "value", "threshold", "holds")]
    for claim in result["claims"]:
        holds = "yes" if claim["holds"] else "NO"
        rows.append((claim["id"], claim.get("kind", ""), f"{claim['value']:.4g}", f"{claim['threshold']:.4g}", holds))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    seeds = len(result["seeds"])
    if seeds < MIN_SEEDS:
        lines.append(f"({seeds} seed{'s' * (seeds != 1)}: fewer than {MIN_SEEDS}, so these are not results)")
    return "\n".join(lines)
