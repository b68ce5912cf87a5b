"""The model registry: named entries ``paper[.tag]`` with their pretrained configs (timm-shaped).

Each paper package ``zoo/<paper>/__init__.py`` calls :func:`register_model` for its entries and
imports nothing else, so consulting the registry stays cheap. The entry names its LightningModule
by a ``"module.path:ClassName"`` string; that module (and the paper's optional dependencies) is
imported only when the entry is built.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import functools
import importlib
import importlib.util
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zoo._errors import MissingExtraError, UnknownModelError, ZooError, ZooTypeError
from zoo._recipes import recipes_root

#: The papers of the zoo, in paper order; also the package names under ``zoo/``.
PAPER_NAMES = (
    "prefetch_rag",
    "pbsac",
    "fedgr",
    "promise",
    "protovar",
    "repa_p",
    "renyi_neglabel_ood",
    "boba",
    "fair_lin_bandit",
    "deepha",
    "dwp",
    "lavid",
    "olaf_world",
    "visual_persuasion",
    "resettable_sketch",
    "aporia",
    "specexit",
    "sae_transition_ood",
    "gemq",
)

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"


@dataclass(frozen=True)
class PaperRef:
    """The paper an entry implements.

    Args:
        title: Paper title.
        arxiv: arXiv identifier, e.g. ``"2412.00452"``, or None for a paper without one.
        authors: Author names in paper order.
        venue: Publication venue.
        year: Publication year.
        code: URL of the authors' code, if public.
        url: Where to read the paper when it has no arXiv id (OpenReview, proceedings).
    """

    title: str
    arxiv: str | None = None
    authors: tuple[str, ...] = ()
    venue: str = "ICML 2026"
    year: int = 2026
    code: str | None = None
    url: str | None = None

    @property
    def link(self) -> str | None:
        """The paper's URL: arXiv when it has an id, else ``url``."""
        return f"https://arxiv.org/abs/{self.arxiv}" if self.arxiv else self.url

    @property
    def label(self) -> str:
        """How cards and tables cite it: ``arXiv:ID`` or the venue."""
        return f"arXiv:{self.arxiv}" if self.arxiv else self.venue

    def bibtex(self, key: str) -> str:
        """A BibTeX ``@inproceedings`` entry for the paper, keyed ``key``."""
        authors = " and ".join(self.authors) or "Unknown"
        fields = [f"title = {{{self.title}}}", f"author = {{{authors}}}", f"booktitle = {{{self.venue}}}"]
        fields.append(f"year = {{{self.year}}}")
        if self.arxiv:
            fields += [f"eprint = {{{self.arxiv}}}", "archivePrefix = {arXiv}"]
        elif self.url:
            fields.append(f"url = {{{self.url}}}")
        return f"@inproceedings{{{key},\n  " + ",\n  ".join(fields) + "\n}"


