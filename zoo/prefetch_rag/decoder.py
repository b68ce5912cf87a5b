"""The asynchronous RAG decoder: one loop for every arm (no retrieval, single-shot, synchronous active RAG,
TeleRAG-like, PipeRAG-like, predictive prefetching and its ablations), on either clock.

Decoding protocol (R): the reference answer's text segments are *forced* (fed token by token as the LM's own
continuation; each costs a decode step) and the LM fills every slot greedily until it emits ``.`` (at most
``max_slot_tokens``). Only slot positions, where the LM chooses, are checked by the entropy trigger: a spike is a
slot position whose next-token entropy exceeds ``theta``. This is how held-out lead-ins reach the predictor: the
LM reads them, it did not write them.

At a spike, an arm with a pending prefetch checks it: if ``cos(q_prefetch, q_now) >= rho`` it waits for the
result (no wait when it is ready), inserts the ``top_docs`` candidates most similar to ``q_now`` (the prefetch
fetched ``candidates`` > ``top_docs``; re-ranking them costs dot products, no index access; ``Hyper.rerank="text"``
re-ranks with the synchronous baseline's text query instead) and rebuilds the KV
cache (documents charged as prefill). If the entropy is then at most ``theta`` (``Hyper.confirm_theta`` can loosen
that bound) the spike is *served* (a *hit* when the result was ready at the spike); otherwise, or without a valid
prefetch, it falls back to a synchronous retrieval with the text query (the sync baseline's). That entropy
confirmation (R, ``Hyper.confirm``, on by default) is ours; the spec's rule (``confirm=False``) lets a valid
prefetch serve its spike. Which of the two prefetch uses is a tuned choice (:data:`zoo.prefetch_rag.tune.GRIDS`).
On the first release's validation questions the spec's rule was 11% faster than sync_active but lost 15 EM points
(the prefetched blocks held the gold document at 39% of the spikes, the synchronous text query's at 59%).

Inserted blocks (R, ``keep_blocks``): each retrieval inserts a block of ``top_docs`` documents; the context keeps the
last ``keep_blocks`` blocks, oldest first and the newest next to the question (a document of an older block that
the new block holds again is kept once, in the new block). ``keep_blocks = 1`` is the replace rule of the first
sessions; with 2 a later slot that does not spike can still copy from the block before (a multi-domain answer's
second country no longer erases the first country's facts and vice versa). Only the new block's tokens are charged as
prefill (the kept blocks are a prefix of the old context, whose cache is reusable). If the blocks do not fit the
256 positions next to the question and the longest possible answer, the oldest kept documents are dropped first.
The value is chosen on validation with theta in the recipe's stage 2 (``PrefetchRAGModule.keep_grid``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from zoo.prefetch_rag import corpus as C
from zoo.prefetch_rag.clock import Handle, SimClock
from zoo.prefetch_rag.heads import check_positive, check_unit, combine, drift
from zoo.prefetch_rag.lm import Session, Tokens, entropy, window_features, window_hidden

RETRIEVAL = ("none", "single", "active")
PREFETCH = ("none", "predictor", "interval")
QUERIES = ("combined", "text", "stale")
# What happened at a spike: a ready prefetch served it (a hit), an in-flight one served it after a wait, one was
# inserted but the entropy stayed above the confirmation bound, one was cancelled as stale (cos < rho), none was
# pending. Every outcome but the first two ends in a synchronous retrieval.
OUTCOMES = ("hit", "waited", "unconfirmed", "stale", "none")


@dataclass
class Hyper:
    """The loop's constants (theta, tau, delta, rho, alpha, interval and staleness are tuned on validation).

    Args:
        theta: Entropy trigger (nats).
        tau: Predictor firing threshold.
        delta: Monitor drift threshold.
        rho: Minimum cosine between a prefetch's query and the query at the spike.
        alpha: Weight of the query head in the prefetch query.
        k: Predictor look-ahead (tokens).
        w: Feature window (tokens).
        monitor_every: Monitor period (tokens).
        top_docs: Documents inserted per retrieval.
        candidates: Documents a prefetch fetches (re-ranked at the spike).
        interval: TeleRAG/PipeRAG retrieval period (tokens).
        staleness: PipeRAG's query lag (tokens).
        query_tokens: Recent tokens in a text query.
        max_slot_tokens: Longest slot value (tokens before the stop; 8 covers 99.6% of the fact values: 14% of
            them are 5 tokens or more, 6% are 6 or more, so a cap of 4-5 would make them unanswerable for every arm).
        keep_blocks: Inserted document blocks kept in the context (1: a new block replaces the previous one).
        confirm: After inserting a valid prefetch, also require the entropy to fall to ``theta`` before the spike
            counts as served (else a synchronous retrieval follows); ``False`` is the spec's rule (a valid prefetch
            serves the spike).
        confirm_theta: Looser bound for that confirmation (R): a prefetch serves its spike when the entropy after
            insertion is at most ``max(theta, confirm_theta)`` (0: ``theta``). The trigger's theta is a bound for
            *firing*; as a bound for *accepting* it is strict when stage 2 chooses a low theta. On the third
            release's validation questions (theta 1.0) it served 64 of 343 inserted prefetches though 202 held the
            gold document; with 64 candidates, a bound of 2.0 accepts 62% of the insertions, 84% of them with the
            gold document (sync_active's own retrieval finds it at 86% of its spikes).
        monitor_anchor: What the ContextMonitor's head vector ``c_t`` is compared with: ``"query"`` (the spec: the
            in-flight query) or ``"head"`` (R: the head's vector when the prefetch was issued). The in-flight query
            mixes the head with the text query, so with ``"query"`` the drift of an unchanged context is about
            ``1 - cos(q_h, q)``, which grows as alpha falls (at alpha 0.2 it is near the spec's delta 0.35 and the
            monitor re-issues every few tokens); ``"head"`` measures only how far the context moved.
        query_question: Text queries start with the question (which names the country) and end with the last
            ``query_tokens`` answer tokens (the recipe's choice, with 16 tokens); ``False`` (the spec's query)
            embeds the last ``query_tokens`` tokens of question and answer together, which past the first slot
            sentence no longer hold the country (long lead-ins say "its"): on validation the gold document is in
            that query's top 3 at 61% of the slots, 85% with the question first (16 answer tokens), 100% with an
            oracle "<attribute> of <country>" query.
        query_topic: With ``query_question``, the query starts with the answer's latest topic sentence (R: a forced
            sentence of the answer, here its intro or its switch "Next, consider <country>.") instead of the
            question, falling back to the question before the first one. The question of a multi-domain answer names
            both countries, so its query fetches both countries' documents of an attribute (a validation
            diagnostic of sync_active's runs: 464 of 603 blocks that held the gold document, EM 0.33 there against
            0.58 without the other country's document); the topic sentence names only the current one. On the
            validation set it lifts sync_active's em_multi from 0.335 to 0.549 (published LM, stage 2 re-chosen);
            default off until a release refits and tunes with it.
        rerank: Which query re-ranks a prefetch's candidates at its spike (R): ``"query"``, the arm's own query there
            (the combined head + text query for prefetch), or ``"text"``, the synchronous baseline's text query, so
            that a prefetch whose candidates hold sync_active's documents inserts the block sync_active would.
    """

    theta: float = 1.0
    tau: float = 0.5
    delta: float = 0.35
    rho: float = 0.6
    alpha: float = 0.5
    k: int = 12
    w: int = 8
    monitor_every: int = 4
    top_docs: int = 3
    candidates: int = 8
    interval: int = 16
    staleness: int = 16
    query_tokens: int = 32
    max_slot_tokens: int = 8
    keep_blocks: int = 1
    confirm: bool = True
    confirm_theta: float = 0.0
    monitor_anchor: str = "query"
    query_question: bool = False
    query_topic: bool = False
    rerank: str = "query"

    def __post_init__(self) -> None:
        for name in ("tau", "rho", "alpha"):
            check_unit(name, getattr(self, name))
        for name in (
            "k",
            "w",
            "monitor_every",
            "top_docs",
            "candidates",
            "interval",
            "query_tokens",
            "max_slot_tokens",
            "keep_blocks",
        ):
            check_positive(name, getattr(self, name))
        if self.theta < 0:
            raise ValueError(f"theta must be >= 0, got {self.theta}")
        if self.confirm_theta < 0:
            raise ValueError(f"confirm_theta must be >= 0, got {self.confirm_theta}")
        if self.delta < 0:
            raise ValueError(f"delta must be >= 0, got {self.delta}")
        if self.staleness < 0:
            raise ValueError(f"staleness must be >= 0, got {self.staleness}")
        if self.rerank not in ("query", "text"):
            raise ValueError(f"rerank must be 'query' or 'text', got {self.rerank!r}")
        if self.monitor_anchor not in ("query", "head"):
            raise ValueError(f"monitor_anchor must be 'query' or 'head', got {self.monitor_anchor!r}")
        if self.query_topic and not self.query_question:
            raise ValueError("query_topic replaces the question at the head of the query: set query_question too")


def question_query(question: str, tail: str) -> str:
    """The question-first text query (``Hyper.query_question``): the question, then the recent answer text ``tail``."""
    return f"{question} {tail}".strip()


@dataclass(frozen=True)
class Arm:
    """What an arm does: when it retrieves, when it prefetches, which query, whether the monitor runs."""

    retrieval: str = "active"
    prefetch: str = "none"
    query: str = "combined"
    monitor: bool = False
    alpha: float | None = None  # overrides Hyper.alpha (the no-query-head ablation: 0)
    interval: int | None = None  # overrides Hyper.interval (the no-predictor ablation: 16)

    def __post_init__(self) -> None:
        if self.retrieval not in RETRIEVAL or self.prefetch not in PREFETCH or self.query not in QUERIES:
            raise ValueError(f"bad arm {self}")


ARMS: dict[str, Arm] = {
    "no_retrieval": Arm(retrieval="none"),
    "single_shot": Arm(retrieval="single"),
    "sync_active": Arm(),
    "telerag": Arm(prefetch="interval", query="text"),
    "piperag": Arm(prefetch="interval", query="stale"),
    "prefetch": Arm(prefetch="predictor", query="combined", monitor=True),
    "prefetch_no_predictor": Arm(prefetch="interval", query="combined", monitor=True, interval=16),
    "prefetch_no_query_head": Arm(prefetch="predictor", query="combined", monitor=True, alpha=0.0),
    "prefetch_no_monitor": Arm(prefetch="predictor", query="combined", monitor=False),
}


@dataclass
class Pending:
    query: np.ndarray
    handle: Handle
    issued_at: int
    anchor: np.ndarray  # what the monitor compares with (Hyper.monitor_anchor): the query or the head's vector


@dataclass
class Trace:
    """What one answer cost and produced."""

    predicted: list[str] = field(default_factory=list)
    gold: list[str] = field(default_factory=list)
    latency_ms: float = 0.0
    ttft_ms: float = 0.0
    spikes: list[int] = field(default_factory=list)  # answer positions of the spikes
    outcomes: list[str] = field(default_factory=list)  # per spike, one of OUTCOMES
    reissues: int = 0  # prefetches the monitor cancelled and issued again
    leads: list[int] = field(default_factory=list)  # per spike: tokens since the first prefetch for it (0: none)
    retrievals: int = 0
    prefill_tokens: int = 0
    wait_ms: float = 0.0  # time the answer stood blocked on retrievals (what a perfect prefetcher would hide)
    issued: list[Handle] = field(default_factory=list)
    cancelled: list[Handle] = field(default_factory=list)
    inserted: list[Handle] = field(default_factory=list)
    probs: list[float] = field(default_factory=list)  # predictor output per answer position (when computed)
    features: list[torch.Tensor] = field(default_factory=list)
    head_inputs: list[torch.Tensor] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    blocks: list[tuple[str, ...]] = field(default_factory=list)  # every inserted block, in order
    context_docs: list[str] = field(default_factory=list)  # the documents in the context at the end
    next_slot: list[int] = field(default_factory=list)  # per answer position: index of the slot it leads to (-1)

    @property
    def correct(self) -> list[bool]:
        return [p == g for p, g in zip(self.predicted, self.gold, strict=True)]

    @property
    def hits(self) -> int:
        """Spikes served by a prefetch that was ready."""
        return self.outcomes.count("hit")

    @property
    def served(self) -> int:
        """Spikes served by a prefetch, ready or waited for."""
        return self.hits + self.outcomes.count("waited")

    @property
    def sync_retrievals(self) -> int:
        """Spikes that fell back to a synchronous retrieval (every outcome but a served one)."""
        return len(self.outcomes) - self.served


class Decoder:
    """Runs the loop for one arm.

    Args:
        lm: The ``GPT2LMHeadModel`` (eval mode).
        tokens: Tokenizer wrapper.
        retriever: The index.
        encoder: Text -> 384-d MiniLM embedding (cached).
        predictor: RetrievalPredictor (needed by predictor arms and by ``record``).
        query_head: QueryGenerator (needed by combined queries and the monitor).
        hyper: The constants.
    """

    def __init__(self, lm, tokens: Tokens, retriever, encoder, predictor=None, query_head=None, hyper=None):
        self.lm, self.tokens, self.retriever, self.encoder = lm, tokens, retriever, encoder
        self.predictor, self.query_head = predictor, query_head
        self.hyper = hyper or Hyper()

    # ------------------------------------------------------------------ queries

    def _text(self, session: Session, t: int, lag: int = 0) -> np.ndarray:
        """MiniLM embedding of the last ``query_tokens`` tokens up to answer position ``t`` (``lag`` tokens earlier);
        with ``Hyper.query_question`` the question, then the last ``query_tokens`` answer tokens."""
        if self.hyper.query_question:
            end = max(0, t + 1 - lag)
            answer = session.answer[:end]
            tail = self.tokens.decode(answer[-self.hyper.query_tokens :])
            head = self._question
            if self.hyper.query_topic:  # the latest topic sentence complete by then
                head = next((text for stop, text in reversed(self._topics) if stop <= end), head)
            return self.encoder(question_query(head, tail))
        ids = list(self.tokens.cached(self._question)) + session.answer[: t + 1]
        ids = ids[: max(1, len(ids) - lag)] if lag else ids
        return self.encoder(self.tokens.decode(ids[-self.hyper.query_tokens :]))

    def _head(self, session: Session, t: int) -> np.ndarray:
        with torch.no_grad():
            return self.query_head(window_hidden(session.signals, t, self.hyper.w)).numpy()

    def _query(self, arm: Arm, session: Session, t: int, head: np.ndarray | None = None) -> np.ndarray:
        """The arm's retrieval query at answer position ``t`` (``head``: the head's vector there, if computed)."""
        if arm.query == "stale":
            return self._text(session, t, lag=self.hyper.staleness)
        alpha = self.hyper.alpha if arm.alpha is None else arm.alpha
        if arm.query == "text" or alpha == 0.0:
            return self._text(session, t)
        return combine(self._head(session, t) if head is None else head, self._text(session, t), alpha)

    # ------------------------------------------------------------------ loop

    def answer(self, question: C.Question, arm: Arm | str, clock=None, batch: bool = True, record: bool = False):
        """Decode one answer.

        Args:
            question: The question and its reference segments.
            arm: An :class:`Arm` or a name in :data:`ARMS`.
            clock: :class:`SimClock` (default) or :class:`WallClock`.
            batch: Feed each forced segment in one forward (the simulated clock still charges every token);
                ``False`` feeds token by token (the wall clock needs it).
            record: Keep the predictor's features and output at every position (training data, AUROC).
        """
        arm = ARMS[arm] if isinstance(arm, str) else arm
        hp = self.hyper
        if (arm.prefetch == "predictor" or record) and self.predictor is None:
            raise ValueError("this arm needs a predictor")
        if (arm.query == "combined" or arm.monitor) and arm.retrieval == "active" and self.query_head is None:
            raise ValueError("this arm needs a query head")
        clock = clock or SimClock()
        clock.start()
        self._question = question.question
        self._topics: list[tuple[int, str]] = []  # (answer length once fed, text) of the answer's topic sentences
        trace = Trace()
        docs: list[str] = []

        def wait(handle: Handle):
            before = clock.now
            result = clock.wait(handle)
            trace.wait_ms += clock.now - before
            return result

        if arm.retrieval == "single":
            q = self.encoder(question.question)
            ids, _ = wait(clock.submit(lambda: self.retriever.search(q, hp.top_docs)))
            trace.retrievals += 1
            docs = [self.retriever.texts[i] for i in ids]
        session = Session(self.lm, self.tokens.context(docs, question.question))
        trace.prefill_tokens = session.start()
        clock.prefill(trace.prefill_tokens)
        state = {"pending": None, "first_fire": None}
        # room for the documents: the positions left by the question and the longest answer the loop can produce
        longest = sum(
            hp.max_slot_tokens + 1 if seg.is_slot else len(self.tokens.segment(seg, first=i == 0))
            for i, seg in enumerate(question.segments)
        )
        doc_room = self.lm.config.n_positions - longest - len(self.tokens.context([], question.question))
        interval = arm.interval or hp.interval

        def issue(t: int) -> None:
            head = self._head(session, t) if arm.monitor and hp.monitor_anchor == "head" else None
            q = self._query(arm, session, t, head)  # the head's vector is computed once, for query and anchor
            handle = clock.submit(lambda: self.retriever.search(q, hp.candidates))
            state["pending"] = Pending(q, handle, t, q if head is None else head)
            trace.issued.append(handle)
            trace.retrievals += 1
            if state["first_fire"] is None:
                state["first_fire"] = t

        def cancel() -> None:
            clock.cancel(state["pending"].handle)
            trace.cancelled.append(state["pending"].handle)
            state["pending"] = None

        def after_token(t: int) -> None:
            need_features = record or arm.prefetch == "predictor"
            if need_features:
                features = window_features(session.signals, t, hp.w)
                prob = float(self.predictor.probability(features[None])[0])
                if record:
                    trace.features.append(features)
                    trace.head_inputs.append(window_hidden(session.signals, t, hp.w))
                    trace.probs.append(prob)
            if arm.retrieval != "active":
                return
            if arm.prefetch == "predictor" and state["pending"] is None and prob > hp.tau:
                issue(t)
            elif arm.prefetch == "interval" and (t + 1) % interval == 0:
                if state["pending"] is not None:
                    cancel()
                issue(t)
            elif arm.monitor and state["pending"] is not None and (t + 1) % hp.monitor_every == 0:
                c = self._head(session, t)
                if drift(c, state["pending"].anchor) > hp.delta:
                    cancel()
                    issue(t)
                    trace.reissues += 1

        def feed(ids: list[int], slot_index: int) -> None:
            trace.next_slot += [slot_index] * len(ids)
            chunks = [ids] if batch else [[i] for i in ids]
            for chunk in chunks:
                first = len(session.answer)
                session.extend(chunk)
                for t in range(first, first + len(chunk)):
                    clock.decode()
                    if t == 0:
                        trace.ttft_ms = clock.now
                    after_token(t)

        def insert(doc_ids) -> None:
            texts = [self.retriever.texts[i] for i in doc_ids]
            kept: list[str] = []  # the documents of the last keep_blocks - 1 blocks that the new one lacks
            for block in trace.blocks[max(0, len(trace.blocks) - hp.keep_blocks + 1) :]:
                kept += [text for text in block if text not in texts and text not in kept]
            trace.blocks.append(tuple(texts))
            size = {text: len(self.tokens.doc(text)) for text in kept + texts}
            new = sum(size[text] for text in texts)
            used = sum(size[text] for text in kept)
            while kept and used + new > doc_room:
                used -= size[kept.pop(0)]
            docs[:] = kept + texts
            session.rebuild(self.tokens.context(docs, question.question))
            trace.prefill_tokens += new
            clock.prefill(new)

        def spike(s: int) -> None:
            trace.spikes.append(s)
            first = state["first_fire"]
            trace.leads.append(s - first if first is not None else 0)
            state["first_fire"] = None
            pending = state["pending"]
            served, outcome = False, "none"
            if pending is not None:
                q_now = self._query(arm, session, s - 1)
                if float(pending.query @ q_now) >= hp.rho:
                    was_ready = clock.ready(pending.handle)
                    ids, _ = wait(pending.handle)
                    q_rank = self._text(session, s - 1) if hp.rerank == "text" else q_now
                    insert(self.retriever.rerank(ids, q_rank, hp.top_docs))
                    trace.inserted.append(pending.handle)
                    state["pending"] = None
                    outcome = "unconfirmed"
                    if not hp.confirm or float(entropy(session.logits)) <= max(hp.theta, hp.confirm_theta):
                        served, outcome = True, "hit" if was_ready else "waited"
                else:
                    cancel()
                    outcome = "stale"
            trace.outcomes.append(outcome)
            if not served:
                q = self._text(session, s - 1)
                ids, _ = wait(clock.submit(lambda: self.retriever.search(q, hp.top_docs)))
                trace.retrievals += 1
                insert(ids)

        n_slots, slot_index = len(question.slots), 0
        for i, segment in enumerate(question.segments):
            if not segment.is_slot:
                feed(self.tokens.segment(segment, first=i == 0), slot_index if slot_index < n_slots else -1)
                if segment.text.endswith(C.STOP):  # a whole forced sentence: the intro or a switch
                    self._topics.append((len(session.answer), segment.text))
                continue
            generated: list[int] = []
            slot_start = len(session.answer)
            spiked = False  # a slot triggers at most one spike
            for _ in range(hp.max_slot_tokens):
                if arm.retrieval == "active" and not spiked and float(entropy(session.logits)) > hp.theta:
                    spike(len(session.answer))
                    spiked = True
                token = int(session.logits.argmax())
                feed([token], slot_index)
                generated.append(token)
                if token == self.tokens.stop:
                    break
            if generated[-1] != self.tokens.stop:
                feed([self.tokens.stop], slot_index)
            else:
                generated = generated[:-1]
            trace.predicted.append(self.tokens.decode(generated).strip())
            trace.gold.append(segment.text)
            slot_index += 1
            if state["first_fire"] is not None and state["first_fire"] < slot_start:
                state["first_fire"] = None  # a fire before a slot that did not spike is no lead for a later spike
        if state["pending"] is not None:
            cancel()
        trace.latency_ms = clock.now
        trace.tokens = list(session.answer)
        trace.context_docs = list(docs)
        return trace
