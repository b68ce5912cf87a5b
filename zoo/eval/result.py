"""The result of an evaluation, assembled from its pieces: summaries over seeds, claims, checks.

The result schema (``zoo eval NAME --json``, a card's metrics.json)::

    {"name", "zoo_version", "settings", "seeds", "arms", "per_seed", "claims", "extras", "timings", "provenance"}

``arms[arm]`` holds the mean over seeds of every metric, ``<metric>_std`` (sample standard deviation,
``ddof=1``; 0.0 for one seed) and ``n_seeds``; ``per_seed[arm][seed]`` holds every piece's metrics; ``extras``
merges, per seed, what the pieces recorded beside their metrics. ``settings`` holds the resolved settings plus
``method``, ``baselines``, ``ablations``, ``references``, ``tuning``, ``lower_is_better``, ``overrides`` and
``source``.
``provenance`` says which code measured it: the commits, the zoo version, the sha256 of the evaluation's code
and of the weights it scored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from zoo._errors import ZooError
from zoo.eval.claims import KINDS, MIN_SEEDS, Claim, rounded, std
from zoo.eval.protocol import ROLES, Protocol, Tuning

SCHEMA_KEYS = ("name", "zoo_version", "settings", "seeds", "arms", "per_seed", "claims", "extras", "timings")
OPTIONAL_KEYS = ("provenance",)
CLAIM_KEYS = {"id", "text", "value", "threshold", "holds", "versus", "kind", "arm"}


def summarise(runs: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Mean over seeds of every metric, ``<metric>_std`` (sample std, ddof=1; 0.0 for one seed), ``n_seeds``."""
    keys: list[str] = []
    for scores in runs.values():
        keys += [k for k in scores if k not in keys]
    summary: dict[str, float] = {}
    for key in keys:
        values = [scores[key] for scores in runs.values() if key in scores]
        summary[key] = rounded(sum(values) / len(values))
        summary[f"{key}_std"] = rounded(std(values))
    summary["n_seeds"] = len(runs)
    return summary