@dataclass(frozen=True)
class PretrainedCfg:
    """What an entry publishes and how it was made.

    Args:
        paper: The paper.
        hf_hub_id: Hub repo ``org/name`` holding the files, or None for an entry with no Hub repo.
        revision: Hub revision the files are pinned to (a tag made by ``zoo publish`` or a commit).
        sha256: sha256 of every published file, by file name. An entry with no ``model.safetensors``
            here has no learned weights.
        license: SPDX-style licence id of the weights (Hub card ``license``).
        recipe: Path of the recipe that produced the weights, relative to the repository root.
        task: Hub task id for the card's model-index, e.g. ``"image-classification"``.
        datasets: Names of the data sets the weights were trained or evaluated on.
        headline: The metric ``zoo list`` shows (a key of the entry's arm in its card's metrics.json).
        num_params: Number of parameters of the module (shown by ``zoo list`` without building it).
        notes: Free text: deviations, caveats.
        input_format: What the model takes, in plain words (``"uint8 grey images [N, 28, 28]"``).
        input_size: Shape of one input, timm's ``(C, H, W)`` for images.
        value_range: Range raw inputs are scaled to before ``mean``/``std`` (timm/HF ``rescale``).
        mean: Per-channel mean subtracted after scaling (None: no normalisation outside the model).
        std: Per-channel standard deviation divided by after scaling.
        label_names: Class names by class id (HF ``id2label``).
        base_model: Registry name of the entry these weights derive from (a quantized entry's float model).
        base_model_relation: How they derive (``"quantized"``, ``"finetune"``, ``"adapter"``, ``"merge"``).
    """

    paper: PaperRef
    hf_hub_id: str | None = None
    revision: str | None = None
    sha256: Mapping[str, str] = field(default_factory=dict)
    license: str = "apache-2.0"
    recipe: str | None = None
    task: str = "other"
    datasets: tuple[str, ...] = ()
    headline: str | None = None
    num_params: int | None = None
    notes: str = ""
    input_format: str | None = None
    input_size: tuple[int, ...] | None = None
    value_range: tuple[float, float] | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    label_names: tuple[str, ...] | None = None
    base_model: str | None = None
    base_model_relation: str | None = None

    @property
    def has_weights(self) -> bool:
        return WEIGHTS_FILE in self.sha256

    @property
    def preprocess(self) -> dict[str, Any]:
        """The inference fields as ``config.json["pretrained_cfg"]`` stores them (None values left out)."""
        fields = ("input_format", "input_size", "value_range", "mean", "std", "label_names")
        return {k: list(v) if isinstance(v, tuple) else v for k in fields if (v := getattr(self, k)) is not None}


@dataclass(frozen=True)
class ModelEntry:
    """A registered model.

    Args:
        name: Full name ``paper.tag``.
        module: The LightningModule as ``"package.module:ClassName"``.
        pretrained_cfg: Publication record.
        default: Whether the bare paper name resolves to this entry.
        description: One line for ``zoo list`` / ``zoo info``.
        model_args: Init arguments used by ``zoo.load(name, pretrained=False)``.
        requires: Import names of optional dependencies the entry needs.
        extra: The pip extra of ``icml26-zoo`` that installs them.
        evaluate: The entry's evaluation as ``"module:ATTR"``, a :class:`zoo.eval.Protocol` (default
            ``"zoo.<paper>.evaluate:PROTOCOL"``); the entries that share it are the arms of one ``zoo eval``.
        arm: The arm of the evaluation that this entry's weights are (default: the paper name).
        smoke: LightningCLI overrides that shrink the recipe for a ``fast_dev_run`` test.
    """

    name: str
    module: str
    pretrained_cfg: PretrainedCfg
    default: bool = False
    description: str = ""
    model_args: Mapping[str, Any] = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    extra: str | None = None
    evaluate: str | None = None
    arm: str | None = None
    smoke: tuple[str, ...] = ()

    @property
    def paper(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def tag(self) -> str:
        return self.name.split(".", 1)[1]

    @property
    def eval_arm(self) -> str:
        return self.arm or self.paper

    @property
    def metrics(self) -> dict[str, float]:
        """This entry's arm in ``zoo eval``'s result stored in ``hub_cards/<name>/metrics.json`` (empty if none)."""
        return dict(_card_metrics(str(self.mirror_dir / "metrics.json")).get(self.eval_arm, {}))

    @property
    def mirror_dir(self) -> Path:
        """The offline mirror ``hub_cards/<name>`` (inside the wheel, or at the repository root)."""
        return hub_cards_root() / self.name

    def check_requirements(self) -> None:
        """Raise :class:`MissingExtraError` naming the pip command if an optional dependency is missing."""
        for import_name in self.requires:
            if importlib.util.find_spec(import_name) is None:
                extra = f"icml26-zoo[{self.extra}]" if self.extra else import_name
                raise MissingExtraError(
                    f"{self.name} needs the optional dependency '{import_name}': pip install '{extra}'"
                )

    def module_class(self) -> type:
        """Import and return the LightningModule class (checks the optional dependencies first)."""
        self.check_requirements()
        return import_object(self.module)


_ENTRY_FIELDS = {f.name for f in dataclasses.fields(ModelEntry)} - {"name", "pretrained_cfg"}
_CFG_FIELDS = {f.name for f in dataclasses.fields(PretrainedCfg)} - {"paper", "sha256"}


def import_object(path: str) -> Any:
    """Import ``"package.module:attr"`` (or ``"package.module.attr"``) and return the attribute."""
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module_name), attr)


