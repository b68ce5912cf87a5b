"""``zoo eval``: the one evaluation harness every paper's claim runs through.

A paper's ``evaluate.py`` declares *what* is measured; this module owns *how*: seeds, arms, loading or
retraining an arm, settings overrides, aggregation over seeds, structured claims and the result schema.
A paper defines::

    PROTOCOL = Protocol(
        method="fedgr",                           # an arm: registered entries name theirs with `arm=`
        baselines=("fedavg", "fedprox"),
        ablations=("fedgr_no_ema",),              # arms without an entry train a base entry's recipe
        references=("reference_untrained",),      # needs no learning / none of the method
        settings={"noise": Setting("symmetric", "label-noise model", recipe_keys=("data.init_args.noise",))},
        tuning={"fedgr": Tuning("none", {}, 0, "the spec's constants")},
    )

    def measure(arm: str, run: Run) -> dict[str, float]:
        model = run.load(arm)                     # published weights, or a fit of the arm's recipe
        return {"accuracy": accuracy(model, run.settings["test_limit"])}

    def claims(result: dict) -> list[Claim]:
        return [beats(result, "accuracy", "fedgr", "reference_untrained", margin=0.1)]

and optionally ``score_pretrained(module, limit=None)`` (the headline metric of a loaded checkpoint, used by
``zoo demo`` and the golden tests), ``plot(result, axes)`` with ``PROTOCOL.panels`` axes (see
:func:`zoo._figures.card_figure`; a bar chart of the headline metrics is drawn otherwise) and ``prepare(runs)``
(called once with every seed's :class:`Run` before any arm is measured, e.g. to train the seeds' fits side by side).

The result schema (``zoo eval NAME --json``)::

    {"name", "zoo_version", "settings", "seeds", "arms", "per_seed", "claims", "extras", "timings"}

``arms[arm]`` holds the mean over seeds of every metric, ``<metric>_std`` (sample standard deviation,
``ddof=1``; 0.0 for one seed) and ``n_seeds``; ``per_seed[arm][seed]`` holds every run's metrics.
``settings`` holds the resolved settings plus ``method``, ``baselines``, ``ablations``, ``references``,
``tuning`` and ``overrides`` (the ``--set`` values).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from zoo._errors import ZooError
from zoo._registry import ModelEntry, _all_entries, get_entry

SCHEMA_KEYS = ("name", "zoo_version", "settings", "seeds", "arms", "per_seed", "claims", "extras", "timings")
DEFAULT_SEEDS = (0, 1, 2)
MIN_SEEDS = 3  # headline arms of a published card
ROLES = ("method", "baselines", "ablations", "references")


# ------------------------------------------------------------------------------------------ declarations


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
class Protocol:
    """A paper's evaluation: its arms by role, settings, seeds and tuning record.

    Args:
        method: The arm of the paper's method.
        baselines: The paper's (tuned) baselines.
        ablations: One arm per main component of the method, with that component removed.
        references: Arms that need no learning or use none of the method (``reference_<what>``).
        settings: The overridable settings by key.
        tuning: How each arm's hyperparameters were chosen; arms not listed used their recipe's values.
        seeds: Default seeds (at least three).
        seed_args: LightningCLI keys that receive the seed when an arm is trained from its recipe.
        published_seed: The seed whose run the published checkpoints are.
        headline: The metrics of the default figure, first one first.
        panels: Number of axes ``plot(result, axes)`` draws on.
    """

    method: str
    baselines: tuple[str, ...] = ()
    ablations: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    settings: Mapping[str, Setting] = field(default_factory=dict)
    tuning: Mapping[str, Tuning] = field(default_factory=dict)
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    seed_args: tuple[str, ...] = ("seed_everything",)
    published_seed: int = 0
    headline: tuple[str, ...] = ()
    panels: int = 1

    @property
    def arms(self) -> tuple[str, ...]:
        return (self.method, *self.baselines, *self.ablations, *self.references)

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


@dataclass(frozen=True)
class Claim:
    """One checked statement of a paper's claim.

    Args:
        id: Short stable identifier, e.g. ``"beats_reference_zero_field"``.
        text: The statement in words, with the threshold.
        value: The measured value.
        threshold: The value it is compared with.
        holds: Whether the statement holds.
        versus: The arm the method is compared with, if any (a reference claim names a reference arm).
    """

    id: str
    text: str
    value: float
    threshold: float
    holds: bool
    versus: str | None = None

    @classmethod
    def at_least(cls, id: str, text: str, value: float, threshold: float, versus: str | None = None) -> Claim:
        return cls(id, text, _round(value), threshold, reaches(value, threshold), versus)

    @classmethod
    def at_most(cls, id: str, text: str, value: float, threshold: float, versus: str | None = None) -> Claim:
        return cls(id, text, _round(value), threshold, reaches(-value, -threshold), versus)


def reaches(value: float, threshold: float) -> bool:
    """``value >= threshold`` up to float rounding (1e-12 relative), so a gap of exactly the threshold holds
    (0.35 - 0.25 >= 0.10) while thresholds written 1e-9 off to mean a strict inequality stay strict. Every claim
    compares through it; so should a paper's own gate.

    Args:
        value: The measured value.
        threshold: The least value that reaches it.
    """
    return bool(value >= threshold - 1e-12 * max(1.0, abs(threshold)))


def beats(
    result: Mapping[str, Any],
    metric: str,
    arm: str,
    other: str,
    margin: float = 0.0,
    higher_is_better: bool = True,
    relative: bool = False,
) -> Claim:
    """Claim that ``arm`` beats ``other`` on ``metric`` by at least ``margin``, by more than the seed spread.

    The value is the mean paired gain over the seeds both arms ran (``other - arm`` when lower is better;
    divided by ``|other|`` when ``relative``). The claim holds when the gain is at least ``margin`` and also
    larger than the sample standard deviation of the per-seed gains: a gap inside the seed spread is no result.
    """
    gains = _paired_gains(result, metric, arm, other, higher_is_better, relative)
    mean = sum(gains) / len(gains)
    spread = _std(gains)
    sign = "" if higher_is_better else " (lower is better)"
    unit = " relative" if relative else ""
    text = (
        f"{arm} beats {other} on {metric}{sign} by >= {margin:g}{unit} and by more than the seed spread "
        f"({spread:.3g} over {len(gains)} seeds)"
    )
    holds = reaches(mean, margin) and (len(gains) < 2 or mean > spread)
    return Claim(f"{arm}_beats_{other}_{metric}", text, _round(mean), margin, bool(holds), other)


def _paired_gains(result, metric, arm, other, higher_is_better, relative) -> list[float]:
    per_seed = result["per_seed"]
    seeds = [s for s in per_seed.get(arm, {}) if s in per_seed.get(other, {})]
    if not seeds:
        raise ZooError(f"claim on {metric}: arms {arm!r} and {other!r} share no seed")
    gains = []
    for seed in seeds:
        a, b = per_seed[arm][seed][metric], per_seed[other][seed][metric]
        gain = a - b if higher_is_better else b - a
        gains.append(gain / abs(b) if relative and b else gain)
    return gains


# ----------------------------------------------------------------------------------------------- a run


class Run:
    """What ``measure(arm, run)`` sees for one seed: the settings, the seed, and ways to get an arm's model.

    Args:
        paper: The registry entries of the paper's evaluation, by arm.
        protocol: The paper's protocol.
        seed: This run's seed.
        settings: The resolved settings.
        retrain: Train every arm instead of loading published weights.
        weights: A local exported folder that replaces the method's published weights.
        fits: The harness-wide cache of trained models (shared across seeds and arms).
    """

    def __init__(
        self,
        paper: Mapping[str, ModelEntry],
        protocol: Protocol,
        seed: int,
        settings: Mapping[str, Any],
        retrain: bool = False,
        weights: str | Path | None = None,
        fits: dict | None = None,
    ) -> None:
        self.paper = paper
        self.protocol = protocol
        self.seed = seed
        self.settings = dict(settings)
        self.retrain = retrain
        self.weights = weights
        self.cache: dict[str, Any] = {}  # per seed: lets several arms share one expensive computation
        self.extras: dict[str, Any] = {}
        self._fits = fits if fits is not None else {}

    def entry(self, arm: str) -> ModelEntry:
        """The registered entry whose weights are ``arm``."""
        if arm not in self.paper:
            raise ZooError(f"arm {arm!r} has no registered entry; registered arms: {', '.join(self.paper)}")
        return self.paper[arm]

    def recipe_overrides(self) -> list[str]:
        """LightningCLI arguments for the settings that differ from the protocol's defaults."""
        args = []
        for key, setting in self.protocol.settings.items():
            if self.settings[key] != setting.default:
                value = self.settings[key]
                text = json.dumps(list(value)) if isinstance(value, list | tuple) else str(value)
                args += [f"--{recipe_key}={text}" for recipe_key in setting.recipe_keys]
        return args

    def uses_published(self, arm: str, overrides: Sequence[str] = ()) -> bool:
        """Whether ``load(arm)`` returns the published weights (or ``--weights``) rather than training."""
        if arm == self.protocol.method and self.weights is not None:
            return True
        entry = self.paper.get(arm)
        return bool(
            entry is not None
            and entry.pretrained_cfg.has_weights
            and not self.retrain
            and not overrides
            and not self.recipe_overrides()
            and self.seed == self.protocol.published_seed
        )

    def load(self, arm: str, overrides: Sequence[str] = (), base: str | None = None):
        """The trained model of ``arm`` for this seed.

        The published checkpoint when it is this seed's run (seed ``published_seed``, default settings, no
        ``--retrain``); for the method, the ``--weights`` folder when given; otherwise a fit of the recipe.

        Args:
            arm: The arm.
            overrides: LightningCLI arguments applied on top of the recipe (an ablation's switch).
            base: The arm whose entry's recipe is trained, for an arm without an entry of its own.
        """
        import zoo

        if arm == self.protocol.method and self.weights is not None:
            return zoo.load_folder(self.weights).eval()
        if base is None and self.uses_published(arm, overrides):
            return zoo.load(self.entry(arm).name, pretrained=True)
        entry = self.entry(base or arm)
        if not entry.pretrained_cfg.recipe:
            raise ZooError(f"{entry.name} has no recipe to train arm {arm!r} from")
        args = [*self.recipe_overrides(), *overrides]
        return fit_recipe(entry.pretrained_cfg.recipe, self.seed, args, self.protocol.seed_args, self._fits)

    def provide(self, arm: str, module, overrides: Sequence[str] = (), base: str | None = None) -> None:
        """Give this seed a trained model of ``arm`` (one a worker process trained, say): a later
        ``load(arm, overrides, base)`` returns it instead of fitting the recipe.

        Args:
            arm: The arm.
            module: Its trained model, in eval mode.
            overrides: The LightningCLI arguments ``load`` would be called with.
            base: The arm whose entry's recipe ``load`` would train.
        """
        recipe = self.entry(base or arm).pretrained_cfg.recipe
        self._fits[_fit_key(recipe, self.seed, [*self.recipe_overrides(), *overrides])] = module

    def untrained(self, arm: str, **init_args):
        """The architecture of ``arm``'s entry with fresh weights seeded by this run's seed (a reference arm)."""
        import torch

        import zoo

        torch.manual_seed(self.seed)
        return zoo.load(self.entry(arm).name, **init_args).eval()


