"""Validation diagnostic of the ContextMonitor (issue 20; test questions never read): can the head's drift tell a
country switch from the rest of an answer?

The monitor re-issues a prefetch when ``1 - cos(c_t, c_issue) > delta`` (``Hyper.monitor_anchor="head"``; c is the
query head's vector, :class:`zoo.prefetch_rag.heads.QueryGenerator`). On the declared validation set's multi-domain
questions, the synchronous baseline's run gives c at every answer position; for every monitor check t (every
``monitor_every`` tokens) and a prefetch issued ``age`` tokens earlier, the check is *positive* when the switch
sentence ("Next, consider <country>.") was completed in between (the prefetch is stale: it was made for the first
country), else negative. Prints the drift's AUROC for that label (sklearn ``roc_auc_score``) and, per delta, the
share of positive and of negative checks that would re-issue.

    .venv/bin/python benchmarks/prefetch_rag_monitor_drift.py [FOLDER]   # ~1 min, published checkpoint by default

2026-12-05, fifth release (180 validation questions): the drift is *lower* across a switch than elsewhere, at every
prefetch age: AUROC 0.27 / 0.29 / 0.39 for ages 4 / 8 / 12 (mean drift 0.21 stale vs 0.28 valid at age 8); at delta
0.35 and age 12 the monitor would re-issue 19% of the stale prefetches and 32% of the valid ones, at 0.5 4% and 8%,
at 0.7 none and 1%. The head (trained towards the upcoming fact document's embedding) tracks the attribute a lead-in
announces, not the country a switch names, so no delta singles out the prefetches the monitor exists for.
"""

from __future__ import annotations

import sys

import numpy as np
import torch

AGES = (4, 8, 12)
DELTAS = (0.35, 0.5, 0.7)


def main() -> None:
    from sklearn.metrics import roc_auc_score

    import zoo
    from zoo.prefetch_rag.data import validation_questions
    from zoo.prefetch_rag.index import TextEncoder, build_retriever

    torch.set_num_threads(1)
    folder = sys.argv[1] if len(sys.argv) > 1 else None
    module = (zoo.load_folder(folder) if folder else zoo.load("prefetch_rag", pretrained=True)).eval()
    decoder = module.decoder(build_retriever(), TextEncoder())
    every = decoder.hyper.monitor_every
    drifts: dict[int, list[tuple[float, bool]]] = {age: [] for age in AGES}
    for question in [q for q in validation_questions() if q.multi]:
        trace = decoder.answer(question, "sync_active", record=True)
        switch_end = decoder._topics[1][0]  # answer length once the switch sentence was fed
        with torch.no_grad():
            c = module.query_head(torch.stack(trace.head_inputs)).numpy()
        for age in AGES:
            for t in range(age, len(c)):
                if (t + 1) % every == 0:
                    stale = t - age < switch_end - 1 <= t  # the switch's last token read after the issue, by t
                    drifts[age].append((1.0 - float(c[t] @ c[t - age]), stale))
    for age, pairs in drifts.items():
        drift = np.array([d for d, _ in pairs])
        stale = np.array([s for _, s in pairs])
        rates = " ".join(
            f"delta {d}: re-issues {np.mean(drift[stale] > d):.2f} of stale / {np.mean(drift[~stale] > d):.2f} of valid"
            for d in DELTAS
        )
        print(
            f"age {age:2d}: {stale.sum()} stale of {len(stale)} checks, drift AUROC {roc_auc_score(stale, drift):.3f},"
            f" mean drift {drift[stale].mean():.2f} stale / {drift[~stale].mean():.2f} valid; {rates}"
        )


if __name__ == "__main__":
    main()