@functools.cache
def _card_metrics(path: str) -> dict[str, dict[str, float]]:
    if not os.path.isfile(path):
        return {}
    with open(path) as handle:
        return json.load(handle).get("arms", {})


def clear_metrics_cache() -> None:
    """Forget the metrics read from the cards (after ``zoo eval --card`` rewrote them)."""
    _card_metrics.cache_clear()


def hub_cards_root() -> Path:
    """Folder holding the cards and offline mirrors ``<name>/``: ``$ZOO_MIRROR`` if set (a folder that
    ``zoo download NAME --to DIR`` filled), else ``hub_cards/`` in a checkout, else ``zoo/hub_cards`` in a wheel
    (the cards' text only: a wheel ships no weights)."""
    if os.environ.get("ZOO_MIRROR"):
        return Path(os.environ["ZOO_MIRROR"]).expanduser()
    package_dir = Path(__file__).resolve().parent
    for candidate in (package_dir.parent / "hub_cards", package_dir / "hub_cards"):
        if candidate.is_dir():
            return candidate
    return package_dir.parent / "hub_cards"


_ENTRIES: dict[str, ModelEntry] = {}
_DISCOVERED = False
_NOT_PAPERS = {"common", "quant", "hub_cards"}


def register_model(name: str, module: str, pretrained_cfg: PretrainedCfg, **kwargs: Any) -> ModelEntry:
    """Register an entry; called from a paper package's ``__init__``.

    Args:
        name: ``paper.tag``, where ``paper`` is the package name under ``zoo/``.
        module: The LightningModule as ``"package.module:ClassName"``.
        pretrained_cfg: Publication record.
        **kwargs: Further :class:`ModelEntry` fields.

    Raises:
        ZooError: On a malformed or duplicate name.
    """
    paper, dot, tag = name.partition(".")
    if not (dot and paper and tag) or not all(part.isidentifier() for part in (paper, tag)):
        raise ZooError(f"registry name {name!r} is not of the form 'paper.tag' (identifiers)")
    if name in _ENTRIES:
        raise ZooError(f"{name!r} is registered twice; each registry name must be unique")
    for key in ("requires", "smoke"):
        if key in kwargs:
            kwargs[key] = tuple(kwargs[key])
    kwargs.setdefault("evaluate", _default_evaluate(paper))
    entry = ModelEntry(name=name, module=module, pretrained_cfg=_derive_cfg(name, pretrained_cfg), **kwargs)
    _ENTRIES[name] = entry
    return entry


class Entry:
    """One row of a paper's ``ENTRIES`` table: only what differs from the paper's shared fields and the zoo's rules.

    Takes any field of :class:`ModelEntry` or :class:`PretrainedCfg` by name (``arm``, ``default``, ``description``,
    ``model_args``, ``notes``, ``num_params``, ``input_format``...), except the ones :func:`register_paper` derives:
    the name, the paper, the sha256 pins (``zoo/<paper>/pins.json``), and the Hub id, revision, recipe and
    evaluation that follow the zoo's rules unless given.

    Example:
        >>> ENTRIES = {"fedavg": Entry(arm="fedavg", description="FedAvg baseline", model_args={"method": "fedavg"})}
    """

    def __init__(self, **fields: Any) -> None:
        unknown = sorted(set(fields) - _ENTRY_FIELDS - _CFG_FIELDS)
        if unknown:
            valid = ", ".join(sorted(_ENTRY_FIELDS | _CFG_FIELDS))
            raise ZooError(f"Entry does not take {', '.join(unknown)}; its fields are: {valid}")
        self.fields = fields

    def __repr__(self) -> str:
        return f"Entry({', '.join(f'{k}={v!r}' for k, v in self.fields.items())})"


