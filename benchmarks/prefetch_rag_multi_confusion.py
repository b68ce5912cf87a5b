"""Why sync_active is weak on multi-domain answers (issue 20's em_multi headroom): retrieval or copying?

For every slot of the declared validation set (120 single- + 180 multi-domain questions, val countries, val lead-ins;
test questions are never used) this follows sync_active's run of the published checkpoint: did the slot spike, did
the block inserted at that spike hold the slot's gold document, did it also hold the *rival* document (the same
attribute of the answer's other country), and did the LM copy the right value, or the rival's?

    .venv/bin/python benchmarks/prefetch_rag_multi_confusion.py [--topic]   # 45 s, 1 thread

``--topic`` decodes with ``Hyper.query_topic`` (the answer's latest topic sentence instead of the question).

2026-12-04, third release (checkpoint theta 1.0 / keep_blocks 1; held-out lead-in pools of 2 + 1 sentences per
attribute, so a run after the fourth release, with 6 + 2, gives other numbers):

| questions | slots | gold in block | + rival too | EM with / without rival | said the rival's | gold missing |
|---|---|---|---|---|---|---|
| single-domain | 480 | 459 | 0 | - / 0.599 | - | 15 |
| multi-domain | 720 | 603 | 464 | 0.332 / 0.576 | 154 | 110 (first country 40, second 70) |
| single, ``--topic`` | 480 | 450 | 0 | - / 0.593 | - | 23 |
| multi, ``--topic`` | 720 | 690 | 6 | 0.167 / 0.572 | 1 + 24 | 20 |

Copying is as good in multi-domain answers as in single-domain ones when the block holds one country's document
(0.576 vs 0.599), but three blocks in four hold both countries' documents of the attribute, because the text query
starts with the question, which names both countries (Hyper.query_question, chosen in the second release for
single-domain recall); then the LM reads "its" as the wrong country a third of the time. Checked with
``query_question=False`` (the last 16 answer tokens only): the rival document is then in 3 of 201 blocks that hold
the gold one, but the gold document falls out of most blocks (single-domain 94 of 480: the lead-ins say "its").
Retrieval misses add 110 slots, most of them (89) filled with another slot's gold document. Two levers follow: a
query that names only the current country (e.g. the answer's latest intro or switch sentence instead of the
question), or LM training sequences whose distractors include the rival document of a multi-domain answer.
The first is ``Hyper.query_topic`` (rows ``--topic``): the rival document leaves the blocks (6 of 690), misses fall
from 110 to 20, and multi-domain slots are copied as well as single-domain ones (0.572 vs 0.593). On the declared
validation set with stage 2 re-chosen (theta 1.0 / keep_blocks 1 either way), sync_active's em_multi rises from 0.335
to 0.549 (single_shot 0.190: headroom +14.4 -> +35.8; EM 0.585 -> 0.571), and with held-out pools of 6 + 2 from
0.201 to 0.375 (single_shot 0.1375: +6.4 -> +23.8; EM 0.340 -> 0.373). The fourth release's recipe sets it.
"""

from __future__ import annotations

import collections
import sys
from dataclasses import replace

import torch

import zoo
from zoo.prefetch_rag import corpus as C
from zoo.prefetch_rag.data import validation_questions
from zoo.prefetch_rag.index import TextEncoder, build_retriever


def main() -> None:
    torch.set_num_threads(1)
    retriever, encoder = build_retriever(), TextEncoder()
    module = zoo.load("prefetch_rag", pretrained=True).eval()
    decoder = module.decoder(retriever, encoder)
    decoder.hyper = replace(decoder.hyper, query_topic="--topic" in sys.argv)  # the checkpoint's own since release 4
    facts = C.facts()
    for multi in (False, True):
        counts = collections.Counter()
        for question in (q for q in validation_questions() if q.multi == multi):
            trace = decoder.answer(question, "sync_active")
            block_of = {trace.next_slot[s]: b for s, b in zip(trace.spikes, trace.blocks) if s < len(trace.next_slot)}
            golds = {C.fact_document(s.country, s.attribute) for s in question.slots}
            for i, slot in enumerate(question.slots):
                counts["slots"] += 1
                block = block_of.get(i)
                if block is None:
                    counts["no spike"] += 1
                    continue
                if C.fact_document(slot.country, slot.attribute) not in block:
                    counts["gold missing"] += 1
                    counts["gold missing, another slot's gold document"] += bool(golds & set(block))
                    continue
                rivals = {s.country for s in question.slots} - {slot.country}
                rival = any(C.fact_document(c, slot.attribute) in block for c in rivals)
                key = "with rival" if rival else "without rival"
                counts[key] += 1
                counts[f"{key}, correct"] += trace.correct[i]
                counts[f"{key}, said the rival's value"] += any(
                    trace.predicted[i] == facts[c][slot.attribute] for c in rivals
                )
        print("multi-domain" if multi else "single-domain", dict(counts))
        for key in ("with rival", "without rival"):
            if counts[key]:
                print(f"  EM {key}: {counts[f'{key}, correct'] / counts[key]:.3f} ({counts[key]} slots)")


if __name__ == "__main__":
    main()