def piece_file(env: str, stem: str, key: Callable[[], Any]) -> Path | None:
    """Where a resumable evaluation keeps one piece's result, or None when the variable ``env`` names no folder.

    Papers whose evaluation can run in pieces (``benchmarks/eval_pieces.py``) store each (arm, seed) result as
    JSON in that folder, so a later run with the same folder reads it instead of training again.

    Args:
        env: Environment variable naming the cache folder (e.g. ``ZOO_DWP_EVAL_CACHE``).
        stem: Readable start of the file name, e.g. ``"<arm>-seed<seed>"``.
        key: Returns everything that decides the result (settings, recipes, pins); called only when caching is on.
    """
    folder = os.environ.get(env)
    return piece_path(folder, stem, key()) if folder else None


def piece_path(folder: str | Path, stem: str, key: Any) -> Path:
    """``<folder>/<stem>-<16 hex of the key's sha256>.json``: the file of one resumable piece (see :func:`piece_file`).

    Args:
        folder: The cache folder.
        stem: Readable start of the file name.
        key: Everything that decides the result, as JSON-able data.
    """
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return Path(folder) / f"{stem}-{digest}.json"


def cached_piece(path: Path | None, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The record stored at ``path`` (a :func:`piece_path`), else ``compute()`` stored there; no cache if None.

    The record is any JSON-able dict: an arm's scores, or scores with what the arm adds to ``run.extras``
    (``{"scores": ..., "extras": ...}``), which the caller puts back into ``run.extras`` either way.

    Args:
        path: The piece's JSON file, or None when the evaluation runs without a cache.
        compute: Measures the piece (called only when nothing is stored).
    """
    if path is not None and path.is_file():
        return json.loads(path.read_text())
    scores = compute()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(scores))
    return scores


def fit_recipe(recipe: str, seed: int, overrides: Sequence[str] = (), seed_args=("seed_everything",), cache=None):
    """Train the recipe's model with ``seed`` and ``overrides`` through the zoo's LightningCLI.

    Nothing of the recipe's settings is copied here: the recipe is the single source, and the harness only
    sets the seed keys, silences the logger and progress bar, and writes into a temporary folder.

    Args:
        recipe: The recipe: a path, or a packaged recipe's name such as ``recipes/fedgr/fedavg.yaml``.
        seed: The seed, given to every key of ``seed_args``.
        overrides: Further LightningCLI arguments (``--model.init_args.x=1``).
        seed_args: LightningCLI keys that receive the seed.
        cache: Dict that memoises fits by (recipe, seed, overrides).

    Returns:
        The trained LightningModule in eval mode (its datamodule is ``module.trainer.datamodule``).
    """
    import logging

    from zoo._lightning_cli import ZooCLI
    from zoo._recipes import resolve_recipe

    key = _fit_key(recipe, seed, overrides)
    if cache is not None and key in cache:
        return cache[key]
    path = resolve_recipe(recipe)  # the checkout's recipes/ or the wheel's zoo/recipes; RecipeError if neither
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="zoo-eval-") as folder:
        args = ["-c", path, *(f"--{k}={seed}" for k in seed_args)]
        args += [
            "--trainer.logger=false",
            "--trainer.enable_progress_bar=false",
            "--trainer.enable_model_summary=false",
            f"--trainer.default_root_dir={folder}",
            *overrides,
        ]
        saved_argv, sys.argv = sys.argv, sys.argv[:1]  # LightningCLI warns when the host's argv is non-empty
        try:
            cli = ZooCLI(args=args, run=False)
        finally:
            sys.argv = saved_argv
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    module = cli.model.eval()
    if cache is not None:
        cache[key] = module
    return module


def _fit_key(recipe: str, seed: int, overrides: Sequence[str]) -> tuple:
    return (recipe, seed, tuple(overrides))


# ------------------------------------------------------------------------------------------ the harness


def paper_module(name: str):
    """The ``evaluate`` module of an entry's paper (it defines ``PROTOCOL``, ``measure`` and ``claims``; optionally
    ``prepare(runs)``, called once with every seed's :class:`Run` before any arm is measured)."""
    import importlib

    entry = get_entry(name)
    if not entry.evaluate:
        raise ZooError(f"{entry.name} defines no evaluation; `zoo eval` needs `evaluate=` in its registration")
    entry.check_requirements()
    return importlib.import_module(entry.evaluate.partition(":")[0])


def paper_arms(name: str) -> dict[str, ModelEntry]:
    """The registered entries that share ``name``'s evaluation, by the arm their weights are."""
    evaluator = get_entry(name).evaluate
    return {e.eval_arm: e for e in _all_entries() if e.evaluate == evaluator}


def describe_settings(name: str) -> str:
    """The settings of an entry's evaluation as lines ``key = default  help`` (``zoo eval NAME --settings``)."""
    protocol = paper_module(name).PROTOCOL
    if not protocol.settings:
        return f"{get_entry(name).name}: this evaluation has no settings"
    width = max(len(key) for key in protocol.settings)
    lines = []
    for key, setting in protocol.settings.items():
        choices = f" (one of: {', '.join(map(str, setting.choices))})" if setting.choices else ""
        lines.append(f"{key.ljust(width)} = {json.dumps(setting.default)}  {setting.help}{choices}")
    return "\n".join(lines)


def run_eval(
    name: str,
    seeds: Sequence[int] | None = None,
    retrain: bool = False,
    overrides: Mapping[str, Any] | Sequence[str] | None = None,
    weights: str | Path | None = None,
    arms: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Run an entry's evaluation and return the validated result.

    Args:
        name: Registry name (any entry of the paper).
        seeds: Seeds to run (default: the protocol's, at least three).
        retrain: Retrain every arm from scratch instead of using published weights.
        overrides: Settings overrides, parsed (``{"noise": "pair"}``) or as ``KEY=VALUE`` strings.
        weights: An exported folder (config.json + model.safetensors) scored in place of the method's weights.
        arms: Only these arms (default: all of the protocol's).
    """
    from zoo import __version__
    from zoo.progress import track

    module = paper_module(name)
    protocol: Protocol = module.PROTOCOL
    if overrides is not None and not isinstance(overrides, Mapping):
        overrides = protocol.parse_overrides(list(overrides))
    settings = protocol.resolve(overrides)
    seeds = list(protocol.seeds if seeds is None else seeds)
    if not seeds:
        raise ZooError("give at least one seed, e.g. --seeds 0 1 2")
    if weights is not None and not (Path(weights) / "config.json").is_file():
        raise ZooError(
            f"--weights {weights}: no config.json there; pass a folder written by `zoo fit` (ExportPretrained)"
        )
    chosen = list(protocol.arms if arms is None else arms)
    unknown = [arm for arm in chosen if arm not in protocol.arms]
    if unknown:
        raise ZooError(f"unknown arm(s) {', '.join(unknown)}; this evaluation has: {', '.join(protocol.arms)}")
    entries = paper_arms(name)
    per_seed: dict[str, dict[str, dict[str, float]]] = {arm: {} for arm in chosen}
    extras: dict[str, Any] = {}
    timings: dict[str, float] = {}
    fits: dict = {}
    started = time.perf_counter()
    runs = [Run(entries, protocol, seed, settings, retrain=retrain, weights=weights, fits=fits) for seed in seeds]
    prepare = getattr(module, "prepare", None)
    if prepare is not None:
        prepare(runs)  # optional hook: work shared by the seeds, e.g. training their fits side by side
    for seed, run in zip(seeds, runs, strict=True):
        for arm in track(chosen, desc=f"{name} seed {seed}", total=len(chosen)):
            arm_started = time.perf_counter()
            scores = module.measure(arm, run)
            per_seed[arm][str(seed)] = {key: _round(value) for key, value in scores.items()}
            timings[f"{arm}_s"] = round(timings.get(f"{arm}_s", 0.0) + time.perf_counter() - arm_started, 2)
        if run.extras:
            extras[str(seed)] = run.extras
    tuning = {arm: asdict(protocol.tuning.get(arm, Tuning(note="the recipe's values"))) for arm in protocol.arms}
    result = {
        "name": get_entry(name).name,
        "zoo_version": __version__,
        "settings": {
            **settings,
            **{role: _role(protocol, role) for role in ROLES},
            "tuning": tuning,
            "overrides": dict(overrides or {}),
            "source": _source(retrain, weights, protocol),
        },
        "seeds": seeds,
        "arms": {arm: summarise(runs) for arm, runs in per_seed.items() if runs},
        "per_seed": per_seed,
        "claims": [],
        "extras": extras,
        "timings": {},
    }
    partial = set(chosen) != set(protocol.arms)
    try:
        result["claims"] = [asdict(claim) for claim in module.claims(result)]
    except (KeyError, ZooError):
        if not partial:
            raise
        # a subset of arms (`arms=`) cannot check claims about the arms left out
    result["timings"] = {**timings, "total_s": round(time.perf_counter() - started, 2)}
    validate_result(result, require_seeds=False, complete=not partial)
    return result


def _role(protocol: Protocol, role: str):
    value = getattr(protocol, role)
    return value if role == "method" else list(value)


def _source(retrain: bool, weights, protocol: Protocol) -> str:
    if weights is not None:
        return f"method scored from the local folder {weights}"
    if retrain:
        return "every arm retrained from its recipe"
    return f"published checkpoints for seed {protocol.published_seed} with default settings; other runs trained"


def summarise(runs: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Mean over seeds of every metric, ``<metric>_std`` (sample std, ddof=1; 0.0 for one seed), ``n_seeds``."""
    keys: list[str] = []
    for scores in runs.values():
        keys += [k for k in scores if k not in keys]
    summary: dict[str, float] = {}
    for key in keys:
        values = [scores[key] for scores in runs.values() if key in scores]
        summary[key] = _round(sum(values) / len(values))
        summary[f"{key}_std"] = _round(_std(values))
    summary["n_seeds"] = len(runs)
    return summary


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _round(value: float) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise ZooError(f"a metric is {value}; every metric must be a finite number")
    return round(value, 6)


# ---------------------------------------------------------------------------------------------- checks


def validate_result(result: Mapping[str, Any], require_seeds: bool = True, complete: bool = True) -> None:
    """Check the eval schema: keys, finite arms, claims, a reference arm, the tuning record, seeds.

    Args:
        result: The eval result.
        require_seeds: Also require ``n_seeds >= 3`` for the method, baselines and references (a card).
        complete: Require the reference arm and the claims (False for a run of a subset of the arms).

    Raises:
        ZooError: Naming the first problem.
    """
    missing = [key for key in SCHEMA_KEYS if key not in result]
    if missing or set(result) - set(SCHEMA_KEYS):
        raise ZooError(f"eval result keys are {sorted(result)}, expected {list(SCHEMA_KEYS)}")
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
    if not complete:
        json.dumps(result, allow_nan=False)
        return
    references = [arm for arm in settings.get("references", []) if arm in arms]
    if not references:
        raise ZooError(
            "the evaluation lists no reference arm in settings.references: add an arm that needs no learning "
            "(zero, prior, untrained, label-free) and a claim that the method beats it"
        )
    claims = result["claims"]
    if not isinstance(claims, list) or not claims:
        raise ZooError("the evaluation has no claims: `claims(result)` must return the paper's checked statements")
    for claim in claims:
        if set(claim) != {"id", "text", "value", "threshold", "holds", "versus"}:
            raise ZooError(f"claim {claim.get('id')!r} must have id, text, value, threshold, holds, versus")
    if not any(claim["versus"] in references for claim in claims):
        raise ZooError(f"no claim compares the method with a reference arm ({', '.join(references)})")
    if require_seeds:
        for role in ("method", "baselines", "references"):
            names = [settings[role]] if role == "method" else settings.get(role, [])
            for arm in names:
                if arm in arms and arms[arm].get("n_seeds", 0) < MIN_SEEDS:
                    raise ZooError(f"arm {arm!r} ran {arms[arm].get('n_seeds', 0)} seed(s); a card needs {MIN_SEEDS}")
    json.dumps(result, allow_nan=False)


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


def claims_table(result: Mapping[str, Any]) -> str:
    """The claims as a fixed-width table (``zoo eval`` prints it)."""
    rows = [("claim", "value", "threshold", "holds")]
    for claim in result["claims"]:
        rows.append(
            (claim["id"], f"{claim['value']:.4g}", f"{claim['threshold']:.4g}", "yes" if claim["holds"] else "NO")
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    seeds = len(result["seeds"])
    if seeds < MIN_SEEDS:
        lines.append(f"({seeds} seed{'s' * (seeds != 1)}: fewer than {MIN_SEEDS}, so these are not results)")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------- cards, scoring


def write_cards(result: dict[str, Any]) -> list[Path]:
    """Store an eval result as metrics.json of every entry that shares the evaluation, and re-render their cards."""
    from zoo._cards import write_card
    from zoo._registry import clear_metrics_cache

    validate_result(result)
    folders = []
    for arm, entry in paper_arms(result["name"]).items():
        if arm not in result["arms"]:
            continue
        folder = entry.mirror_dir
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "metrics.json").write_text(json.dumps(result, indent=2, allow_nan=False) + "\n")
        folders.append(folder)
    clear_metrics_cache()
    for folder in folders:
        write_card(folder.name)
    return folders


def score_pretrained(name: str, limit: int | None = None) -> dict[str, float]:
    """Load an entry's published weights and score them with its paper's ``score_pretrained``.

    Args:
        name: Registry name.
        limit: Score only the first ``limit`` test items (a small slice), if the paper supports it.
    """
    import zoo

    entry = get_entry(name)
    scorer: Callable = getattr(paper_module(name), "score_pretrained", None)
    if scorer is None:
        raise ZooError(f"{entry.name}'s evaluation defines no score_pretrained")
    return scorer(zoo.load(entry.name, pretrained=True), limit=limit)
