"""The decoder loop's math on a tiny untrained GPT-2, a tiny BPE and a random index (no MiniLM, a few seconds)."""

import hashlib

import numpy as np
import pytest
import torch

from zoo.prefetch_rag import corpus as C
from zoo.prefetch_rag.clock import ClockConstants, SimClock
from zoo.prefetch_rag.decoder import ARMS, Decoder, Hyper
from zoo.prefetch_rag.heads import QueryGenerator, RetrievalPredictor
from zoo.prefetch_rag.index import Retriever
from zoo.prefetch_rag.lead_ins import LEAD_INS
from zoo.prefetch_rag.lm import LMConfig, Tokens, build_lm

pytest.importorskip("countryinfo")
pytest.importorskip("faiss")


def _vector(text: str) -> np.ndarray:
    seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
    v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
    return v / np.linalg.norm(v)


@pytest.fixture(scope="module")
def setup():
    from zoo.common.text import train_bpe

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one-token forwards: a second thread only adds contention
    docs = [text for _, _, text in C.fact_documents()[:200]]
    lead_ins = [t for pools in LEAD_INS.values() for lead in pools.values() for t in lead]
    tokens = Tokens(train_bpe(docs + lead_ins + [C.INTRO, C.SWITCH, C.QUESTION], vocab_size=1000))
    torch.manual_seed(0)
    config = LMConfig(vocab_size=1000, n_embd=32, n_layer=2, n_head=2, n_positions=512)
    lm = build_lm(config).eval()
    retriever = Retriever(docs, np.stack([_vector(d) for d in docs]))
    predictor = RetrievalPredictor(32, 8, 2).eval()
    head = QueryGenerator(32).eval()
    questions = C.question_set("val", 2, 1, seed=3)
    yield tokens, lm, retriever, predictor, head, questions
    torch.set_num_threads(threads)


def _decoder(setup, **hyper):
    tokens, lm, retriever, predictor, head, _ = setup
    return Decoder(lm, tokens, retriever, _vector, predictor, head, Hyper(**hyper))


def test_simulated_clock_adds_up_without_overlap(setup):
    constants = ClockConstants()
    clock = SimClock(constants)
    clock.decode()
    clock.decode()
    clock.prefill(30)
    assert clock.wait(clock.submit(lambda: "docs")) == "docs"
    assert clock.now == pytest.approx(2 * 25 + 30 + 300)
    # the synchronous loop: every cost adds up, nothing overlaps
    for question in setup[-1]:
        trace = _decoder(setup, theta=0.0).answer(question, "sync_active")
        assert trace.sync_retrievals == trace.retrievals == len(trace.spikes) > 0
        expected = len(trace.tokens) * 25 + trace.retrievals * 300 + trace.prefill_tokens * 1.0
        assert trace.latency_ms == pytest.approx(expected)
        assert trace.wait_ms == pytest.approx(trace.retrievals * 300)  # every retrieval blocks in full


def test_latency_is_decoding_prefill_and_blocked_waits(setup):
    # the simulated clock only moves when decoding, prefilling or blocked on a retrieval, so the latency splits
    # exactly into these, and a prefetch that overlapped decoding is not counted as waiting
    decoder = _decoder(setup, theta=0.0, tau=0.0, rho=0.0, confirm=False)
    question = setup[-1][0]
    for arm in ("no_retrieval", "single_shot", "sync_active", "telerag", "prefetch"):
        trace = decoder.answer(question, arm)
        assert trace.latency_ms == pytest.approx(len(trace.tokens) * 25 + trace.prefill_tokens + trace.wait_ms)
        assert 0.0 <= trace.wait_ms <= trace.retrievals * 300
        if arm == "no_retrieval":
            assert trace.wait_ms == 0.0
    sync, ahead = decoder.answer(question, "sync_active"), decoder.answer(question, "prefetch")
    assert ahead.served > 0 and ahead.wait_ms < sync.wait_ms  # served prefetches overlapped decoding