def register_paper(paper: str, ref: PaperRef, entries: Mapping[str, Entry], **shared: Any) -> list[ModelEntry]:
    """Register a paper's entries from its table; called once from ``zoo/<paper>/__init__.py``.

    Args:
        paper: The package name under ``zoo/`` (the first part of every entry's name).
        ref: The paper.
        entries: ``{tag: Entry(...)}``; the entry ``paper.tag`` takes ``shared`` overridden by its own fields.
        **shared: Fields every entry shares (the LightningModule ``module``, ``task``, ``datasets``, ``extra``...).

    Returns:
        The registered entries.

    Raises:
        ZooError: On an unknown field, a pin of an entry the table lacks, or an entry without ``module``.
    """
    from zoo._pins import pins_path, read_pins

    pins = read_pins(paper)
    names = {f"{paper}.{tag}" for tag in entries}
    stray = sorted(set(pins) - names)
    if stray:
        raise ZooError(f"{pins_path(paper)} pins {', '.join(stray)}, which {paper}'s ENTRIES lack: remove those pins")
    registered = []
    for tag, entry in entries.items():
        name = f"{paper}.{tag}"
        fields = {**Entry(**shared).fields, **entry.fields}
        if "module" not in fields:
            raise ZooError(f"{name} names no LightningModule: give module='zoo.{paper}.module:Class'")
        cfg = {k: v for k, v in fields.items() if k in _CFG_FIELDS}
        model = {k: v for k, v in fields.items() if k in _ENTRY_FIELDS}
        cfg_record = PretrainedCfg(paper=ref, sha256=pins.get(name, {}), **cfg)
        registered.append(register_model(name, pretrained_cfg=cfg_record, **model))
    return registered


def _derive_cfg(name: str, cfg: PretrainedCfg) -> PretrainedCfg:
    """Fill the fields that follow the zoo's rules, as timm's ``generate_default_cfgs`` does: the Hub id
    ``icml26-zoo/<name with dashes>``, revision ``v1`` and the recipe ``recipes/<paper>/<tag>.yaml`` when
    that file exists. An entry states only what differs."""
    paper, _, tag = name.partition(".")
    derived: dict[str, Any] = {}
    if cfg.hf_hub_id is None:
        derived["hf_hub_id"] = "icml26-zoo/" + name.replace(".", "-").replace("_", "-")
    if cfg.revision is None:
        derived["revision"] = "v1"
    if cfg.recipe is None and (recipes_root() / paper / f"{tag}.yaml").is_file():
        derived["recipe"] = f"recipes/{paper}/{tag}.yaml"
    return dataclasses.replace(cfg, **derived) if derived else cfg


def _default_evaluate(paper: str) -> str | None:
    """``zoo.<paper>.evaluate:PROTOCOL`` when the paper has that module."""
    exists = (Path(__file__).resolve().parent / paper / "evaluate.py").is_file()
    return f"zoo.{paper}.evaluate:PROTOCOL" if exists else None


def unregister_model(name: str) -> None:
    """Remove an entry (for tests that register temporary entries)."""
    _ENTRIES.pop(name, None)


def _discover() -> None:
    """Import every paper package's ``__init__`` once, so that their entries are registered."""
    global _DISCOVERED
    if _DISCOVERED:
        return
    _DISCOVERED = True
    root = Path(__file__).resolve().parent
    names = {path.parent.name for path in root.glob("*/__init__.py")}
    for package in sorted(names - _NOT_PAPERS, key=_paper_order):
        if not package.startswith("_"):
            importlib.import_module(f"zoo.{package}")


