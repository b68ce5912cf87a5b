"""Validation-only choice of ``predictor_noise`` (issue 20): the retrieval predictor's AUROC on unseen lead-ins when
Gaussian noise of a given std is added to its standardised inputs while it trains (recipes/prefetch_rag/countries.yaml).

For each checkpoint, the synchronous baseline runs once over the ``heads`` questions of its seed (training lead-ins:
the recipe's stage-2 data, :meth:`PrefetchRAGModule.heads_data`) and once over the declared validation set (val
lead-ins, which nothing fitted has seen); the predictor is then re-trained from its initial weights by the recipe's
own loop (:meth:`PrefetchRAGModule._train_heads`) for each noise std and scored on the validation positions
(sklearn ``roc_auc_score``). Test questions are never used.

    .venv/bin/python benchmarks/prefetch_rag_predictor_noise.py [FOLDER:SEED ...]   # ~2 min per checkpoint, 1 thread

2026-12-05, fourth-release checkpoints (12 + 4 training lead-ins per attribute), validation AUROC per noise std
0 / 0.5 / 1 / 2 / 3 (a standalone copy of this loop, 40 epochs): seed 0 0.802 / 0.833 / 0.845 / 0.866 / 0.866;
seed 1 0.722 / - / 0.749 / 0.785 / 0.791. The recipe took 2.0 with the fifth release's 24 + 8 training lead-ins;
on that release's seed 0 LM (this script, 81 s): noise 0 / 1 / 2 / 3: 0.829 / 0.848 / 0.848 / 0.839.
"""

from __future__ import annotations

import sys

import torch

NOISES = (0.0, 1.0, 2.0, 3.0)


def main() -> None:
    from sklearn.metrics import roc_auc_score

    import zoo
    from zoo.prefetch_rag.data import PrefetchRAGDataModule, validation_questions
    from zoo.prefetch_rag.index import TextEncoder, build_retriever

    torch.set_num_threads(1)
    retriever, encoder = build_retriever(), TextEncoder()
    for spec in sys.argv[1:] or ["published:0"]:
        folder, seed = spec.rsplit(":", 1)
        module = zoo.load("prefetch_rag", pretrained=True) if folder == "published" else zoo.load_folder(folder)
        module = module.eval()
        decoder = module.decoder(retriever, encoder)
        heads = PrefetchRAGDataModule(heads_questions=200, seed=int(seed)).heads_questions()
        train = module.heads_data(decoder, heads)
        x_val, y_val, _, _ = module.heads_data(decoder, validation_questions())
        scores = {}
        for noise in NOISES:  # a fresh module has the recipe's initial heads; _train_heads reads only them
            fresh = type(module)(**{**module.hparams, "predictor_noise": noise})
            fresh._train_heads(*train)
            with torch.no_grad():
                scores[noise] = roc_auc_score(y_val.numpy(), fresh.predictor.probability(x_val).numpy())
        print(spec, " ".join(f"noise {n}: AUROC {a:.3f}" for n, a in scores.items()), flush=True)


if __name__ == "__main__":
    main()
