"""Validation diagnostics of the headroom gates (issue 20): per ``keep_blocks`` value, the synchronous baseline's EM
on the single- and multi-domain validation questions, its spikes per answer, its retrieval recall (the share of
spiked slots whose inserted block holds the slot's gold document) and its EM with and without the gold document
there; the same for single_shot (gold among the question's documents); oracle EM (the gold documents of the first 3
slots in context, no retrieval). Retrieval or copying: which one limits the gates. Validation questions only; the
test split is never read. The questions are the declared validation set's (zoo.prefetch_rag.data: 120 single- and
180 multi-domain since 2026-12-04; smaller counts give a prefix of each part).

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/prefetch_rag_headroom_diag.py
        runs/prefetch_rag.countries/pretrained [--n-single 30 --n-multi 60 --keep 1 2]

Loads checkpoints from before the ``keep_blocks`` buffer too (missing keys: the buffer's default).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict


def load(folder: str):
    import zoo

    try:
        return zoo.load_folder(folder)
    except Exception:  # noqa: BLE001 -- an older checkpoint (val_questions, no keep_blocks buffer)
        from pathlib import Path

        from safetensors.torch import load_file

        from zoo.prefetch_rag.clock import ClockConstants
        from zoo.prefetch_rag.decoder import Hyper
        from zoo.prefetch_rag.lm import LMConfig
        from zoo.prefetch_rag.module import PrefetchRAGModule

        config = json.loads((Path(folder) / "config.json").read_text())
        args = dict(config["init_args"])
        args.pop("val_questions", None)
        args["lm"], args["hyper"] = LMConfig(**args["lm"]), Hyper(**args["hyper"])
        args["clock"] = ClockConstants(**args["clock"]) if args.get("clock") else None
        module = PrefetchRAGModule(**args)
        missing, unexpected = module.load_state_dict(load_file(str(Path(folder) / "model.safetensors")), strict=False)
        assert set(missing) <= {"keep_blocks"} and not unexpected, (missing, unexpected)
        module.import_files(folder)
        module.stage2 = config.get("metadata", {}).get("stage2", {})
        return module


def main() -> None:
    import torch

    from zoo.prefetch_rag import corpus as C
    from zoo.prefetch_rag.data import VAL_MULTI, VAL_SINGLE, validation_questions
    from zoo.prefetch_rag.index import TextEncoder, build_retriever
    from zoo.prefetch_rag.scoring import oracle_em, run_arm

    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--n-single", type=int, default=VAL_SINGLE)
    parser.add_argument("--n-multi", type=int, default=VAL_MULTI)
    parser.add_argument("--keep", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--oracle", type=int, default=20, help="validation questions for oracle EM (0: skip)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    module = load(args.folder)
    retriever, encoder = build_retriever(), TextEncoder()
    questions = validation_questions(args.n_single, args.n_multi)
    base = module.decoder(retriever, encoder).hyper
    out = {"theta": base.theta, "keep_blocks_stored": base.keep_blocks, "by_keep": {}}

    def gold(question, slot_index):
        slot = question.slots[slot_index]
        return C.fact_document(slot.country, slot.attribute)

    def table(counts):  # group -> [gold there & correct, gold there, gold absent & correct, gold absent]
        out = {}
        for group, (hit_ok, hit, miss_ok, miss) in counts.items():
            out[f"recall_{group}"] = round(hit / max(1, hit + miss), 4)
            out[f"em_given_gold_{group}"] = round(hit_ok / max(1, hit), 4)
            out[f"em_given_no_gold_{group}"] = round(miss_ok / max(1, miss), 4)
        return out

    from zoo.prefetch_rag.decoder import Hyper

    for keep in args.keep:
        decoder = module.decoder(retriever, encoder, Hyper(**{**asdict(base), "keep_blocks": keep}))
        traces: list = []
        metrics = run_arm(decoder, questions, "sync_active", traces=traces)
        counts = {"single": [0, 0, 0, 0], "multi": [0, 0, 0, 0]}
        for question, trace in zip(questions, traces, strict=True):  # spiked slots: gold in the block inserted there
            group = counts["multi" if question.multi else "single"]
            for s, block in zip(trace.spikes, trace.blocks, strict=True):
                i = trace.next_slot[s]
                there = gold(question, i) in block
                group[0 if there else 2] += trace.correct[i]
                group[1 if there else 3] += 1
        out["by_keep"][keep] = {
            "em": round(metrics["em"], 4),
            "em_multi": round(metrics["em_multi"], 4),
            "em_all": round(metrics["em_all"], 4),
            "latency_ms_mean": round(metrics["latency_ms_mean"], 1),
            "spikes_mean": round(metrics["spikes_mean"], 2),
            **table(counts),
        }
        print("sync_active keep", keep, out["by_keep"][keep], flush=True)
    traces = []
    metrics = run_arm(module.decoder(retriever, encoder), questions, "single_shot", traces=traces)
    counts = {"single": [0, 0, 0, 0], "multi": [0, 0, 0, 0]}
    for question, trace in zip(questions, traces, strict=True):  # every slot: gold among the question's documents
        group = counts["multi" if question.multi else "single"]
        for i, correct in enumerate(trace.correct):
            there = gold(question, i) in trace.context_docs
            group[0 if there else 2] += correct
            group[1 if there else 3] += 1
    out["single_shot"] = {"em": round(metrics["em"], 4), "em_multi": round(metrics["em_multi"], 4), **table(counts)}
    print("single_shot", out["single_shot"], flush=True)
    if args.oracle:
        out["oracle_em"] = round(oracle_em(module, validation_questions(args.oracle, 0)), 4)
    out["seconds"] = round(time.perf_counter() - start, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
