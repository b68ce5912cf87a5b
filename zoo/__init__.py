"""icml26-zoo: ICML 2026 papers as tested PyTorch Lightning modules with pretrained checkpoints.

Example:
    >>> import zoo
    >>> zoo.list_models("fedgr*")                    # doctest: +SKIP
    >>> model = zoo.load("fedgr", pretrained=True)   # doctest: +SKIP

``import zoo`` stays light: it imports neither torch nor Lightning nor any paper package. Paper
packages register their entries when the registry is first consulted, and the heavy code behind an
entry (its LightningModule, optional extras) loads only when that entry is built.
"""

from zoo._errors import (
    ChecksumError,
    HubUnavailableError,
    MissingExtraError,
    NoPretrainedWeightsError,
    UnknownModelError,
    ZooError,
    ZooTypeError,
)
from zoo._registry import (
    ModelEntry,
    PaperRef,
    PretrainedCfg,
    get_entry,
    list_models,
    model_info,
    register_model,
)
from zoo._version import __version__

__all__ = [
    "ChecksumError",
    "HubUnavailableError",
    "MissingExtraError",
    "ModelEntry",
    "NoPretrainedWeightsError",
    "PaperRef",
    "PretrainedCfg",
    "UnknownModelError",
    "ZooError",
    "ZooTypeError",
    "__version__",
    "get_entry",
    "list_models",
    "load",
    "load_folder",
    "model_info",
    "register_model",
    "save_pretrained",
]


def load(
    name,
    pretrained: bool = False,
    *,
    revision: str | None = None,
    strict: bool = True,
    map_location: str = "cpu",
    **overrides,
):
    """Build a model as a LightningModule: a registered entry, an exported folder or a Hub repo.

    Example:
        >>> zoo.load("dwp.standard", pretrained=True)                  # doctest: +SKIP
        >>> zoo.load("runs/dwp.standard/version_0/pretrained")         # doctest: +SKIP  (your own weights)
        >>> zoo.load("hf-hub:icml26-zoo/dwp-standard")                 # doctest: +SKIP

    Args:
        name: Registry name ``paper[.tag]`` (a bare paper name resolves to its default tag); or a folder
            holding ``config.json`` + ``model.safetensors`` (what ``zoo fit`` exports), loaded with its
            weights; or ``"hf-hub:ORG/REPO"``, any Hub repo holding those files. A repo that is a
            registered entry's ``hf_hub_id`` is fetched and checked against the registry's sha256 pins.
        pretrained: Load the published weights (Hub, then HF cache, then the offline mirror),
            each file checked against the sha256 pinned in the registry. Folders and ``hf-hub:`` repos
            always load their weights.
        revision: Hub revision (branch, tag or commit) to fetch instead of the pinned one. The
            files of a registered entry must still match the registry's sha256 pins.
        strict: Missing or unexpected weight keys are errors.
        map_location: Device the weights are loaded onto.
        **overrides: Init arguments of the module that replace the published (or default) ones.

    Returns:
        The LightningModule, in eval mode when weights were loaded.
    """
    from zoo._serialization import build_module

    return build_module(
        name, pretrained=pretrained, revision=revision, strict=strict, map_location=map_location, **overrides
    )


def load_folder(folder, *, strict: bool = True, map_location: str = "cpu", **overrides):
    """Load a module from a folder written by :func:`save_pretrained` (config.json + model.safetensors).

    Args:
        folder: The folder.
        strict: Missing or unexpected weight keys are errors.
        map_location: Device the weights are loaded onto.
        **overrides: Init arguments that replace those in config.json.
    """
    from zoo._serialization import load_folder as _load_folder

    return _load_folder(folder, strict=strict, map_location=map_location, **overrides)


def save_pretrained(module, folder, **metadata):
    """Write ``config.json`` (class path + init arguments) and ``model.safetensors`` for a module.

    Args:
        module: A LightningModule whose ``__init__`` called ``save_hyperparameters()``.
        folder: Destination folder (created).
        **metadata: Extra JSON-serialisable entries stored under ``config.json["metadata"]``.
    """
    from zoo._serialization import save_pretrained as _save_pretrained

    return _save_pretrained(module, folder, **metadata)
