"""What a paper declares about its evaluation: settings, arms, shared passes, tuning records and the protocol.

A paper's ``evaluate.py`` builds one :class:`Protocol` (``PROTOCOL``); the harness (:mod:`zoo.eval.engine`) owns
everything else: seeds, which pieces (arm, seed) to measure, caching, stored fits, worker processes, timing,
resumption, the result and the card.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from zoo._errors import ZooError

DEFAULT_SEEDS = (0, 1, 2)
ROLES = ("method", "baselines", "ablations", "references")


@dataclass(frozen=True)
class Setting:
    """One key of an evaluation's settings, overridable with ``zoo eval NAME --set KEY=VALUE``.

    Args:
        default: The protocol's value; its type is the type a ``--set`` value must parse to.
        help: What the key means (``zoo eval NAME --settings`` prints it).
        choices: The allowed values, if the key is categorical.
        recipe_keys: LightningCLI keys (``"data.init_args.noise"``) set to this value when an arm is trained;
            a value other than the default makes every arm train instead of loading the published weights.
        minimum: The smallest allowed value of a number.
    """

    default: Any
    help: str
    choices: tuple[Any, ...] | None = None
    recipe_keys: tuple[str, ...] = ()
    minimum: float | None = None

    def parse(self, key: str, text: str) -> Any:
        """Parse a ``--set`` value to this setting's type; a bad value raises a one-line ZooError."""
        kind = type(self.default)
        try:
            if kind is bool:
                lowered = text.strip().lower()
                if lowered not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError
                value: Any = lowered in ("true", "1", "yes")
            elif kind in (list, tuple):
                value = kind(json.loads(text) if text.strip().startswith("[") else _split_list(text, self.default))
            elif kind is int:
                value = int(text)
            elif kind is float:
                value = float(text)
            else:
                value = text
        except (ValueError, TypeError, json.JSONDecodeError):
            raise ZooError(f"--set {key}={text}: expected {_type_name(self.default)} ({self.help})") from None
        self.check(key, value)
        return value

    def check(self, key: str, value: Any) -> None:
        """Raise a one-line ZooError if ``value`` is not among the choices or below the minimum."""
        if self.choices is not None and value not in self.choices:
            raise ZooError(f"--set {key}={value}: expected one of {', '.join(map(str, self.choices))}")
        numbers = value if isinstance(value, list | tuple) else [value]
        if self.minimum is not None and any(isinstance(v, int | float) and v < self.minimum for v in numbers):
            raise ZooError(f"--set {key}={value}: must be at least {self.minimum}")


def _split_list(text: str, default: Sequence[Any]) -> list[Any]:
    item_type = type(default[0]) if len(default) else str
    return [item_type(part) for part in text.split(",") if part.strip()]


def _type_name(value: Any) -> str:
    if isinstance(value, list | tuple):
        inner = type(value[0]).__name__ if len(value) else "str"
        return f"a comma-separated list of {inner}"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(type(value), "a value")


@dataclass(frozen=True)
class Tuning:
    """How an arm's hyperparameters were chosen (``settings.tuning`` of the result).

    Args:
        split: The data that chose them: ``"validation"``, ``"none"`` (fixed by the paper or the spec), ...
        grid: The values tried, by hyperparameter.
        trials: The number of configurations tried.
        note: Anything else a reader needs (where the grid ran, what won).
    """

    split: str = "none"
    grid: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    trials: int = 0
    note: str = ""


