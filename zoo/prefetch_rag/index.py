"""Retrieval: MiniLM embeddings (zoo.common.minilm) of the knowledge base in a faiss ``IndexFlatIP``.

The knowledge-base embedding is computed once and cached as ``.npy`` in the zoo's data cache
(``zoo._paths.cache_dir("prefetch_rag")``: ``$ZOO_CACHE_DIR/prefetch_rag``), keyed by a hash of the texts.
"""

from __future__ import annotations

import hashlib
import time

import numpy as np

from zoo._paths import cache_dir
from zoo.prefetch_rag.heads import EMBEDDING_DIM, check_query


class Retriever:
    """Exact inner-product search over unit-norm document embeddings.

    Args:
        texts: The documents.
        embeddings: ``(len(texts), 384)`` unit-norm float32.
    """

    def __init__(self, texts: list[str], embeddings: np.ndarray) -> None:
        import faiss

        if len(texts) == 0:
            raise ValueError("knowledge base is empty: texts must hold at least one document")
        embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        if embeddings.shape != (len(texts), EMBEDDING_DIM):
            raise ValueError(f"embeddings must be ({len(texts)}, {EMBEDDING_DIM}), got {embeddings.shape}")
        self.texts = list(texts)
        self.embeddings = embeddings
        self.index = faiss.IndexFlatIP(EMBEDDING_DIM)
        self.index.add(embeddings)

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` document ids and scores for one query vector."""
        if k <= 0:
            raise ValueError(f"k must be > 0, got {k}")
        q = check_query(query)[None]
        scores, ids = self.index.search(q, min(k, len(self.texts)))
        return ids[0], scores[0]

    def rerank(self, ids: np.ndarray, query: np.ndarray, k: int) -> list[int]:
        """The ``k`` of ``ids`` most similar to ``query`` (dot products with the stored embeddings)."""
        ids = np.asarray(ids)
        scores = self.embeddings[ids] @ check_query(query)
        return [int(i) for i in ids[np.argsort(-scores, kind="stable")[:k]]]


class TextEncoder:
    """MiniLM sentence embeddings with a per-text cache (decoding asks for the same recent texts often)."""

    def __init__(self) -> None:
        self._cache: dict[str, np.ndarray] = {}

    def __call__(self, text: str) -> np.ndarray:
        if text not in self._cache:
            from zoo.common.minilm import embed

            self._cache[text] = embed([text])[0]
        return self._cache[text]


def kb_embeddings(texts: list[str], verbose: bool = False) -> np.ndarray:
    """MiniLM embeddings of ``texts``, cached to a file keyed by the texts' hash."""
    digest = hashlib.sha256("\n\x00".join(texts).encode()).hexdigest()[:16]
    path = cache_dir("prefetch_rag", create=False) / f"kb_{digest}.npy"
    if path.is_file():
        return np.load(path)
    import torch

    from zoo.common.minilm import embed

    start = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # large batches: both cores help (the decoder itself runs on one thread)
    try:
        label = f"prefetch_rag: embedding the {len(texts)} knowledge-base documents once (cached for later runs)"
        vectors = embed(texts, batch_size=64, progress=label if verbose else None)
    finally:
        torch.set_num_threads(threads)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    if verbose:
        print(f"prefetch_rag: embedded {len(texts)} documents in {time.perf_counter() - start:.1f} s -> {path}")
    return vectors


def build_retriever(limit_distractors: int | None = None) -> Retriever:
    """The retriever over the fact documents and the distractors (``limit_distractors`` for smoke runs)."""
    from zoo.prefetch_rag import corpus as C

    texts = C.knowledge_base()
    if limit_distractors is not None:
        texts = texts[: len(C.fact_documents()) + limit_distractors]
    return Retriever(texts, kb_embeddings(texts, verbose=True))