def test_async_retrieval_overlaps_decoding():
    clock = SimClock()
    handle = clock.submit(lambda: 1)
    for _ in range(12):
        clock.decode()
    assert clock.ready(handle) and clock.wait(handle) == 1
    assert clock.now == pytest.approx(300)  # the retrieval cost nothing extra


def test_tau_one_reproduces_sync_active(setup):
    decoder = _decoder(setup, theta=0.0, tau=1.0)
    for question in setup[-1]:
        sync = decoder.answer(question, "sync_active")
        never = decoder.answer(question, "prefetch")
        assert never.tokens == sync.tokens
        assert never.predicted == sync.predicted
        assert never.latency_ms == sync.latency_ms
        assert not never.issued


def test_cancelled_prefetch_is_never_inserted(setup):
    # fire at every position (tau 0) and re-issue at every monitor check (delta 0): many cancellations
    decoder = _decoder(setup, theta=0.0, tau=0.0, delta=0.0, rho=0.0)
    cancelled = inserted = 0
    for question in setup[-1]:
        trace = decoder.answer(question, "prefetch")
        cancelled_ids = {id(h) for h in trace.cancelled}
        assert not cancelled_ids & {id(h) for h in trace.inserted}
        assert all(not h.cancelled for h in trace.inserted)
        cancelled += len(trace.cancelled)
        inserted += len(trace.inserted)
    assert cancelled > 0 and inserted > 0


def test_spike_outcomes_account_for_every_spike_and_retrieval(setup):
    from zoo.prefetch_rag.decoder import OUTCOMES

    seen, reissues = set(), 0
    for hyper in ({"rho": 0.0}, {"rho": 1.0}, {"confirm_theta": 50.0}, {"tau": 1.0}):
        decoder = _decoder(setup, theta=0.0, tau=hyper.pop("tau", 0.0), delta=0.0, **hyper)
        for question in setup[-1]:
            trace = decoder.answer(question, "prefetch")
            assert len(trace.outcomes) == len(trace.spikes) and set(trace.outcomes) <= set(OUTCOMES)
            # served and unconfirmed spikes inserted a prefetch; the others, and the unconfirmed, retrieved again
            inserting = sum(trace.outcomes.count(o) for o in ("hit", "waited", "unconfirmed"))
            assert inserting == len(trace.inserted)
            fallbacks = sum(trace.outcomes.count(o) for o in ("unconfirmed", "stale", "none"))
            assert trace.retrievals == len(trace.issued) + fallbacks
            assert len(trace.blocks) == inserting + fallbacks
            seen |= set(trace.outcomes)
            assert decoder.answer(question, "prefetch_no_monitor").reissues == 0
            reissues += trace.reissues
    # rho 1 cancels, tau 1 never fires, 50 nats accept, theta 0 never confirms; delta 0 re-issues at every check
    assert {"stale", "none", "waited", "unconfirmed"} <= seen and reissues > 0


def test_rerank_text_inserts_the_block_sync_active_would(setup):
    # every spike served by a prefetch over the whole index: re-ranked with the text query, the block is
    # sync_active's, so the answer and its blocks are too; re-ranked with prefetch's own (combined) query they differ.
    # A constant head vector keeps every pair of combined queries at a positive cosine (rho 0 then accepts them all).
    n_docs = len(setup[2].texts)
    shared = {"theta": 0.0, "tau": 0.0, "rho": 0.0, "confirm": False, "candidates": n_docs, "delta": 9.0}
    constant = _vector("constant head")
    decoders = {rerank: _decoder(setup, **shared, rerank=rerank) for rerank in ("text", "query")}
    for decoder in decoders.values():
        decoder._head = lambda session, t: constant
    differs = False
    for question in setup[-1]:
        sync = _decoder(setup, **shared).answer(question, "sync_active")
        text, own = (decoders[rerank].answer(question, "prefetch") for rerank in ("text", "query"))
        assert text.served == len(text.spikes) == len(sync.spikes) > 0 and text.sync_retrievals == 0
        assert text.blocks == sync.blocks and text.tokens == sync.tokens
        differs |= own.blocks != sync.blocks
    assert differs
    with pytest.raises(ValueError, match="^rerank"):
        Hyper(rerank="combined")


