"""Run one arm of the decoder over a question set and summarise it (EM, latency, TTFT, hit rates, AUROC)."""

from __future__ import annotations

import numpy as np

from zoo.prefetch_rag.decoder import OUTCOMES
from zoo.prefetch_rag.heads import spike_labels


def _rate(numerator: float, denominator: float) -> float:
    return float(numerator / denominator) if denominator else float("nan")


def summarise(questions, traces, k: int | None = None) -> dict[str, float]:
    """Metrics of one arm over ``questions`` and their ``traces`` (same order).

    ``em`` is slot exact match on the single-domain questions, ``em_multi`` on the multi-domain ones, ``em_short``
    on the questions with short lead-ins; hit rates are hits per spike on the same groups; latencies are means over
    all questions, ``retrieval_wait_ms_mean`` the part of the latency spent blocked on retrievals (what a perfect
    prefetcher would hide); for the prefetching arms ``spikes_<outcome>`` is the share of spikes with each
    :data:`~zoo.prefetch_rag.decoder.OUTCOMES` and ``reissues_mean`` the monitor's re-issues per answer. With ``k``
    and recorded predictor outputs, ``predictor_auroc`` scores the outputs against the spike labels of the traces
    (sklearn ``roc_auc_score``).
    """
    out: dict[str, float] = {}
    groups = {
        "": [i for i, q in enumerate(questions) if not q.multi],
        "_multi": [i for i, q in enumerate(questions) if q.multi],
        "_short": [i for i, q in enumerate(questions) if q.short],
        "_all": list(range(len(questions))),
    }
    for suffix, rows in groups.items():
        slots = [c for i in rows for c in traces[i].correct]
        spikes = sum(len(traces[i].spikes) for i in rows)
        out[f"em{suffix}"] = _rate(sum(slots), len(slots))
        out[f"hit_rate{suffix}"] = _rate(sum(traces[i].hits for i in rows), spikes)
    out["multi_domain_hit_rate"] = out.pop("hit_rate_multi")
    out["latency_ms_mean"] = float(np.mean([t.latency_ms for t in traces]))
    out["ttft_ms_mean"] = float(np.mean([t.ttft_ms for t in traces]))
    out["spikes_mean"] = float(np.mean([len(t.spikes) for t in traces]))
    out["retrievals_mean"] = float(np.mean([t.retrievals for t in traces]))
    out["retrieval_wait_ms_mean"] = float(np.mean([t.wait_ms for t in traces]))
    out["served_rate"] = _rate(sum(t.served for t in traces), sum(len(t.spikes) for t in traces))
    if any(t.issued for t in traces):  # the prefetching arms: where each spike's retrieval came from
        outcomes = [o for t in traces for o in t.outcomes]
        for outcome in OUTCOMES:
            out[f"spikes_{outcome}"] = _rate(outcomes.count(outcome), len(outcomes))
        out["reissues_mean"] = float(np.mean([t.reissues for t in traces]))
    leads = [lead for t in traces for lead in t.leads]
    out["lead_time_median"] = float(np.median(leads)) if leads else float("nan")
    if k is not None and all(t.probs for t in traces):
        from sklearn.metrics import roc_auc_score

        labels, probs = [], []
        for t in traces:
            spikes = np.zeros(len(t.tokens), dtype=bool)
            spikes[[s for s in t.spikes if s < len(spikes)]] = True
            labels.append(spike_labels(spikes, k))
            probs.append(np.asarray(t.probs))
        y, p = np.concatenate(labels), np.concatenate(probs)
        out["predictor_auroc"] = float(roc_auc_score(y, p)) if 0 < y.sum() < len(y) else float("nan")
    return out


def run_arm(
    decoder,
    questions,
    arm: str,
    clock_factory=None,
    batch: bool = True,
    record: bool = False,
    traces: list | None = None,
):
    """Decode every question with ``arm``; returns :func:`summarise`'s metrics.

    Args:
        decoder: A :class:`zoo.prefetch_rag.decoder.Decoder`.
        questions: The question set.
        arm: An arm name.
        clock_factory: Makes the clock (default: a simulated clock per answer).
        batch: Feed forced segments in one forward (simulated clock only).
        record: Record the predictor's outputs (adds ``predictor_auroc``).
        traces: A list that receives every answer's :class:`~zoo.prefetch_rag.decoder.Trace`.
    """
    clock = clock_factory() if clock_factory is not None else None
    kept = traces if traces is not None else []
    try:
        kept += [decoder.answer(q, arm, clock=clock, batch=batch, record=record) for q in questions]
    finally:
        if clock is not None:
            clock.close()
    return summarise(questions, kept, decoder.hyper.k if record else None)


def oracle_em(module, questions, max_docs: int = 3) -> float:
    """Slot EM with the gold documents of the first ``max_docs`` slots in context and no retrieval: whether the
    LM copies from its context at all (the diagnostic of the issue note; no index or MiniLM needed)."""
    import torch

    from zoo.prefetch_rag import corpus as C
    from zoo.prefetch_rag.lm import Session

    tokens, hits, total = module.tokens, 0, 0
    with torch.no_grad():
        for question in questions:
            docs = [C.fact_document(s.country, s.attribute) for s in question.slots][:max_docs]
            session = Session(module.lm, tokens.context(docs, question.question))
            session.start()
            for i, segment in enumerate(question.segments):
                if not segment.is_slot:
                    session.extend(tokens.segment(segment, first=i == 0))
                    continue
                generated: list[int] = []
                for _ in range(8):
                    token = int(session.logits.argmax())
                    session.extend([token])
                    if token == tokens.stop:
                        break
                    generated.append(token)
                if generated and len(generated) == 8:
                    session.extend([tokens.stop])
                hits += tokens.decode(generated).strip() == segment.text
                total += 1
    return hits / max(total, 1)
