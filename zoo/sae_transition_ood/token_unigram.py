"""``reference_token_unigram``: a model-free word-piece unigram NLL (no MiniLM, no SAE).

A text's score is the mean over its word pieces of ``-log p(t)``, with ``p(t) = (c_t + alpha) / (N + alpha V)``
from the counts ``c`` of the ID setting's train texts (``N`` pieces in all, vocabulary ``V``). Every piece of each
32-64 piece chunk is scored (the detector scores 20 of them). The one parameter, ``alpha``, is tuned per ID setting
on validation (ID validation texts vs WordNet glosses) over :data:`GRID`, as many trials as the method's grid:
``python -m zoo.sae_transition_ood.token_unigram`` writes :data:`TUNING_FILE`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from zoo.sae_transition_ood import domains as D

GRID = {"alpha": [1e-9, 3e-9, 1e-8, 3e-8, 1e-7, 3e-7, 1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2,
                  0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0]}  # 24 trials: the transition arm's budget  # fmt: skip
TUNING_FILE = Path(__file__).with_name("token_unigram_tuning.json")


def unigram_nll(train: Sequence[Sequence[int]], vocab: int, alpha: float) -> np.ndarray:
    """``-log p(t)`` for every id below ``vocab``, additive (Lidstone) smoothing ``alpha`` over the train counts."""
    if alpha <= 0:
        raise ValueError(f"alpha must be positive, got {alpha}")
    flat = np.fromiter((t for ids in train for t in ids), dtype=np.int64)
    if flat.size and (flat.min() < 0 or flat.max() >= vocab):
        raise ValueError(f"token ids must lie in [0, {vocab})")
    counts = np.bincount(flat, minlength=vocab).astype(np.float64)
    return -np.log((counts + alpha) / (flat.size + alpha * vocab))


def text_scores(texts: Sequence[Sequence[int]], table: np.ndarray) -> np.ndarray:
    """Mean per-piece NLL of each text (higher = more OOD); an empty text is an error."""
    if any(len(ids) == 0 for ids in texts):
        raise ValueError("every text needs at least one token")
    return np.array([float(table[np.asarray(ids, dtype=np.int64)].mean()) for ids in texts])


def _ids(domain: str, split: str) -> list[tuple[int, ...]]:
    return [c.ids for c in D.chunks(domain, split)]


def _vocab() -> int:
    from zoo.sae_transition_ood.hidden import tokenizer

    return len(tokenizer())


def tune(id_domains: Sequence[str] = D.ID_DOMAINS) -> dict:
    """Every alpha of :data:`GRID` per ID setting on validation; the first best wins (the grid's order)."""
    from zoo.sae_transition_ood.detector import auroc

    vocab, out = _vocab(), {"grid": GRID, "trials": len(GRID["alpha"]), "settings": {}}
    ood = _ids(D.VALIDATION_OOD, "validation")
    for id_domain in id_domains:
        train, valid = _ids(id_domain, "train"), _ids(id_domain, "validation")
        trials = []
        for alpha in GRID["alpha"]:
            table = unigram_nll(train, vocab, alpha)
            trials.append({"alpha": alpha, "auroc": auroc(text_scores(valid, table), text_scores(ood, table))})
        best = max(trials, key=lambda t: t["auroc"])
        out["settings"][id_domain] = {"best": {"alpha": best["alpha"]}, "auroc": best["auroc"], "trials": trials}
    return out


def chosen() -> dict[str, float]:
    """The tuned alpha per ID setting (empty before the tuning ran)."""
    if not TUNING_FILE.is_file():
        return {}
    return {d: r["best"]["alpha"] for d, r in json.loads(TUNING_FILE.read_text())["settings"].items()}


def scores(id_domain: str, groups: Sequence[tuple[str, str]], alpha: float) -> dict[tuple[str, str], np.ndarray]:
    """Each group's text scores under the ID setting's train-text unigram."""
    table = unigram_nll(_ids(id_domain, "train"), _vocab(), alpha)
    return {g: text_scores(_ids(*g), table) for g in groups}


def main() -> None:
    record = tune()
    TUNING_FILE.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({d: (r["best"], round(r["auroc"], 4)) for d, r in record["settings"].items()}))


if __name__ == "__main__":
    main()