def merge(into: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Merge nested dicts: ``extra``'s leaves win, dicts merge key by key."""
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = json.loads(json.dumps(value)) if isinstance(value, Mapping | list) else value
    return into


def settings_record(protocol: Protocol, settings: Mapping[str, Any], overrides: Mapping, source: str) -> dict:
    """``result["settings"]``: the resolved settings, the arms by role, the tuning record, overrides, source."""
    record = dict(settings)
    for role in ROLES:
        value = protocol.role(role)
        record[role] = value if role == "method" else list(value)
    default = Tuning(note="the recipe's values")
    record["tuning"] = {arm: asdict(protocol.tuning.get(arm, default)) for arm in protocol.arms}
    record["lower_is_better"] = list(protocol.lower_is_better)
    if protocol.method_variants:
        record["method_variants"] = list(protocol.method_variants)
    if protocol.ceilings:
        record["ceilings"] = list(protocol.ceilings)
    record["overrides"] = dict(overrides)
    record["source"] = source
    return record


def assemble(
    protocol: Protocol,
    name: str,
    pieces: Iterable[Mapping[str, Any]],
    settings: Mapping[str, Any],
    *,
    seeds: Sequence[int],
    overrides: Mapping[str, Any] | None = None,
    source: str = "",
    zoo_version: str | None = None,
    timings: Mapping[str, float] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The result of an evaluation from its pieces (the claims only when every arm is there).

    Args:
        protocol: The paper's protocol.
        name: The entry name the result is filed under.
        pieces: ``{"arm", "seed", "scores", "extras", "seconds"}`` records.
        settings: The resolved settings.
        seeds: The seeds, in order.
        overrides: The ``--set`` values.
        source: Where the pieces came from, in words.
        zoo_version: The version that measured them (default: this one).
        timings: The run's recorded timings (default: the pieces' seconds summed per arm).
        provenance: Which code and weights measured them.
    """
    from zoo._version import __version__

    pieces = list(pieces)
    order = {arm: i for i, arm in enumerate(protocol.arms)}
    seed_order = {str(seed): i for i, seed in enumerate(seeds)}
    ordered = sorted(pieces, key=lambda p: (order.get(p["arm"], len(order)), seed_order.get(str(p["seed"]), 0)))
    per_seed: dict[str, dict[str, dict[str, float]]] = {}
    for piece in ordered:
        per_seed.setdefault(piece["arm"], {})[str(piece["seed"])] = dict(piece["scores"])
    extras: dict[str, Any] = {}
    for piece in sorted(pieces, key=lambda p: (seed_order.get(str(p["seed"]), 0), order.get(p["arm"], 0))):
        if piece.get("extras"):
            merge(extras.setdefault(str(piece["seed"]), {}), piece["extras"])
    if timings is None:
        totals: dict[str, float] = {}
        for piece in ordered:
            totals[f"{piece['arm']}_s"] = round(totals.get(f"{piece['arm']}_s", 0.0) + (piece.get("seconds") or 0.0), 2)
        timings = {**totals, "total_s": round(sum(totals.values()), 2)}
    result: dict[str, Any] = {
        "name": name,
        "zoo_version": zoo_version or __version__,
        "settings": settings_record(protocol, settings, overrides or {}, source),
        "seeds": list(seeds),
        "arms": {arm: summarise(runs) for arm, runs in per_seed.items()},
        "per_seed": per_seed,
        "claims": [],
        "extras": extras,
        "timings": dict(timings),
    }
    if provenance is not None:
        result["provenance"] = dict(provenance)
    if set(per_seed) == set(protocol.arms):
        result["claims"] = [asdict(claim) for claim in protocol.claims(result)]
    return result


def is_complete(protocol: Protocol, result: Mapping[str, Any]) -> bool:
    """Whether every arm of the protocol has a piece for every seed of the result."""
    seeds = {str(seed) for seed in result["seeds"]}
    return all(set(result["per_seed"].get(arm, {})) >= seeds for arm in protocol.arms)


def validate_result(result: Mapping[str, Any], require_seeds: bool = True, complete: bool = True) -> None:
    """Check the eval schema: keys, finite arms, claims and their kinds, a reference arm, the tuning record, seeds.

    Args:
        result: The eval result.
        require_seeds: Also require ``n_seeds >= 3`` for the method, baselines and references (a card).
        complete: Require the reference arm and the claims (False for a run of a subset of the arms).

    Raises:
        ZooError: Naming the first problem.
    """
    missing = [key for key in SCHEMA_KEYS if key not in result]
    if missing or set(result) - set(SCHEMA_KEYS) - set(OPTIONAL_KEYS):
        raise ZooError(f"eval result keys are {sorted(result)}, expected {list(SCHEMA_KEYS)} (+ provenance)")
    arms = result["arms"]
    if not isinstance(arms, dict) or not arms:
        raise ZooError("eval result has no arms; an evaluation compares the method with its baselines")
    for arm, metrics in arms.items():
        if not isinstance(metrics, dict) or not metrics:
            raise ZooError(f"arm {arm!r} has no metrics")
        for key, value in metrics.items():
            if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
                raise ZooError(f"arms.{arm}.{key} = {value!r} is not a finite number")
    settings = result["settings"]
    _check_tuning(settings)
    if complete:
        _check_claims(result)
        if require_seeds:
            _check_seeds(settings, arms)
    json.dumps(result, allow_nan=False)


def _check_claims(result: Mapping[str, Any]) -> None:
    settings, arms, claims = result["settings"], result["arms"], result["claims"]
    references = [arm for arm in settings.get("references", []) if arm in arms]
    if not references:
        raise ZooError(
            "the evaluation lists no reference arm in settings.references: add an arm that needs no learning "
            "(zero, prior, untrained, label-free) and a claim that the method beats it"
        )
    if not isinstance(claims, list) or not claims:
        raise ZooError("the evaluation has no claims: `claims(result)` must return the paper's checked statements")
    method = settings["method"]
    methods = {method, *settings.get("method_variants", [])}
    for claim in claims:
        if set(claim) != CLAIM_KEYS:
            raise ZooError(f"claim {claim.get('id')!r} must have {', '.join(sorted(CLAIM_KEYS))}")
        if claim["kind"] not in KINDS:
            raise ZooError(f"claim {claim['id']!r}: kind {claim['kind']!r} is not one of {', '.join(KINDS)}")
        if claim["kind"] == "paper" and not methods & {claim["arm"], claim["versus"]}:
            raise ZooError(
                f"claim {claim['id']!r} is of kind paper but does not involve the method {method!r} (arm "
                f"{claim['arm']!r}, versus {claim['versus']!r}): give arm= or make it a headroom or validity check"
            )
    if not any(claim["versus"] in references for claim in claims):
        raise ZooError(f"no claim compares the method with a reference arm ({', '.join(references)})")


def _check_seeds(settings: Mapping[str, Any], arms: Mapping[str, Any]) -> None:
    for role in ("method", "baselines", "references"):
        names = [settings[role]] if role == "method" else settings.get(role, [])
        for arm in names:
            if arm in arms and arms[arm].get("n_seeds", 0) < MIN_SEEDS:
                raise ZooError(f"arm {arm!r} ran {arms[arm].get('n_seeds', 0)} seed(s); a card needs {MIN_SEEDS}")


def _check_tuning(settings: Mapping[str, Any]) -> None:
    tuning = settings.get("tuning")
    if not isinstance(tuning, dict):
        raise ZooError("settings.tuning is missing: say for each arm which split chose it, the grid and the trials")
    method = settings.get("method")
    if method not in tuning:
        raise ZooError(f"settings.tuning has no entry for the method {method!r}")
    for baseline in settings.get("baselines", []):
        if baseline not in tuning:
            raise ZooError(f"settings.tuning has no entry for the baseline {baseline!r}")
        if tuning[baseline]["trials"] < tuning[method]["trials"]:
            raise ZooError(
                f"baseline {baseline!r} had {tuning[baseline]['trials']} tuning trials, fewer than the method's "
                f"{tuning[method]['trials']}: give it the same budget"
            )


__all__ = ["Claim", "assemble", "is_complete", "merge", "summarise", "validate_result"]