@dataclass(frozen=True)
class Arm:
    """One arm of an evaluation, and how the harness gets its model.

    An arm is measured in one of three ways:

    * ``Arm("fedavg")``: the entry registered with ``arm="fedavg"`` (or ``entry=``) gives the published weights
      for the published seed with default settings; any other run trains that entry's recipe. The protocol's
      ``score(arm, model, run)`` measures the model.
    * ``Arm("fedgr_no_sieve", base="fedgr", overrides=("--model.init_args.fedgr.sieve=false",))``: trains the
      recipe of ``base``'s entry (or ``recipe=``) with the overrides on top, then ``score`` measures it.
    * ``Arm("reference_prior", measure=prior_accuracy)``: ``measure(run)`` returns the metrics itself (a rule
      without learning, a simulation, a pass over published models with its own logic).

    Arms that genuinely share one pass (one decoding loop, one tuned pipeline) are grouped by :class:`Shared`.

    Args:
        name: The arm's name in the result (``reference_<what>`` for a reference).
        base: The arm whose entry's recipe is trained, for an arm without weights of its own.
        overrides: LightningCLI arguments on top of the recipe, or a function of the run returning them.
        recipe: A recipe that belongs to no entry (instead of ``base``'s).
        entry: The registry name whose weights this arm is, when no entry is registered with ``arm=name``.
        measure: ``measure(run) -> {metric: value}``, for an arm the harness does not load.
        timed: Its metrics include wall-clock time: measure it alone, never beside another piece.
        help: One line on what the arm is.
    """

    name: str
    base: str | None = None
    overrides: Sequence[str] | Callable[[Any], Sequence[str]] = ()
    recipe: str | None = None
    entry: str | None = None
    measure: Callable[[Any], Mapping[str, float]] | None = None
    timed: bool = False
    help: str = ""

    def __post_init__(self) -> None:
        if self.measure is not None and (self.base or self.recipe or self.overrides):
            raise ZooError(f"arm {self.name!r}: measure= replaces loading; drop base=, recipe= and overrides=")

    @classmethod
    def scored(cls, name: str, measure: Callable[..., Mapping[str, float]], help: str = "", **kwargs: Any) -> Arm:
        """An arm measured by ``measure(name, run)``, one function serving several arms (``Arm.scored("ce",
        reference_scores)`` is ``Arm("ce", measure=partial(reference_scores, "ce"))``)."""
        return cls(name, measure=functools.partial(measure, name), help=help, **kwargs)

    def fit_overrides(self, run: Any) -> list[str]:
        """This arm's LightningCLI overrides for ``run``."""
        return list(self.overrides(run) if callable(self.overrides) else self.overrides)


@dataclass(frozen=True)
class Shared:
    """Arms measured together in one pass per seed, e.g. decoding policies run over one checkpoint side by side.

    Args:
        arms: The arms the pass measures (each also declared in a role of the protocol).
        measure: ``measure(run) -> {arm: {metric: value}}``; may also fill ``run.extras``.
        timed: Its metrics include wall-clock time: measure it alone.
    """

    arms: tuple[str, ...]
    measure: Callable[[Any], Mapping[str, Mapping[str, float]]]
    timed: bool = False

    @property
    def name(self) -> str:
        return "+".join(self.arms)


@dataclass(frozen=True)
class Step:
    """One step of ``zoo reproduce``: a command, and what it is for.

    Args:
        name: Short name (``fit:fedgr.fedavg``, ``tune``, ``eval``).
        argv: The command, as a list (``["zoo", "fit", "-c", ...]`` or ``["python", "-m", ...]``).
        help: What it makes.
        stage: ``"prepare"`` (before the fits: data, tokenizers, tuning that the recipes read) or ``"tune"``
            (after the fits, before the evaluation).
    """

    name: str
    argv: tuple[str, ...]
    help: str = ""
    stage: str = "prepare"


