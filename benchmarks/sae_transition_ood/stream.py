"""Streaming scorer throughput: texts per second of MiniLM + SAE encode + transition score vs MiniLM alone.

Both run in this process on the same ``--texts`` docstring test chunks (MiniLM batch 64, 2 threads); the
scorer streams MiniLM's hidden states through the 7 SAEs and keeps only the top-K indices of every token. The
target is an overhead of at most 1.3x (scorer time / forward time).

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/sae_transition_ood/stream.py   (--smoke: 64 texts, 1 repeat)
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=300, help="docstring test chunks (32-64 tokens)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--pretrained", action="store_true", help="the published detector (default: fresh weights)")
    parser.add_argument("--smoke", action="store_true", help="64 texts, one repeat (seconds)")
    args = parser.parse_args()
    if args.smoke:
        args.texts, args.repeats = 64, 1

    import torch

    import zoo
    from zoo.sae_transition_ood.domains import chunks

    torch.set_num_threads(2)
    detector = zoo.load("sae_transition_ood", pretrained=args.pretrained)
    ids = [c.ids for c in chunks("docstrings", "test", args.texts)]
    hidden = detector.hidden_states()
    list(hidden.forward_ids(ids[:64]))  # warm-up
    detector.score_ids(ids[:64])
    forward, scorer = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for _states in hidden.forward_ids(ids):
            pass
        forward.append(time.perf_counter() - start)
        start = time.perf_counter()
        detector.score_ids(ids)
        scorer.append(time.perf_counter() - start)
    t_forward, t_scorer = min(forward), min(scorer)
    print(f"texts: {len(ids)}  threads: {torch.get_num_threads()}")
    print(f"MiniLM forward alone        {len(ids) / t_forward:8.1f} texts/s")
    print(f"MiniLM + SAE encode + score {len(ids) / t_scorer:8.1f} texts/s")
    print(f"overhead ratio {t_scorer / t_forward:.2f}x (target <= 1.3x)")


if __name__ == "__main__":
    main()
