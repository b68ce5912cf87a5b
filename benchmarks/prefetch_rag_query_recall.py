"""Retrieval-only diagnostic (no LM decoding; seconds): recall@3 of the gold fact document for the active arms' text
query (last N tokens of question + answer up to the slot, with the reference values before it, i.e. what an LM that
answered every earlier slot right would see) vs single_shot's question query, on the declared validation set
(120 + 180 questions since 2026-12-04, 30 + 60 from 2026-12-03; the numbers below say which they were read on).

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/prefetch_rag_query_recall.py [FOLDER]   # ~30 s CPU

Session 2026-12-02 10:20 (tokenizer of the 10:07 recipe run): text_last16 0.383 / 0.487 (single / multi),
last24 0.517 / 0.575, last32 (the spec's query) 0.508 / 0.637, last48 0.625 / 0.512, last64 0.683 / 0.512;
single_shot's question query 0.567 / 0.362.

Session 2026-12-04 (published checkpoint's tokenizer, 30 + 60 questions): last32 0.508 / 0.662 (the country falls
out of the window past the first slot sentence: long lead-ins say "its"); question first, then the last 16 answer
tokens (Hyper.query_question, query_tokens 16) 0.958 / 0.800; oracle "The <attribute> of <country>" 1.000 / 1.000.
With query_question and no retraining, validation sync_active EM rose 0.433 -> 0.583 (single), 0.308 -> 0.329 (multi).
Session 2026-12-04, the retrained release (recipe with query_question, query_tokens 16; 30 + 60 questions): question
first, then the last 16 / 24 / 32 answer tokens: 0.958 / 0.817 / 0.775 single, 0.800 / 0.713 / 0.604 multi, so the
recipe keeps 16.
"""

import json
import sys
from pathlib import Path

import numpy as np
import torch

from zoo.common.text import load_bpe
from zoo.prefetch_rag import corpus as C
from zoo.prefetch_rag.data import validation_questions
from zoo.prefetch_rag.decoder import question_query
from zoo.prefetch_rag.index import TextEncoder, build_retriever
from zoo.prefetch_rag.lm import Tokens

torch.set_num_threads(1)
folder = sys.argv[1] if len(sys.argv) > 1 else "runs/prefetch_rag.countries/pretrained"
tokens = Tokens(load_bpe(Path(folder, "tokenizer.json").read_text()))
retriever, encoder = build_retriever(), TextEncoder()
questions = validation_questions()
out = {}
for n in (16, 24, 32, 48, 64):
    hits = {"single": [], "multi": []}
    for q in questions:
        ids = list(tokens.cached(q.question))
        slot = 0
        for i, seg in enumerate(q.segments):
            if seg.is_slot:
                query = encoder(tokens.decode(ids[-n:]))
                found, _ = retriever.search(query, 3)
                gold = C.fact_document(seg.country, seg.attribute)
                hits["multi" if q.multi else "single"].append(gold in [retriever.texts[j] for j in found])
                slot += 1
            ids += tokens.segment(seg, first=i == 0)
    out[f"text_last{n}"] = {k: round(float(np.mean(v)), 3) for k, v in hits.items()}
hits = {"single": [], "multi": []}
for q in questions:
    found, _ = retriever.search(encoder(q.question), 3)
    texts = [retriever.texts[j] for j in found]
    for s in q.slots:
        hits["multi" if q.multi else "single"].append(C.fact_document(s.country, s.attribute) in texts)
out["single_shot_question"] = {k: round(float(np.mean(v)), 3) for k, v in hits.items()}
NAMES = {"capital": "capital", "currency": "currency", "language": "main language", "calling_code": "calling code",
         "demonym": "demonym"}  # fmt: skip
for name in ("question_then_last16", "question_then_last24", "question_then_last32", "oracle_attribute_country"):
    hits = {"single": [], "multi": []}
    for q in questions:
        answer: list[int] = []
        for i, seg in enumerate(q.segments):
            if seg.is_slot:
                if name == "oracle_attribute_country":
                    text = f"The {NAMES[seg.attribute]} of {seg.country}"
                else:  # Hyper.query_question's query
                    n = int(name.rsplit("last", 1)[1])
                    text = question_query(q.question, tokens.decode(answer[-n:]))
                found, _ = retriever.search(encoder(text), 3)
                gold = C.fact_document(seg.country, seg.attribute)
                hits["multi" if q.multi else "single"].append(gold in [retriever.texts[j] for j in found])
            answer += tokens.segment(seg, first=i == 0)
    out[name] = {k: round(float(np.mean(v)), 3) for k, v in hits.items()}
print(json.dumps(out))
