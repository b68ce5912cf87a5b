"""Validation-only check of the retrieval predictor's generalisation to unseen lead-ins (issue 20): its AUROC on the
synchronous baseline's positions, on questions with training lead-ins (the ``heads`` stream of seed 0) and on the
declared validation set (``val`` lead-ins, which nothing fitted has seen). Test questions are never used.

    .venv/bin/python benchmarks/prefetch_rag_predictor_val.py [FOLDER ...]   # ~1 min per checkpoint, 1 thread

2026-12-04: the checkpoint trained with 5 long + 2 short training lead-ins per attribute (commit a9ee46a) scored
0.981 on training lead-ins and 0.735 on validation; with 12 + 4 (zoo/prefetch_rag/corpus.py), seed 0 0.975 / 0.855,
seed 1 0.837 / 0.808.
"""

from __future__ import annotations

import sys

import torch

import zoo
from zoo.prefetch_rag.data import PrefetchRAGDataModule, validation_questions
from zoo.prefetch_rag.index import TextEncoder, build_retriever
from zoo.prefetch_rag.scoring import run_arm


def main() -> None:
    torch.set_num_threads(1)
    retriever, encoder = build_retriever(), TextEncoder()
    sets = {"training lead-ins": PrefetchRAGDataModule(heads_questions=200, seed=0).heads_questions(),
            "validation lead-ins": validation_questions()}  # fmt: skip
    for folder in sys.argv[1:] or [None]:
        module = (zoo.load_folder(folder) if folder else zoo.load("prefetch_rag", pretrained=True)).eval()
        decoder = module.decoder(retriever, encoder)
        scores = {
            name: run_arm(decoder, qs, "sync_active", record=True)["predictor_auroc"] for name, qs in sets.items()
        }
        print(folder or "published", " ".join(f"{name}: AUROC {auroc:.3f}" for name, auroc in scores.items()))


if __name__ == "__main__":
    main()