@dataclass(frozen=True)
class Protocol:
    """A paper's evaluation: arms by role, settings, tuning records, claims and figure.

    Args:
        method: The arm of the paper's method.
        baselines: The paper's (tuned) baselines.
        ablations: One arm per main component of the method, with that component removed.
        references: Arms that need no learning or use none of the method (``reference_<what>``).
        settings: The overridable settings by key.
        tuning: How each arm's hyperparameters were chosen; arms not listed used their recipe's values.
        shared: Groups of arms measured in one pass per seed.
        score: ``score(arm, model, run) -> {metric: value}`` for arms the harness loads or trains.
        claims: ``claims(result) -> [Claim]``: the paper's checked statements, headroom gates and checks.
        plot: ``plot(result, axes)`` draws the card's figure on ``panels`` axes (default: bars of ``headline``).
        score_pretrained: ``score_pretrained(module, limit=None) -> {metric: value}``, the headline of a loaded
            checkpoint on the first ``limit`` test items (``zoo demo``, golden tests).
        seeds: Default seeds (at least three).
        seed_args: LightningCLI keys that receive the seed when an arm is trained from its recipe.
        fit_args: LightningCLI arguments added to every fit that change what a fit records, not what it
            trains (a monitoring curve), or a function of the run returning them; unlike an arm's overrides
            they leave the published weights in use for the published seed.
        published_seed: The seed whose run the published checkpoints are.
        headline: The metrics of the default figure, first one first.
        lower_is_better: Metrics where a lower value is better (errors, latencies, regret); cards and the README
            compare arms on them in that direction.
        panels: Number of axes ``plot`` draws on.
        method_variants: Arms that are the method itself under another setting (GEMQ at another bit budget), so
            claims about them are claims of the paper; an ablation of a component is not one.
        ceilings: Arms that see what no competitor may (an oracle's gradients, the clean labels, all the data):
            upper bounds, shown beside the method but never its headline competitor.
        steps: Steps of ``zoo reproduce`` before the fits (building data, say), and ``tune`` when the paper has
            a tuning command; the harness adds fit, pin, eval and card steps.
    """

    method: str | Arm
    baselines: tuple[str | Arm, ...] = ()
    ablations: tuple[str | Arm, ...] = ()
    references: tuple[str | Arm, ...] = ()
    settings: Mapping[str, Setting] = field(default_factory=dict)
    tuning: Mapping[str, Tuning] = field(default_factory=dict)
    shared: tuple[Shared, ...] = ()
    score: Callable[[str, Any, Any], Mapping[str, float]] | None = None
    claims: Callable[[dict], list] | None = None
    plot: Callable[[dict, Any], None] | None = None
    score_pretrained: Callable[..., Mapping[str, float]] | None = None
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    seed_args: tuple[str, ...] = ("seed_everything",)
    fit_args: Sequence[str] | Callable[[Any], Sequence[str]] = ()
    published_seed: int = 0
    headline: tuple[str, ...] = ()
    lower_is_better: tuple[str, ...] = ()
    panels: int = 1
    method_variants: tuple[str, ...] = ()
    ceilings: tuple[str, ...] = ()
    steps: tuple[Step, ...] = ()

    def __post_init__(self) -> None:
        names = [arm.name for arm in self.arm_specs]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ZooError(f"arm(s) {', '.join(repeated)} declared twice in the protocol")
        for group in self.shared:
            unknown = [arm for arm in group.arms if arm not in names]
            if unknown:
                raise ZooError(f"Shared({group.name}) names arms the protocol does not declare: {', '.join(unknown)}")
        if self.claims is None:
            raise ZooError("a Protocol needs claims=: the function that checks the paper's statements")

    @property
    def arm_specs(self) -> tuple[Arm, ...]:
        """Every arm as an :class:`Arm`, method first, then baselines, ablations and references."""
        return tuple(_as_arm(a) for a in (self.method, *self.baselines, *self.ablations, *self.references))

    @property
    def arms(self) -> tuple[str, ...]:
        """Every arm's name, in role order."""
        return tuple(arm.name for arm in self.arm_specs)

    @property
    def method_name(self) -> str:
        return _as_arm(self.method).name

    def role(self, name: str) -> tuple[str, ...] | str:
        """The arm names of a role (``"method"`` gives one name)."""
        if name == "method":
            return self.method_name
        return tuple(_as_arm(a).name for a in getattr(self, name))

    def arm(self, name: str) -> Arm:
        """The declared arm ``name``; unknown names raise a one-line error listing the arms."""
        for spec in self.arm_specs:
            if spec.name == name:
                return spec
        raise ZooError(f"unknown arm {name!r}; this evaluation has: {', '.join(self.arms)}")

    def group(self, name: str) -> Shared | None:
        """The shared pass that measures arm ``name``, if any."""
        return next((group for group in self.shared if name in group.arms), None)

    def is_timed(self, name: str) -> bool:
        group = self.group(name)
        return group.timed if group is not None else self.arm(name).timed

    def _check_key(self, key: str) -> None:
        if key not in self.settings:
            valid = ", ".join(self.settings) or "none"
            raise ZooError(f"unknown setting {key!r}; valid keys: {valid} (see `zoo eval NAME --settings`)")

    def resolve(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The settings with ``overrides`` (already parsed values) applied; unknown keys raise."""
        resolved = {key: setting.default for key, setting in self.settings.items()}
        for key, value in (overrides or {}).items():
            self._check_key(key)
            self.settings[key].check(key, value)
            resolved[key] = value
        return resolved

    def parse_overrides(self, pairs: Sequence[str]) -> dict[str, Any]:
        """Parse ``KEY=VALUE`` strings from the command line."""
        parsed = {}
        for pair in pairs:
            key, sep, text = pair.partition("=")
            if not sep:
                raise ZooError(f"--set {pair}: expected KEY=VALUE")
            self._check_key(key)
            parsed[key] = self.settings[key].parse(key, text)
        return parsed

    def describe_settings(self) -> str:
        """The settings as lines ``key = default  help`` (``zoo eval NAME --settings``)."""
        if not self.settings:
            return "this evaluation has no settings"
        width = max(len(key) for key in self.settings)
        lines = []
        for key, setting in self.settings.items():
            choices = f" (one of: {', '.join(map(str, setting.choices))})" if setting.choices else ""
            lines.append(f"{key.ljust(width)} = {json.dumps(setting.default)}  {setting.help}{choices}")
        return "\n".join(lines)


def _as_arm(arm: str | Arm) -> Arm:
    return arm if isinstance(arm, Arm) else Arm(arm)
