"""The shipped SOCRATES-mini: one ``.npz`` per published dataset seed, sha256-pinned in the registry.

:func:`save_artifact` writes datasets by seed (``python -m zoo.aporia.build``), :func:`load_artifact` reads them
back after the hash check, and :func:`published` loads a published seed against the registry pin of
``aporia.socrates_mini``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from zoo._errors import ZooError
from zoo._hub import sha256_file
from zoo.aporia.dataset import FORMAT_VERSION, SocratesMini

ARTIFACT = "socrates_mini_seed{seed}.npz"  # one file per published dataset seed, in the detector's folder, pinned
PUBLISHED_SEEDS = (0, 1, 2)


def save_artifact(datasets: dict[int, SocratesMini], path: str | Path) -> str:
    """Write datasets by seed into one ``.npz`` (texts once, float16 embeddings once per distinct text).

    Returns:
        The file's sha256 (pin it in the registry: ``aporia.socrates_mini``'s ``sha256[artifact_name(seed)]``).
    """
    texts = sorted({t for d in datasets.values() for t in d.responses})
    index = {t: k for k, t in enumerate(texts)}
    vectors = np.zeros((len(texts), datasets[next(iter(datasets))].embeddings.shape[1]), dtype=np.float16)
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, Any] = {"format": FORMAT_VERSION, "seeds": {}}
    for seed, d in datasets.items():
        rows = np.array([index[t] for t in d.responses], dtype=np.int32)
        vectors[rows] = d.embeddings.astype(np.float16)
        arrays |= {f"text_{seed}": rows, f"labels_{seed}": d.labels, f"pair_{seed}": d.pair}
        meta["seeds"][str(seed)] = {"pairs": d.pairs, "models": d.models, "config": d.config}
    arrays["texts"] = np.array(texts, dtype=str)
    arrays["embeddings"] = vectors
    arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
    path = Path(path)
    with open(path, "wb") as handle:  # np.savez would add the name's .npz suffix; a handle keeps the path
        np.savez_compressed(handle, **arrays)
    return sha256_file(path)


def load_artifact(path: str | Path, sha256: str | None = None, renormalise: bool = True) -> dict[int, SocratesMini]:
    """Datasets by seed from :func:`save_artifact`'s file, after checking its sha256.

    Args:
        path: The ``.npz`` file.
        sha256: Expected digest (None skips the check; :func:`published` always passes the registry pin).
        renormalise: Rescale the float16 embeddings to unit length (False keeps the stored values exactly, so
            :func:`save_artifact` writes them back bit for bit: ``build --merge``).

    Raises:
        ZooError: If the file is missing or its digest differs from ``sha256``.
    """
    path = Path(path)
    if not path.is_file():
        raise ZooError(f"SOCRATES-mini artifact {path} is missing; build it with python -m zoo.aporia.build")
    if sha256 is not None and (actual := sha256_file(path)) != sha256:
        raise ZooError(
            f"SOCRATES-mini artifact {path} has sha256 {actual[:12]}..., the pin is {sha256[:12]}...: the file is "
            "corrupted or was rebuilt; restore it (git checkout) or rebuild and re-pin it (python -m zoo.aporia.build)"
        )
    with np.load(path, allow_pickle=False) as arrays:
        meta = json.loads(str(arrays["meta"]))
        if meta.get("format") != FORMAT_VERSION:
            raise ZooError(f"{path} has format {meta.get('format')}, this code reads {FORMAT_VERSION}; rebuild it")
        texts, vectors = arrays["texts"], arrays["embeddings"].astype(np.float32)
        if renormalise:
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)  # undo float16 rounding
        datasets = {}
        for seed, info in meta["seeds"].items():
            rows = arrays[f"text_{seed}"]
            datasets[int(seed)] = SocratesMini(
                responses=[str(t) for t in texts[rows]],
                labels=arrays[f"labels_{seed}"],
                pair=arrays[f"pair_{seed}"],
                embeddings=vectors[rows],
                pairs=info["pairs"],
                models=info["models"],
                config=info["config"],
            )
    return datasets


def artifact_name(seed: int) -> str:
    """The shipped file of dataset seed ``seed`` (one file per seed keeps each under the 10 MB file limit)."""
    return ARTIFACT.format(seed=seed)


def artifact_path(seed: int = 0) -> Path:
    """The shipped file of dataset seed ``seed``, in the detector's folder ``hub_cards/aporia.socrates_mini``."""
    from zoo._registry import get_entry

    return get_entry("aporia.socrates_mini").mirror_dir / artifact_name(seed)


def published(seed: int = 0) -> SocratesMini:
    """The published SOCRATES-mini of dataset seed ``seed``, hash-checked against the registry pin.

    Raises:
        ZooError: On an unpublished seed, or an artifact whose sha256 differs from the pin.
    """
    from zoo._registry import get_entry

    if seed not in PUBLISHED_SEEDS:
        raise ZooError(f"SOCRATES-mini is published for dataset seeds {list(PUBLISHED_SEEDS)}, not {seed}")
    pins, name = get_entry("aporia.socrates_mini").pretrained_cfg.sha256, artifact_name(seed)
    if name not in pins:
        raise ZooError(f"the registry pins no {name} for aporia.socrates_mini; run python -m zoo.aporia.build")
    datasets = _published(seed, pins[name])
    if seed not in datasets:
        raise ZooError(f"{name} holds dataset seeds {sorted(datasets)}, not {seed}; rebuild it")
    return datasets[seed]


_PUBLISHED: dict[tuple[int, str], dict[int, SocratesMini]] = {}


def _published(seed: int, sha256: str) -> dict[int, SocratesMini]:
    if (seed, sha256) not in _PUBLISHED:
        _PUBLISHED[seed, sha256] = load_artifact(artifact_path(seed), sha256)
    return _PUBLISHED[seed, sha256]
