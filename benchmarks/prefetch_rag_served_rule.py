"""Validation diagnostic of the prefetch arms' served rule and of the latency ceiling (issue 20; test split never read).

For the published checkpoint with its tuned constants (zoo/prefetch_rag/tuning.json), on the declared validation set
(120 single- + 180 multi-domain questions since 2026-12-04; 30 + 60 before): sync_active, prefetch and
prefetch_no_monitor with our entropy confirmation (``Hyper.confirm``) and with the spec's rule (a valid prefetch
serves its spike), whichever of the two tuning.json chose, and no_retrieval; per arm EM, latency, hit and served
rates, synchronous retrievals, and the share of spikes whose inserted block holds the slot's gold document (where
every spike inserted exactly one block). Last line: the ceiling of any prefetcher, ``1 - (sync latency - 300 ms x sync
retrievals) / sync latency`` (every retrieval hidden).

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/prefetch_rag_served_rule.py [--query-question]   # ~6 min

Session 2026-12-04 (published checkpoint): sync_active EM 0.350 (all) at 2807 ms, gold in block 0.59; prefetch
(confirm) 0.314 at 2819 ms, hit rate 0.011, served 0.61; prefetch (spec rule) 0.203 at 2495 ms, gold 0.39;
prefetch_no_monitor (spec rule) 0.219 at 2364 ms, hit rate 0.26; no_retrieval 1969 ms; ceiling 0.300.
"""

import argparse
import json
import time
from dataclasses import replace

import numpy as np
import torch

import zoo
from zoo.prefetch_rag import corpus as C
from zoo.prefetch_rag.clock import ClockConstants
from zoo.prefetch_rag.data import validation_questions
from zoo.prefetch_rag.index import TextEncoder, build_retriever
from zoo.prefetch_rag.scoring import run_arm
from zoo.prefetch_rag.tune import chosen_hyper


def gold_in_block(questions, traces) -> float:
    """Share of spikes whose inserted block holds the slot's gold document (NaN unless one block per spike)."""
    if not all(len(t.blocks) == len(t.spikes) for t in traces):
        return float("nan")
    found = [
        C.fact_document(q.slots[t.next_slot[s]].country, q.slots[t.next_slot[s]].attribute) in block
        for q, t in zip(questions, traces)
        for s, block in zip(t.spikes, t.blocks)
    ]
    return float(np.mean(found)) if found else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query-question", action="store_true", help="question-first text queries")
    args = parser.parse_args()
    torch.set_num_threads(1)
    module = zoo.load("prefetch_rag", pretrained=True)
    retriever, encoder = build_retriever(), TextEncoder()
    questions = validation_questions()
    base = chosen_hyper(module.decoder(retriever, encoder).hyper, arm="prefetch")
    base = replace(base, query_question=args.query_question)
    confirm, spec = replace(base, confirm=True), replace(base, confirm=False)
    runs = [
        ("sync_active", "sync_active", base),
        ("prefetch_confirm", "prefetch", confirm),
        ("prefetch_spec_rule", "prefetch", spec),
        ("prefetch_no_monitor_confirm", "prefetch_no_monitor", confirm),
        ("prefetch_no_monitor_spec_rule", "prefetch_no_monitor", spec),
        ("no_retrieval", "no_retrieval", base),
    ]
    keys = ("em", "em_multi", "em_all", "latency_ms_mean", "hit_rate", "served_rate", "retrievals_mean")
    out = {}
    for name, arm, hyper in runs:
        start, traces = time.perf_counter(), []
        metrics = run_arm(module.decoder(retriever, encoder, hyper), questions, arm, traces=traces)
        out[name] = {k: round(metrics[k], 4) for k in keys}
        out[name]["sync_retrievals_mean"] = round(float(np.mean([t.sync_retrievals for t in traces])), 4)
        out[name]["gold_in_block"] = round(gold_in_block(questions, traces), 3)
        out[name]["seconds"] = round(time.perf_counter() - start, 1)
        print(name, json.dumps(out[name]), flush=True)
    sync, retrieval_ms = out["sync_active"], ClockConstants().retrieval_ms
    ceiling = retrieval_ms * sync["sync_retrievals_mean"] / sync["latency_ms_mean"]
    print(json.dumps({"ceiling_latency_saving": round(ceiling, 4)}))


if __name__ == "__main__":
    main()
