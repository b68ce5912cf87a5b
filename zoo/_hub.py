"""Fetch published files from the Hub (pinned, sha256-verified, with an offline mirror) and publish them.

Fetching goes through ``huggingface_hub.snapshot_download``, so ``HF_ENDPOINT``, ``HF_HOME``,
``HF_HUB_CACHE``, ``HF_HUB_OFFLINE`` and ``HF_HUB_DISABLE_PROGRESS_BARS`` behave as Hub users expect.
When the Hub cannot be reached and the HF cache has no copy, the files come from the offline mirror
``hub_cards/<name>/`` shipped with the package (said once, at INFO). Every file is checked against
the sha256 pinned in the registry, wherever it came from; a mismatch is an error, and nothing is
deleted or re-downloaded behind the user's back.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import re
from collections.abc import Mapping
from pathlib import Path

from zoo._errors import ChecksumError, HubUnavailableError, NoPretrainedWeightsError, ZooError
from zoo._registry import ModelEntry, get_entry

logger = logging.getLogger("zoo.hub")

#: Files of a published folder that document it and are not needed to load it: not pinned, so
#: re-rendering a card does not change the registry.
UNPINNED_FILES = ("README.md", "metrics.json", "pieces.json")
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


def verify_files(folder: str | Path, expected: Mapping[str, str], source: str, fix: str | None = None) -> None:
    """Check each pinned file of ``folder`` against its sha256.

    Args:
        folder: The folder holding the files.
        expected: sha256 by file name.
        source: Where the folder came from, for the message.
        fix: What the user should do about a corrupted file (default: delete it and load again, which
            makes the HF cache download it anew).

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
            remedy = fix or f"delete {path.resolve()} and load again"
            raise ChecksumError(
                f"{name} from {source} has sha256 {actual}, expected {digest}: the file is corrupted or was "
                f"modified; {remedy}"
            )


def _restore_mirror_hint(entry: ModelEntry) -> str:
    """How to get a shipped mirror file back: git in a checkout, a reinstall otherwise (never delete it)."""
    root = entry.mirror_dir.parent
    if (root.parent / ".git").exists() and root.name == "hub_cards":
        return f"restore it with `git -C {root.parent} checkout -- hub_cards/{entry.name}`"
    return "restore it with `pip install --force-reinstall --no-deps icml26-zoo`"


def _use_mirror(entry: ModelEntry, reason: str, level: int = logging.WARNING) -> Path:
    mirror = entry.mirror_dir
    cfg = entry.pretrained_cfg
    missing = [name for name in cfg.sha256 if not (mirror / name).is_file()]
    if len(missing) == len(cfg.sha256):
        where = f"{cfg.hf_hub_id}@{cfg.revision}" if cfg.hf_hub_id else entry.name
        raise HubUnavailableError(
            f"{entry.name}: {reason}, the HF cache holds no copy of {where} and there is no offline mirror at "
            f"{mirror}; connect to the Hub once (without HF_HUB_OFFLINE=1) or reinstall icml26-zoo with its hub_cards"
        )
    if missing:
        raise HubUnavailableError(
            f"{entry.name}: {reason} and the offline mirror {mirror} lacks {', '.join(missing)}; "
            f"{_restore_mirror_hint(entry)}, or connect to the Hub once"
        )
    verify_files(mirror, cfg.sha256, source="the offline mirror", fix=_restore_mirror_hint(entry))
    if entry.name not in _mirror_announced:
        _mirror_announced.add(entry.name)
        logger.log(level, "%s: %s; using the offline mirror %s", entry.name, reason, mirror)
    return mirror


def _first_sentence(notes: str, limit: int = 100) -> str:
    """`` (first sentence of the notes)``, cut at ``limit`` characters; empty without notes."""
    sentence = re.split(r"[.:;] ", " ".join(notes.split()))[0].rstrip(".")
    if not sentence:
        return ""
    return f" ({sentence if len(sentence) <= limit else sentence[: limit - 3].rstrip() + '...'})"


#: errno of a cache folder that cannot be written: permission denied, not permitted, read-only file system.
_UNWRITABLE = {errno.EACCES, errno.EPERM, errno.EROFS}


