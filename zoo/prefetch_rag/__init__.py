"""Predictive prefetching for asynchronous RAG (arXiv 2605.17989): retrieval predictor, query generator, monitor.

Every reconstruction choice is documented in :mod:`zoo.prefetch_rag.module`. This file imports only the registry.
"""

from zoo._registry import PaperRef

PAPER = PaperRef(
    title="Predictive Prefetching for Retrieval-Augmented Generation",
    arxiv="2605.17989",
    authors=("Wuyang Zhang", "Shichao Pei"),  # as in CITATION.cff (the spec says "Pei & Zhang")
    venue="ICML",
    year=2026,
)