def _paper_order(package: str) -> tuple[int, str]:
    return (PAPER_NAMES.index(package) if package in PAPER_NAMES else len(PAPER_NAMES), package)


def _all_entries() -> list[ModelEntry]:
    _discover()
    return sorted(_ENTRIES.values(), key=lambda e: _paper_order(e.paper))


def resolve_name(name: str) -> str:
    """The full ``paper.tag`` name for ``name`` (a bare paper name resolves to its default tag)."""
    if not isinstance(name, str):
        raise ZooTypeError(
            f"a model name is a string such as 'fedgr' or 'fedgr.fashion_mnist', not {type(name).__name__} "
            f"{name!r}; see zoo.list_models()"
        )
    _discover()
    if name in _ENTRIES:
        return name
    tags = [e for e in _ENTRIES.values() if e.paper == name]
    defaults = [e for e in tags if e.default] or (tags if len(tags) == 1 else [])
    if len(defaults) == 1:
        return defaults[0].name
    if tags:
        raise UnknownModelError(
            f"{name!r} has no default tag; choose one of: {', '.join(sorted(e.name for e in tags))}"
        )
    candidates = sorted(set(_ENTRIES) | {e.paper for e in _ENTRIES.values()})
    # Names are lower-case: compare case-insensitively, so "FedGR" suggests "fedgr".
    by_lower = {candidate.lower(): candidate for candidate in candidates}
    close = [by_lower[c] for c in difflib.get_close_matches(name.lower(), list(by_lower), n=5, cutoff=0.5)]
    hint = f"did you mean: {', '.join(close)}?" if close else "run `zoo list` to see the registered models"
    raise UnknownModelError(f"unknown model {name!r}; {hint}")


def get_entry(name: str) -> ModelEntry:
    """The :class:`ModelEntry` registered under ``name`` (or its paper's default tag).

    Args:
        name: ``paper.tag`` or a bare paper name.

    Raises:
        UnknownModelError: Listing the closest registered names.
    """
    return _ENTRIES[resolve_name(name)]


def list_models(pattern: str | None = None, pretrained: bool | None = None) -> list[str]:
    """Registered model names, in paper order.

    Args:
        pattern: Shell-style pattern matched against the full name or the paper name
            (``"fedgr"``, ``"fedgr.*"``, ``"*quant*"``).
        pretrained: If True, only entries with published weights; if False, only those without.
    """
    names = []
    for entry in _all_entries():
        if pattern and not (fnmatch.fnmatch(entry.name, pattern) or fnmatch.fnmatch(entry.paper, pattern)):
            continue
        if pretrained is not None and entry.pretrained_cfg.has_weights != pretrained:
            continue
        names.append(entry.name)
    return names


def model_info(name: str) -> dict[str, Any]:
    """Everything the registry knows about an entry, as a JSON-serialisable dict.

    Args:
        name: ``paper.tag`` or a bare paper name.
    """
    entry = get_entry(name)
    info = _jsonable(dataclasses.asdict(entry))
    info["paper"] = entry.paper
    info["tag"] = entry.tag
    info["pretrained"] = entry.pretrained_cfg.has_weights
    info["pretrained_cfg"]["metrics"] = entry.metrics
    info["mirror"] = str(entry.mirror_dir) if entry.mirror_dir.is_dir() else None
    info["card_provenance"] = _card_provenance(str(entry.mirror_dir / "metrics.json"))
    return info


def _card_provenance(path: str) -> dict[str, Any] | None:
    """Which commits, code and weights the card's metrics.json was measured with (None without a card)."""
    if not os.path.isfile(path):
        return None
    with open(path) as handle:
        return json.load(handle).get("provenance")


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
