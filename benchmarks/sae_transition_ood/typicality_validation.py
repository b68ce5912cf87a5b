"""Validation-only exploration (issue 66): extended grids and scores that do not reward typicality.

``python benchmarks/sae_transition_ood/typicality_validation.py [--smoke]`` (``--smoke``: one ID setting, one
(top_k, alpha)). Seed-0 SAEs (the tuning run's cache); per ID
setting, ID validation texts vs WordNet glosses (validation OOD). The test split is not read. Scores:

* ``mean_nll``: the method's mean transition NLL, over an extended (top_k, alpha) grid.
* ``two_sided``: ``|NLL - mu|``, mu the mean NLL of the even-indexed ID validation texts; AUROC on the odd ones.
* ``lr_other_id``: ``NLL_ID - w * NLL_bg``, the background counted on the other ID settings' train texts
  (same SAEs, top_k, alpha), w in {0.25, 0.5, 1}.
"""

import argparse
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
from zoo.sae_transition_ood.tune import recipe_train_args

TOPS = (1, 2, 3, 4, 6, 8, 16)
ALPHAS = (1e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 1.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="one ID setting and one (top_k, alpha): a quick run")
    smoke = parser.parse_args().smoke
    tops, alphas = ((4,), (1e-2,)) if smoke else (TOPS, ALPHAS)
    torch.set_num_threads(1)
    features = build_features(20)
    wn = (D.VALIDATION_OOD, "validation")
    report = {}
    for id_domain in D.ID_DOMAINS[:1] if smoke else D.ID_DOMAINS:
        tokens, _ = features.token_slice(id_domain, "train")
        stack, _ = cached_stack(
            tokens, f"{id_domain}/train", default_cache_dir(), **recipe_train_args(), k_sae=32, seed=0
        )
        val = (id_domain, "validation")
        others = [(o, "train") for o in D.ID_DOMAINS if o != id_domain]
        scorer = A.SAEScorer(features, stack, id_domain, [val, wn, *others], 16, 32)
        off_v, off_w = scorer.offsets[val], scorer.offsets[wn]
        even = np.arange(0, len(off_v) - 1, 2)
        odd = np.arange(1, len(off_v) - 1, 2)
        rows = []
        for top in tops:
            counts = scorer._transition_counts(False, top)
            bg = sum(transition_counts(scorer.indices[o][:, :, :top], stack.features) for o in others)
            for alpha in alphas:
                table = transition_nll_table(counts, alpha)
                tv = token_transition_nll(scorer.indices[val][:, :, :top], table)
                tw = token_transition_nll(scorer.indices[wn][:, :, :top], table)
                sv, sw = text_scores(tv, off_v), text_scores(tw, off_w)
                mu = sv[even].mean()
                row = {
                    "top_k": top,
                    "alpha": alpha,
                    "mean_nll": auroc(sv, sw),
                    "two_sided": auroc(np.abs(sv[odd] - mu), np.abs(sw - mu)),
                }
                bt = transition_nll_table(bg, alpha)
                bv = text_scores(token_transition_nll(scorer.indices[val][:, :, :top], bt), off_v)
                bw = text_scores(token_transition_nll(scorer.indices[wn][:, :, :top], bt), off_w)
                for w in (0.25, 0.5, 1.0):
                    row[f"lr_other_id_{w}"] = auroc(sv - w * bv, sw - w * bw)
                rows.append(row)
                print(id_domain, json.dumps(row), flush=True)
        report[id_domain] = rows
    keys = [k for k in rows[0] if k not in ("top_k", "alpha")]
    summary = {}
    for key in keys:
        best = {d: max(r, key=lambda x: x[key]) for d, r in report.items()}
        summary[key] = {
            "mean": float(np.mean([b[key] for b in best.values()])),
            **{d: [b["top_k"], b["alpha"], round(b[key], 4)] for d, b in best.items()},
        }
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
