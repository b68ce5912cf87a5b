"""Validation-only check: a likelihood ratio against a background transition model vs the mean-NLL score.

``python -m zoo.sae_transition_ood.lr_validation``. Per ID setting (SAEs of seed 0, the tuned top_k and
alpha): the WordNet validation glosses are split by text index, the even texts fit a background transition model
(same SAEs, same alpha), the odd texts are the validation OOD. Scores: mean NLL under the ID model (the method) and
``NLL_ID - NLL_background``. Caveat: the background is drawn from the validation OOD domain itself, so the ratio's
validation AUROC is an optimistic upper bound for generic-text backgrounds. The test split is not read.
"""

import json

import numpy as np
import torch

from zoo.sae_transition_ood import arms as A
from zoo.sae_transition_ood import domains as D
from zoo.sae_transition_ood.detector import auroc, cached_stack
from zoo.sae_transition_ood.features import build_features, default_cache_dir
from zoo.sae_transition_ood.transitions import (
    text_scores,
    token_transition_nll,
    transition_counts,
    transition_nll_table,
)
from zoo.sae_transition_ood.tune import TUNING_FILE, recipe_train_args


def split_texts(indices, offsets):
    """Token index blocks of the even and odd texts, with their offsets."""
    out = []
    for parity in (0, 1):
        blocks = [indices[offsets[t] : offsets[t + 1]] for t in range(parity, len(offsets) - 1, 2)]
        lengths = np.r_[0, np.cumsum([len(b) for b in blocks])]
        out.append((np.concatenate(blocks), lengths))
    return out


def main():
    torch.set_num_threads(1)
    features = build_features(20)
    chosen = json.loads(TUNING_FILE.read_text())["settings"]
    report = {}
    for id_domain in D.ID_DOMAINS:
        best = chosen[id_domain]["transition"]["best"]
        tokens, _ = features.token_slice(id_domain, "train")
        args = {**recipe_train_args(), "k_sae": best["k_sae"], "seed": 0}
        stack, _ = cached_stack(tokens, f"{id_domain}/train", default_cache_dir(), **args)
        scorer = A.SAEScorer(
            features, stack, id_domain, [(id_domain, "validation"), (D.VALIDATION_OOD, "validation")], 16, 32
        )
        top, alpha = best["top_k"], best["alpha"]
        id_table = transition_nll_table(scorer._transition_counts(False, top), alpha)
        wn = scorer.indices[(D.VALIDATION_OOD, "validation")][:, :, :top]
        (bg_idx, _), (ood_idx, ood_off) = split_texts(wn, scorer.offsets[(D.VALIDATION_OOD, "validation")])
        bg_table = transition_nll_table(transition_counts(bg_idx, stack.features), alpha)
        val_idx = scorer.indices[(id_domain, "validation")][:, :, :top]
        val_off = scorer.offsets[(id_domain, "validation")]
        id_val = token_transition_nll(val_idx, id_table)
        id_ood = token_transition_nll(ood_idx, id_table)
        row = {
            "mean_nll": auroc(text_scores(id_val, val_off), text_scores(id_ood, ood_off)),
            "likelihood_ratio": auroc(
                text_scores(id_val - token_transition_nll(val_idx, bg_table), val_off),
                text_scores(id_ood - token_transition_nll(ood_idx, bg_table), ood_off),
            ),
        }
        report[id_domain] = row
        print(id_domain, json.dumps(row), flush=True)
    means = {k: float(np.mean([r[k] for r in report.values()])) for k in ("mean_nll", "likelihood_ratio")}
    print("mean", json.dumps(means))


if __name__ == "__main__":
    main()
