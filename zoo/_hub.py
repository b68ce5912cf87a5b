"""Fetch published files from the Hub (pinned, sha256-verified, with an offline mirror) and publish them.

Fetching goes through ``huggingface_hub.snapshot_download``, so ``HF_ENDPOINT``, ``HF_HOME``,
``HF_HUB_CACHE``, ``HF_HUB_OFFLINE`` and ``HF_HUB_DISABLE_PROGRESS_BARS`` behave as Hub users expect.
When the Hub cannot be reached and the HF cache has no copy, the files come from the offline mirror
``hub_cards/<name>/`` shipped with the package (said once, at INFO). Every file is checked against
the sha256 pinned in the registry, wherever it came from; a mismatch is an error, and nothing is
deleted or re-downloaded behind the user's back.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from pathlib import Path

from zoo._errors import ChecksumError, HubUnavailableError, NoPretrainedWeightsError, ZooError
from zoo._registry import ModelEntry, get_entry

logger = logging.getLogger("zoo.hub")

#: Files of a published folder that document it and are not needed to load it: not pinned, so
#: re-rendering a card does not change the registry.
UNPINNED_FILES = ("README.md", "metrics.json")
UNPINNED_SUFFIXES = (".png", ".svg", ".md")

_mirror_announced: set[str] = set()


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def pinned_files(folder: str | Path) -> dict[str, str]:
    """sha256 of every file in ``folder`` that loading needs (what the registry pins), by name."""
    folder = Path(folder)
    return {
        path.name: sha256_file(path)
        for path in sorted(folder.iterdir())
        if path.is_file() and path.name not in UNPINNED_FILES and not path.name.endswith(UNPINNED_SUFFIXES)
    }


def verify_files(folder: str | Path, expected: Mapping[str, str], source: str) -> None:
    """Check each pinned file of ``folder`` against its sha256.

    Raises:
        ChecksumError: Naming the file, where it lies, and the expected hash.
    """
    folder = Path(folder)
    for name, digest in expected.items():
        path = folder / name
        if not path.is_file():
            raise ChecksumError(f"{name} is missing from {source} ({folder}); expected a file with sha256 {digest}")
        actual = sha256_file(path)
        if actual != digest:
            raise ChecksumError(
                f"{name} from {source} has sha256 {actual}, expected {digest}: the file is corrupted or was "
                f"modified; delete {path.resolve()} and load again"
            )


def _use_mirror(entry: ModelEntry, reason: str) -> Path:
    mirror = entry.mirror_dir
    cfg = entry.pretrained_cfg
    if not all((mirror / name).is_file() for name in cfg.sha256):
        where = f"{cfg.hf_hub_id}@{cfg.revision}" if cfg.hf_hub_id else entry.name
        raise HubUnavailableError(
            f"{entry.name}: {reason}, the HF cache holds no copy of {where} and there is no offline mirror at "
            f"{mirror}; connect to the Hub once (without HF_HUB_OFFLINE=1) or reinstall icml26-zoo with its hub_cards"
        )
    verify_files(mirror, cfg.sha256, source="the offline mirror")
    if entry.name not in _mirror_announced:
        _mirror_announced.add(entry.name)
        logger.info("%s: %s; using the offline mirror %s", entry.name, reason, mirror)
    return mirror


def fetch(name: str, revision: str | None = None) -> Path:
    """Local folder holding an entry's published files, each verified against the registry's sha256.

    Args:
        name: Registry name (or bare paper name).
        revision: Hub revision to fetch instead of the pinned one (branch, tag or commit). Its
            files must match the registry's sha256 pins all the same.

    Raises:
        NoPretrainedWeightsError: The entry publishes no weights.
        ChecksumError: A file does not match its pin.
        HubUnavailableError: No Hub, no cached copy and no mirror.
        huggingface_hub.errors.RevisionNotFoundError: ``revision`` does not exist on the Hub.
    """
    entry = get_entry(name)
    cfg = entry.pretrained_cfg
    if not cfg.has_weights:
        why = f" ({cfg.notes})" if cfg.notes else ""
        raise NoPretrainedWeightsError(
            f"{entry.name} has no pretrained weights{why}; build it with zoo.load({entry.name!r}) instead"
        )
    if not cfg.hf_hub_id:
        return _use_mirror(entry, "the entry has no Hub repo")

    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    wanted = revision or cfg.revision
    try:
        folder = Path(snapshot_download(cfg.hf_hub_id, revision=wanted, allow_patterns=sorted(cfg.sha256)))
    except (RepositoryNotFoundError, RevisionNotFoundError) as error:
        if revision is not None or not entry.mirror_dir.is_dir():
            raise
        logger.warning("%s: the Hub has no %s@%s (%s)", entry.name, cfg.hf_hub_id, wanted, type(error).__name__)
        return _use_mirror(entry, f"the Hub has no {cfg.hf_hub_id}@{wanted}")
    except (LocalEntryNotFoundError, OfflineModeIsEnabled, ConnectionError, OSError) as error:
        # snapshot_download turns network failures into LocalEntryNotFoundError when nothing is cached
        return _use_mirror(entry, f"the Hub could not be reached ({type(error).__name__})")
    verify_files(folder, cfg.sha256, source=f"{cfg.hf_hub_id}@{wanted}")
    return folder


def publish(name: str, repo_id: str, *, tag: str | None = None, token: str | None = None, private: bool = False) -> str:
    """Upload ``hub_cards/<name>`` to a Hub repo and tag the commit.

    Args:
        name: Registry name.
        repo_id: Target repo ``org/name`` (created if missing).
        tag: Tag to put on the new commit (default: the registry's revision when it is not a commit hash).
        token: Hub token (default: the logged-in one).
        private: Create the repo private.

    Returns:
        The commit hash to pin in the registry.
    """
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    entry = get_entry(name)
    folder = entry.mirror_dir
    if not folder.is_dir():
        raise ZooError(f"{entry.name} has no folder {folder} to publish; export it first (see CONTRIBUTING.md)")
    try:
        verify_files(folder, entry.pretrained_cfg.sha256, source=str(folder))
    except ChecksumError as error:
        raise ZooError(f"{error}. Run `zoo pin {entry.name}` and update the registry before publishing") from None
    api = HfApi(token=token)
    api.create_repo(repo_id, exist_ok=True, private=private)
    commit = api.upload_folder(repo_id=repo_id, folder_path=str(folder), commit_message=f"Publish {entry.name}")
    revision = entry.pretrained_cfg.revision
    tag = tag or (revision if revision and not _is_commit(revision) else None)
    if tag:
        try:
            api.create_tag(repo_id, tag=tag, revision=commit.oid)
        except HfHubHTTPError as error:
            if error.response is not None and error.response.status_code == 409:
                raise ZooError(f"tag {tag!r} already exists in {repo_id}; pass --tag with a new one") from None
            raise
    return commit.oid


def _is_commit(revision: str) -> bool:
    return len(revision) == 40 and all(c in "0123456789abcdef" for c in revision)
