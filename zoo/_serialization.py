"""Save and load a LightningModule as a Hub folder: ``config.json`` + ``model.safetensors``.

``config.json`` holds ``class_path`` and ``init_args`` (the module's saved hyper-parameters, in the
same shape as a LightningCLI recipe's ``model:`` block), optional ``metadata`` (what the module
reports through ``export_metadata()``, plus training facts such as the recipe's wall time). No
pickles: weights are safetensors, and loading is strict.

A module may also publish extra files (a tokenizer, an allocation table) by defining
``export_files() -> dict[str, bytes | str]``; they are read back by its ``import_files(folder)``,
which runs before the weights are loaded.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import logging
import os
import subprocess
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from zoo._errors import HubUnavailableError, ZooError, ZooTypeError
from zoo._hooks import ExportHooks
from zoo._registry import CONFIG_FILE, WEIGHTS_FILE, get_entry, import_object

logger = logging.getLogger("zoo.serialization")

#: Prefix of ``zoo.load("hf-hub:ORG/REPO")``, as in timm.
HF_HUB_PREFIX = "hf-hub:"


def to_jsonable(value: Any) -> Any:
    """Turn hyper-parameters (dataclasses, tuples, paths, enums, numpy scalars) into JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        return value.item()  # numpy / torch scalars
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise ZooError(
        f"cannot store init argument of type {type(value).__name__} in config.json; use primitives or dataclasses"
    )


def module_init_args(module: Any) -> dict[str, Any]:
    """The module's init arguments as saved by ``save_hyperparameters()``, without Lightning's private keys."""
    hparams = getattr(module, "hparams", None)
    if hparams is None:
        raise ZooError(f"{type(module).__name__} has no hparams; call self.save_hyperparameters() in __init__")
    return {k: to_jsonable(v) for k, v in dict(hparams).items() if not str(k).startswith("_")}


def _coerce(value: Any, annotation: Any) -> Any:
    """Rebuild dataclass-typed arguments that config.json stored as dicts."""
    if isinstance(value, Mapping):
        candidates = typing.get_args(annotation) or (annotation,)
        for candidate in candidates:
            if dataclasses.is_dataclass(candidate) and isinstance(candidate, type):
                hints = typing.get_type_hints(candidate)
                return candidate(**{k: _coerce(v, hints.get(k, Any)) for k, v in value.items()})
    return value


def instantiate(cls: type, init_args: Mapping[str, Any]) -> Any:
    """``cls(**init_args)``, turning dicts back into the dataclasses that ``__init__`` annotates.

    Raises:
        ZooError: If an argument is not accepted by ``cls``.
    """
    signature = inspect.signature(cls.__init__)
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    unknown = [k for k in init_args if k not in signature.parameters and not takes_kwargs]
    if unknown:
        accepted = ", ".join(p for p in signature.parameters if p != "self")
        raise ZooError(f"{cls.__name__} does not accept {', '.join(map(repr, unknown))}; its arguments are: {accepted}")
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # unresolvable forward references: pass values through unchanged
        hints = {}
    return cls(**{k: _coerce(v, hints.get(k, Any)) for k, v in init_args.items()})