def test_every_arm_runs_one_code_path(setup):
    decoder = _decoder(setup, theta=0.0)
    question = setup[-1][0]
    latencies = {arm: decoder.answer(question, arm).latency_ms for arm in ARMS}
    assert latencies["no_retrieval"] < latencies["sync_active"]
    single = decoder.answer(question, "single_shot")
    assert single.ttft_ms > decoder.answer(question, "sync_active").ttft_ms + 299  # waits for its retrieval


def test_wall_clock_runs_the_same_loop(setup):
    from zoo.prefetch_rag.clock import WallClock

    decoder = _decoder(setup, theta=0.0, tau=0.0)
    question = setup[-1][0]
    clock = WallClock(scale=0.01)
    try:
        wall = decoder.answer(question, "prefetch", clock=clock, batch=False)
    finally:
        clock.close()
    simulated = decoder.answer(question, "prefetch")
    assert wall.tokens == simulated.tokens
    assert wall.latency_ms > 0


def test_batched_forced_segments_match_token_by_token(setup):
    decoder = _decoder(setup, theta=0.0, tau=0.3)
    question = setup[-1][2]
    batched = decoder.answer(question, "prefetch", batch=True)
    single = decoder.answer(question, "prefetch", batch=False)
    assert batched.tokens == single.tokens
    assert batched.latency_ms == pytest.approx(single.latency_ms)


def _dedup_older(older, newest):
    out = []
    for text in older:
        if text not in newest and text not in out:
            out.append(text)
    return out


def test_keep_blocks_keeps_the_previous_block_next_to_the_new_one(setup):
    for question in setup[-1]:
        replace = _decoder(setup, theta=0.0).answer(question, "sync_active")
        assert len(replace.blocks) >= 2 and replace.context_docs == list(replace.blocks[-1])
        keep = _decoder(setup, theta=0.0, keep_blocks=2).answer(question, "sync_active")
        assert len(keep.blocks) >= 2
        assert keep.context_docs == _dedup_older(keep.blocks[-2], keep.blocks[-1]) + list(keep.blocks[-1])
        # prefill charges only the new blocks, as with the replace rule
        tokens = setup[0]
        assert keep.prefill_tokens == len(tokens.context([], question.question)) + sum(
            len(tokens.doc(t)) for block in keep.blocks for t in block
        )


def test_kept_blocks_never_overflow_the_positions(setup):
    tokens, _, _, predictor, head, questions = setup
    torch.manual_seed(1)
    lm = build_lm(LMConfig(vocab_size=1000, n_embd=32, n_layer=2, n_head=2, n_positions=256)).eval()
    long_docs = [" ".join(f"word{i}x{j}" for j in range(40)) for i in range(30)]  # 32 tokens each after the cut
    retriever = Retriever(long_docs, np.stack([_vector(d) for d in long_docs]))
    decoder = Decoder(lm, tokens, retriever, _vector, predictor, head, Hyper(theta=0.0, keep_blocks=4))
    for question in questions:
        trace = decoder.answer(question, "sync_active")  # would raise if the context ran past 256 positions
        assert len(trace.blocks) >= 3
        assert len(trace.context_docs) < 4 * 3  # the oldest kept documents were dropped to make room
        assert trace.context_docs[-3:] == list(trace.blocks[-1])


def test_confirm_off_serves_every_spike_with_a_valid_prefetch(setup):
    # theta 0: the entropy never falls to theta, so with the confirmation every inserted prefetch is followed by a
    # synchronous retrieval; without it (the spec's rule) an inserted prefetch serves its spike
    confirm, spec = (_decoder(setup, theta=0.0, tau=0.0, rho=0.0, confirm=c) for c in (True, False))
    for question in setup[-1]:
        strict, loose = confirm.answer(question, "prefetch"), spec.answer(question, "prefetch")
        assert strict.inserted and strict.served == 0 and strict.sync_retrievals == len(strict.spikes)
        assert loose.served == len(loose.inserted) > 0
        assert loose.sync_retrievals == len(loose.spikes) - loose.served


