"""SOCRATES-mini for any settings or generators: built from the generator LMs, cached in the zoo's data cache.

The cache key hashes the settings, the generators' weights, the encoder and the format, so a retrained generator
or a changed setting builds a new dataset (:func:`socrates_mini`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from zoo import _paths
from zoo._serialization import weights_digest
from zoo.aporia.dataset import FORMAT_VERSION, SocratesConfig, SocratesMini
from zoo.aporia.sampling import build_socrates_mini


def cache_root() -> Path:
    """The zoo's data cache of this paper, ``zoo._paths.cache_dir("aporia")`` (``$ZOO_CACHE_DIR/aporia``)."""
    return _paths.cache_dir("aporia", create=False)


def cache_key(config: SocratesConfig, weight_digests: dict[str, str]) -> str:
    """A short hash of the settings, the generators' weights and the encoder."""
    from zoo.common.minilm import ENCODER

    payload = json.dumps(
        {"config": asdict(config), "weights": weight_digests, "encoder": ENCODER, "format": FORMAT_VERSION},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def load_generators(names: tuple[str, ...]) -> dict[str, Any]:
    """The published generator checkpoints (offline mirror, sha256-verified)."""
    import zoo

    return {name: zoo.load(name, pretrained=True) for name in names}


def socrates_mini(
    config: SocratesConfig | None = None,
    generators: dict[str, Any] | None = None,
    cache_dir: str | Path | None = "default",
) -> SocratesMini:
    """SOCRATES-mini from the cache, or built (and cached) when missing.

    Args:
        config: Dataset settings (default: :class:`zoo.aporia.dataset.SocratesConfig`).
        generators: Generator modules by registry name (default: the published checkpoints).
        cache_dir: Cache root; ``"default"`` = :func:`cache_root`, None = do not cache.
    """
    config = config or SocratesConfig()
    generators = generators or load_generators(tuple(config.generators))
    root = cache_root() if cache_dir == "default" else (Path(cache_dir) if cache_dir else None)
    folder = None
    if root is not None:
        digests = {name: weights_digest(generators[name]) for name in config.generators}
        folder = root / f"socrates_mini-{cache_key(config, digests)}"
        if (folder / "meta.json").is_file() and (folder / "arrays.npz").is_file():
            return SocratesMini.load(folder)
    dataset = build_socrates_mini(config, generators)
    if folder is not None:
        dataset.save(folder)
    return dataset