def _hub_cache_dir() -> str:
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def fetch(entry: ModelEntry, revision: str | None = None) -> Path:
    """Local folder holding an entry's published files, each verified against the registry's sha256.

    Args:
        entry: The registered entry (``zoo.get_entry(name)``).
        revision: Hub revision to fetch instead of the pinned one (branch, tag or commit). Its
            files must match the registry's sha256 pins all the same.

    Raises:
        NoPretrainedWeightsError: The entry publishes no weights.
        ChecksumError: A file does not match its pin.
        HubUnavailableError: No Hub, no cached copy and no mirror.
        huggingface_hub.errors.RevisionNotFoundError: ``revision`` does not exist on the Hub.
    """
    cfg = entry.pretrained_cfg
    if not cfg.has_weights:
        raise NoPretrainedWeightsError(
            f"use zoo.load({entry.name!r}) without pretrained=True: {entry.name} publishes no learned weights"
            f"{_first_sentence(cfg.notes)} (`zoo info {entry.name}` has the notes)"
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
    # The mirror holds the pinned revision only: it must not stand in for another one the user asked for.
    other_revision = revision is not None and revision != cfg.revision
    try:
        folder = Path(snapshot_download(cfg.hf_hub_id, revision=wanted, allow_patterns=sorted(cfg.sha256)))
    except (RepositoryNotFoundError, RevisionNotFoundError) as error:
        if revision is not None or not entry.mirror_dir.is_dir():
            raise
        logger.warning("%s: the Hub has no %s@%s (%s)", entry.name, cfg.hf_hub_id, wanted, type(error).__name__)
        return _use_mirror(entry, f"the Hub has no {cfg.hf_hub_id}@{wanted}")
    except (LocalEntryNotFoundError, OfflineModeIsEnabled, ConnectionError, OSError) as error:
        if isinstance(error, OSError) and error.errno in _UNWRITABLE:
            # A read-only HF_HOME: the Hub may well answer, but the cache cannot take the files.
            reason = (
                f"the HF cache {_hub_cache_dir()} is not writable ({error.strerror or type(error).__name__}); "
                "set HF_HOME (or HF_HUB_CACHE) to a writable folder"
            )
            if other_revision or not any((entry.mirror_dir / name).is_file() for name in cfg.sha256):
                raise HubUnavailableError(f"{entry.name}: cannot fetch {cfg.hf_hub_id}@{wanted}: {reason}") from None
            return _use_mirror(entry, reason, level=logging.WARNING)
        # snapshot_download turns network failures into LocalEntryNotFoundError when nothing is cached
        if other_revision:
            raise HubUnavailableError(
                f"{entry.name}: revision {revision!r} is not in the HF cache and the Hub could not be reached "
                f"({type(error).__name__}); drop revision= to load the pinned {cfg.revision!r} from the offline "
                "mirror, or connect to the Hub"
            ) from None
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


def download(entry: ModelEntry, to: str | Path | None = None) -> Path:
    """Put an entry's published files where offline loading finds them.

    Without ``to``: fetch them from the Hub into the HF cache (``HF_HOME``), so ``HF_HUB_OFFLINE=1`` works later.
    With ``to``: copy them, verified, into the mirror folder ``to/<name>/`` (with the card's text), from the HF
    cache, the Hub or this checkout's ``hub_cards/``; point ``ZOO_MIRROR`` at ``to`` to load from it.

    Returns:
        The folder holding the files.
    """
    import shutil

    source = fetch(entry)
    if to is None:
        return source
    target = Path(to).expanduser() / entry.name
    target.mkdir(parents=True, exist_ok=True)
    for name in sorted(entry.pretrained_cfg.sha256):
        shutil.copy2(source / name, target / name)
    for path in entry.mirror_dir.iterdir() if entry.mirror_dir.is_dir() else ():
        if path.is_file() and (path.name in UNPINNED_FILES or path.name.endswith(UNPINNED_SUFFIXES)):
            shutil.copy2(path, target / path.name)  # the card's text and figure travel with the weights
    verify_files(target, entry.pretrained_cfg.sha256, source=str(target))
    return target