def test_confirm_theta_loosens_the_confirmation(setup):
    # with theta 0 the confirmation rejects every insertion; a confirm_theta above any entropy accepts every one,
    # token for token like the spec's rule, and 0 keeps theta's rule
    rule = dict(theta=0.0, tau=0.0, rho=0.0)
    spec = _decoder(setup, **rule, confirm=False)
    loose = _decoder(setup, **rule, confirm=True, confirm_theta=1e6)
    strict = _decoder(setup, **rule, confirm=True, confirm_theta=0.0)
    for question in setup[-1]:
        a, b = spec.answer(question, "prefetch"), loose.answer(question, "prefetch")
        assert a.tokens == b.tokens and a.served == b.served > 0 and a.latency_ms == b.latency_ms
        assert strict.answer(question, "prefetch").served == 0
    with pytest.raises(ValueError, match="confirm_theta"):
        Hyper(confirm_theta=-0.5)


def _recording_encoder():
    """An encoder that keeps every text it embeds (the queries the decoder built)."""
    seen = []

    def encoder(text):
        seen.append(text)
        return _vector(text)

    return encoder, seen


def test_query_question_puts_the_question_before_the_recent_answer_tokens(setup):
    tokens, lm, retriever, predictor, head, questions = setup
    encoder, seen = _recording_encoder()
    question = questions[0]
    hyper = Hyper(theta=0.0, query_tokens=4, query_question=True)
    decoder = Decoder(lm, tokens, retriever, encoder, predictor, head, hyper)
    trace = decoder.answer(question, "sync_active")
    assert trace.spikes and len(seen) == len(trace.spikes)
    for text, s in zip(seen, trace.spikes):
        tail = tokens.decode(trace.tokens[:s][-4:])
        assert text == f"{question.question} {tail}".strip()


def test_query_topic_puts_the_current_countrys_sentence_first(setup):
    # a multi-domain answer: before the switch the query starts with the intro, after it with the switch sentence
    # ("Next, consider <other>."), never with the question, which names both countries
    tokens, lm, retriever, predictor, head, questions = setup
    encoder, seen = _recording_encoder()
    question = next(q for q in questions if q.multi)
    intro, switch = (seg.text for seg in question.segments if seg.text.endswith(C.STOP) and not seg.is_slot)
    hyper = Hyper(theta=0.0, query_tokens=4, query_question=True, query_topic=True)
    trace = Decoder(lm, tokens, retriever, encoder, predictor, head, hyper).answer(question, "sync_active")
    assert len(seen) == len(trace.spikes) == len(question.slots)  # theta 0: every slot spikes
    for text, s in zip(seen, trace.spikes):
        topic = switch if trace.next_slot[s] >= len(question.slots) // 2 else intro
        assert text == f"{topic} {tokens.decode(trace.tokens[:s][-4:])}".strip()
        assert question.question not in text
    with pytest.raises(ValueError, match="query_topic .* set query_question"):
        Hyper(query_topic=True)


def test_monitor_anchor_head_measures_context_drift_not_the_query_mix(setup):
    # a constant head vector: the context never moves, so the head anchor never re-issues (as many retrievals as with
    # the monitor off: drift is at most 2); the spec's anchor (the in-flight query, here pure text: alpha 0) sits at
    # cosine ~0 to it and re-issues at every monitor check
    constant = _vector("constant head")
    retrievals = {}
    for anchor, delta in (("query", 2.0), ("query", 0.5), ("head", 0.5)):
        decoder = _decoder(setup, theta=0.0, tau=0.0, alpha=0.0, delta=delta, monitor_anchor=anchor)
        decoder._head = lambda session, t: constant
        retrievals[anchor, delta] = sum(decoder.answer(q, "prefetch").retrievals for q in setup[-1])
    assert retrievals["head", 0.5] == retrievals["query", 2.0] < retrievals["query", 0.5]
    with pytest.raises(ValueError, match="monitor_anchor"):
        Hyper(monitor_anchor="text")
