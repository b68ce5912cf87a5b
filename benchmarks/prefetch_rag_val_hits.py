"""Validation-only diagnostic of issue 20's failure (prefetch slower than sync_active): how often each active arm's
prefetched document is the gold one, on the declared validation set (never the test split; the numbers below were
measured when it had 30 + 60 questions, which are now a prefix of its 120 + 180).

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/prefetch_rag_val_hits.py   # ~3 min, published checkpoint

Prints em_all, hit_rate (hits per spike), multi_domain_hit_rate, served_rate, retrievals and simulated latency for
every active arm at the tuned settings (zoo/prefetch_rag/tuning.json).

2026-12-03 (published checkpoint 99b38435, locked, 151 s): em_all / hit_rate / served_rate / latency_ms
sync_active 0.350 / 0.000 / 0.000 / 2807; prefetch 0.314 / 0.011 / 0.609 / 2819; prefetch_no_monitor 0.319 / 0.070 /
0.469 / 2737; prefetch_no_query_head 0.372 / 0.000 / 0.634 / 3037; telerag 0.367 / 0.012 / 0.519 / 2705; piperag
0.406 / 0.025 / 0.428 / 2755. The gold document is almost never in place before its spike on validation either
(1.1% for prefetch; 4.6% on test), so no active arm can save the retrieval wait the paper's speed-up comes from.
"""

import torch

import zoo
from zoo.prefetch_rag import tune as T
from zoo.prefetch_rag.data import validation_questions
from zoo.prefetch_rag.index import TextEncoder, build_retriever
from zoo.prefetch_rag.scoring import run_arm

torch.set_num_threads(2)
module = zoo.load("prefetch_rag", pretrained=True).eval()
retriever, encoder = build_retriever(), TextEncoder()
hyper = T.chosen_hyper(module.decoder(retriever, encoder).hyper, arm="prefetch")
questions = validation_questions()
keys = ("em_all", "hit_rate", "multi_domain_hit_rate", "served_rate", "retrievals_mean", "latency_ms_mean")
print(f"{'arm':24s}" + "".join(f"{k:>22s}" for k in keys))
for arm in ("sync_active", "prefetch", "prefetch_no_monitor", "prefetch_no_query_head", "telerag", "piperag"):
    metrics = run_arm(module.decoder(retriever, encoder, hyper), questions, arm)
    print(f"{arm:24s}" + "".join(f"{metrics.get(k, float('nan')):22.3f}" for k in keys), flush=True)