def save_pretrained(module: Any, folder: str | Path, **metadata: Any) -> Path:
    """Write ``config.json``, ``model.safetensors`` and the module's extra files into ``folder``.

    Args:
        module: A LightningModule whose ``__init__`` called ``save_hyperparameters()``.
        folder: Destination folder (created).
        **metadata: JSON-serialisable facts stored under ``config.json["metadata"]``.

    Returns:
        The folder.
    """
    from safetensors.torch import save_file

    from zoo._version import __version__

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cls = type(module)
    hooks = isinstance(module, ExportHooks)  # a plain LightningModule (a user's own) has no extra files
    exported = module.export_metadata() if hooks else {}
    config = {
        "zoo_version": __version__,
        "class_path": f"{cls.__module__}.{cls.__qualname__}",
        "init_args": module_init_args(module),
        "metadata": to_jsonable({**exported, **metadata}),
    }
    # What inference needs travels with the weights (timm's pretrained_cfg, transformers' id2label).
    pretrained_cfg = to_jsonable(getattr(module, "pretrained_cfg", None) or {})
    if pretrained_cfg:
        config["pretrained_cfg"] = pretrained_cfg
        if pretrained_cfg.get("label_names"):
            config["id2label"] = {str(i): label for i, label in enumerate(pretrained_cfg["label_names"])}
    # Clone so tied parameters become separate tensors: safetensors refuses shared storage.
    state = {k: v.detach().to("cpu").clone().contiguous() for k, v in module.state_dict().items()}
    save_file(state, str(folder / WEIGHTS_FILE), metadata={"format": "pt"})
    _match_umask(folder / WEIGHTS_FILE)  # safetensors creates its file 0600; every other file gets the umask's mode
    written = [WEIGHTS_FILE]
    for name, content in (module.export_files() if hooks else {}).items():
        path = folder / name
        if isinstance(content, str):
            path.write_text(content)
        else:
            path.write_bytes(content)
        written.append(name)
    # Every other file's sha256, so a copied folder with a flipped bit is refused on load (config.json can't hold
    # its own digest; the registry pins it for published entries).
    config["files"] = {name: _sha256(folder / name) for name in sorted(written)}
    (folder / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
    return folder


def _sha256(path: Path) -> str:
    from zoo._hub import sha256_file

    return sha256_file(path)


def _match_umask(path: Path) -> None:
    umask = os.umask(0)
    os.umask(umask)
    path.chmod(0o666 & ~umask)


def verify_folder(folder: Path, config: dict[str, Any]) -> None:
    """Check an exported folder's files against the sha256 its config.json records.

    Raises:
        ChecksumError: One line naming the file that changed.
    """
    from zoo._errors import ChecksumError

    recorded = config.get("files")
    if recorded is None:
        if str(folder) not in _UNCHECKED:
            _UNCHECKED.add(str(folder))
            logger.warning("%s was exported before exports recorded checksums: its files are not verified", folder)
        return
    for name, digest in recorded.items():
        path = folder / name
        if not path.is_file() or _sha256(path) != digest:
            state = "is missing" if not path.is_file() else "does not match the sha256 its config.json records"
            raise ChecksumError(f"{path} {state}: the folder was altered or damaged; export or copy it again")


_UNCHECKED: set[str] = set()


def weights_digest(module: Any) -> str:
    """sha256 over a module's state dict (names, shapes and bytes), to key caches on retrained weights."""
    import hashlib

    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(name.encode())
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def read_config(folder: str | Path) -> dict[str, Any]:
    """The parsed ``config.json`` of a saved folder."""
    path = Path(folder) / CONFIG_FILE
    if not path.is_file():
        raise ZooError(f"{path} does not exist; a pretrained folder holds {CONFIG_FILE} and {WEIGHTS_FILE}")
    return json.loads(path.read_text())


def load_state(module: Any, state: Mapping[str, Any], strict: bool = True, skip: str | None = None) -> None:
    """``load_state_dict`` with one-line errors for missing, unexpected or mis-shaped keys.

    Args:
        module: The module.
        state: The weights.
        strict: Missing or unexpected keys are errors.
        skip: Prefix of a submodule (a replaced classifier head) left as initialised.
    """
    own = module.state_dict()
    if skip:
        state = {k: v for k, v in state.items() if not k.startswith(skip + ".")}
        own = {k: v for k, v in own.items() if not k.startswith(skip + ".")}
    mismatched = [k for k, v in state.items() if k in own and tuple(own[k].shape) != tuple(v.shape)]
    if mismatched:
        key = mismatched[0]
        raise ZooError(
            f"weights do not fit {type(module).__name__}: {key} is {tuple(state[key].shape)} in the file but "
            f"{tuple(own[key].shape)} in the module ({len(mismatched)} such keys); "
            "do not override architecture arguments"
        )
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    if strict and (missing or unexpected):
        parts = []
        if missing:
            parts.append(f"missing {len(missing)} keys (e.g. {missing[0]})")
        if unexpected:
            parts.append(f"unexpected {len(unexpected)} keys (e.g. {unexpected[0]})")
        raise ZooError(f"weights do not match {type(module).__name__}: {'; '.join(parts)}; pass strict=False to ignore")
    module.load_state_dict(state, strict=False)


def load_folder(
    folder: str | Path,
    *,
    strict: bool = True,
    map_location: str = "cpu",
    module_class: type | None = None,
    config: dict[str, Any] | None = None,
    verified: bool = False,
    **overrides: Any,
) -> Any:
    """Build the module described by ``folder/config.json`` and load ``folder/model.safetensors`` into it.

    Args:
        folder: A folder written by :func:`save_pretrained`.
        strict: Missing or unexpected weight keys are errors.
        map_location: Device the weights are loaded onto; the module is moved there.
        module_class: The class to build (default: ``config.json["class_path"]``).
        config: The folder's parsed config.json, when the caller already read it.
        verified: The files were already checked (against the registry's pins); skip the folder's own checksums.
        **overrides: Init arguments that replace those in ``config.json``.

    Returns:
        The module, in eval mode.

    Raises:
        ChecksumError: A file differs from the sha256 its config.json records.
    """
    check_device(map_location)
    folder = Path(folder)
    config = config if config is not None else read_config(folder)
    if not verified:
        verify_folder(folder, config)
    if "class_path" not in config:
        raise ZooError(
            f"{folder / CONFIG_FILE} has no class_path, so it was not written by zoo.save_pretrained or "
            "ExportPretrained; export the module with one of them"
        )
    cls = module_class or _module_class(config["class_path"], folder)
    init_args = config.get("init_args", {})
    head = _replaced_head(cls, init_args, overrides, str(folder))
    module = instantiate(cls, {**init_args, **overrides})
    if config.get("pretrained_cfg") and hasattr(type(module), "pretrained_cfg"):
        cfg = dict(config["pretrained_cfg"])
        if head:
            cfg.pop("label_names", None)  # a new head: the published class names no longer apply
        module.pretrained_cfg = cfg
    if isinstance(module, ExportHooks):
        module.import_files(folder)
    load_weights(module, folder, strict=strict, map_location=map_location, skip=head)
    return module.to(map_location).eval()


#: Init argument that sizes a classifier's head, as in timm (``num_classes``).
HEAD_ARG = "num_classes"


def _replaced_head(cls: type, init_args: Mapping[str, Any], overrides: Mapping[str, Any], what: str) -> str | None:
    """The head submodule to leave freshly initialised when ``overrides`` change ``num_classes``, else None.

    Raises:
        ZooError: ``num_classes`` changes but the class names no head that can be replaced.
    """
    if HEAD_ARG not in overrides or overrides[HEAD_ARG] == init_args.get(HEAD_ARG):
        return None
    head = getattr(cls, "HEAD", None)
    if not head:
        raise ZooError(
            f"{what} ({cls.__name__}) has no classification head to replace, so {HEAD_ARG}= cannot change; "
            "fine-tuning with a new head works for the image classifiers (dwp, fedgr)"
        )
    return head


def _module_class(class_path: str, folder: Path) -> type:
    """Import a config.json's class_path, accepting only torch modules (a config is data, not a command)."""
    import torch

    try:
        cls = import_object(class_path)
    except (ImportError, AttributeError, ValueError) as error:
        raise ZooError(
            f"{folder / CONFIG_FILE} names {class_path}, which cannot be imported ({error}); install the package "
            "that defines it or run from the folder that holds its module"
        ) from None
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise ZooError(f"{folder / CONFIG_FILE} names {class_path}, which is not a torch module; refusing to build it")
    return cls


def load_weights(
    module: Any, folder: str | Path, *, strict: bool = True, map_location: str = "cpu", skip: str | None = None
) -> None:
    """Load ``folder/model.safetensors`` into an already built module (``zoo test --weights DIR``).

    ``skip`` names a submodule (a replaced head) whose weights are not loaded.

    Raises:
        ZooError: One line, if the file is missing, unreadable or does not fit the module.
    """
    from safetensors.torch import load_file

    weights = Path(folder) / WEIGHTS_FILE
    if not weights.is_file():
        raise ZooError(f"{weights} does not exist; a pretrained folder holds {CONFIG_FILE} and {WEIGHTS_FILE}")
    check_device(map_location)
    try:
        state = load_file(str(weights), device=str(map_location))
    except Exception as error:  # safetensors raises its own SafetensorError on a truncated or garbled file
        raise ZooError(f"{weights} is not a readable safetensors file ({error}); export it again") from None
    load_state(module, state, strict=strict, skip=skip)


def check_device(map_location: Any) -> None:
    """Fail with one line when ``map_location`` names a device this machine does not have.

    Raises:
        ZooError: Naming the device and the fix (``map_location="cpu"``).
    """
    import torch

    try:
        device = torch.device(map_location)
    except (RuntimeError, TypeError, ValueError) as error:
        raise ZooError(f"map_location={map_location!r} is not a torch device ({error}); pass 'cpu' or 'cuda'") from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ZooError(
                f"map_location={map_location!r}, but torch sees no CUDA GPU on this machine "
                "(torch.cuda.is_available() is False); pass map_location='cpu'"
            )
        if device.index is not None and device.index >= count:
            raise ZooError(
                f"map_location={map_location!r}, but torch sees only {count} CUDA device(s); pass 'cuda:0' or 'cpu'"
            )
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise ZooError(f"map_location={map_location!r}, but MPS is not available here; pass map_location='cpu'")


def build_module(
    name: str,
    *,
    pretrained: bool = False,
    revision: str | None = None,
    strict: bool = True,
    map_location: str = "cpu",
    **overrides: Any,
) -> Any:
    """Implementation of :func:`zoo.load`: a registry name, an exported folder or ``hf-hub:ORG/REPO``."""
    if not isinstance(name, str | os.PathLike):
        raise ZooTypeError(
            f"zoo.load takes a model name such as 'fedgr', a folder or 'hf-hub:ORG/REPO', not "
            f"{type(name).__name__} {name!r}; see zoo.list_models()"
        )
    check_device(map_location)
    if isinstance(name, str) and name.startswith(HF_HUB_PREFIX):
        return _load_hub_repo(
            name[len(HF_HUB_PREFIX) :], revision=revision, strict=strict, map_location=map_location, **overrides
        )
    folder = _as_folder(name)
    if folder is not None:
        if revision is not None:
            raise ZooError(f"revision={revision!r} applies to Hub repos, not to the folder {folder}; drop it")
        return load_folder(folder, strict=strict, map_location=map_location, **overrides)
    entry = get_entry(name)
    cls = entry.module_class()
    if not pretrained:
        return instantiate(cls, {**entry.model_args, **overrides}).to(map_location)
    from zoo._hub import fetch

    folder = fetch(entry, revision=revision)
    config = read_config(folder)
    if config.get("class_path", "").rsplit(".", 1)[-1] != cls.__name__:
        raise ZooError(
            f"{entry.name}: config.json builds {config.get('class_path')}, but the registry names {entry.module}"
        )
    # the registry's pins verified every file: no need to check the folder's own checksums again
    return load_folder(
        folder, strict=strict, map_location=map_location, module_class=cls, config=config, verified=True, **overrides
    )


def _as_folder(name: str | os.PathLike) -> Path | None:
    """The folder ``name`` refers to, or None for a registry name.

    A path object, or a string with a path separator, is a folder (an error if it does not exist); a bare
    word is a folder only if it holds a config.json, so a registry name is not shadowed by a stray directory.
    """
    path = Path(name)
    looks_like_path = isinstance(name, os.PathLike) or "/" in str(name) or os.sep in str(name)
    if path.is_dir() and (looks_like_path or (path / CONFIG_FILE).is_file()):
        return path
    if looks_like_path:
        hint = f"; for a Hub repo write 'hf-hub:{name}'" if str(name).count("/") == 1 else ""
        raise ZooError(f"{name} is not a folder (an exported folder holds {CONFIG_FILE} and {WEIGHTS_FILE}){hint}")
    return None


def _load_hub_repo(repo_id: str, *, revision: str | None, strict: bool, map_location: str, **overrides: Any) -> Any:
    """``zoo.load("hf-hub:ORG/REPO")``: a registered entry's repo goes through its pins, any other is loaded as is."""
    from zoo._registry import _all_entries

    registered = [e.name for e in _all_entries() if e.pretrained_cfg.hf_hub_id == repo_id]
    if registered:
        options = {"revision": revision, "strict": strict, "map_location": map_location}
        return build_module(registered[0], pretrained=True, **options, **overrides)
    from huggingface_hub import hf_hub_download, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError, OfflineModeIsEnabled

    try:
        config = Path(hf_hub_download(repo_id, CONFIG_FILE, revision=revision))
        if "class_path" not in json.loads(config.read_text()):
            raise ZooError(
                f"hf-hub:{repo_id} is not a zoo folder: its {CONFIG_FILE} has no class_path; zoo.load reads repos "
                "written by zoo.save_pretrained or ExportPretrained (use the repo's own library for others)"
            )
        # Only what loading needs: no cards, figures or pickles.
        folder = snapshot_download(
            repo_id, revision=revision, ignore_patterns=["*.md", "*.png", "*.svg", "*.ckpt", "*.bin", "*.pt", "*.pth"]
        )
    except (LocalEntryNotFoundError, OfflineModeIsEnabled) as error:
        raise HubUnavailableError(
            f"hf-hub:{repo_id}: the Hub could not be reached and the HF cache holds no copy "
            f"({type(error).__name__}); connect to the Hub once (without HF_HUB_OFFLINE=1)"
        ) from None
    return load_folder(folder, strict=strict, map_location=map_location, **overrides)


def git_commit(path: str | Path | None = None) -> dict[str, Any] | None:
    """The git commit of the checkout that holds ``path`` (default: the zoo's source), or None outside one.

    Returns:
        ``{"commit": sha, "dirty": bool}``; ``dirty`` when tracked files differ from the commit.
    """
    where = Path(path) if path is not None else Path(__file__).resolve().parents[1]
    if path is None and not (where / ".git").exists():
        return None  # an installed wheel: a git repository around site-packages is not the zoo's

    def git(*args: str) -> str:
        command = ["git", "-C", str(where), *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=10, check=True).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": dirty}
