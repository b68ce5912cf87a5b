"""prefetch_rag: cost of the RetrievalPredictor and the ContextMonitor per decoded token, as a ratio to the LM's own
decode step (one-token forward with the KV cache, hidden states and attentions as the decoder reads them), measured
in the same run on the same thread (target <= 0.10).

Per token the method computes the window features (w = 8) and the predictor MLP; every ``monitor_every`` (4) tokens
the monitor applies the query head and one cosine. Uses the published checkpoint when it is registered, else a fresh
module of the same architecture (timing only).

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/prefetch_rag/overhead.py [--smoke]

``--smoke`` times 1 x 8 tokens after a 16-token context (seconds).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=120, help="decoded tokens per repeat (context + tokens <= 256)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--context", type=int, default=120, help="prefilled context tokens")
    parser.add_argument("--smoke", action="store_true", help="the smallest run: 1 x 8 tokens, 16-token context")
    args = parser.parse_args()
    torch.set_num_threads(1)
    tokens, repeats, context = (8, 1, 16) if args.smoke else (args.tokens, args.repeats, args.context)

    import zoo
    from zoo.prefetch_rag.heads import drift
    from zoo.prefetch_rag.lm import Session, window_features, window_hidden

    try:
        model = zoo.load("prefetch_rag", pretrained=True)
        source = "published checkpoint"
    except Exception as error:  # not registered yet: same architecture, fresh weights
        from zoo.prefetch_rag.module import PrefetchRAGModule

        model, source = PrefetchRAGModule(), f"fresh module ({type(error).__name__})"
    model.eval()
    hyper = model.hyper
    rng = np.random.default_rng(0)
    lm_times, predictor_times, monitor_times = [], [], []
    for _ in range(repeats):
        session = Session(model.lm, rng.integers(5, 4000, context).tolist())
        session.start()
        inflight = None
        for t in range(tokens):
            token = int(session.logits.argmax())
            start = time.perf_counter()
            session.extend([token])
            lm_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            features = window_features(session.signals, t, hyper.w)
            float(model.predictor.probability(features[None])[0])
            predictor_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            if (t + 1) % hyper.monitor_every == 0:
                with torch.no_grad():
                    c = model.query_head(window_hidden(session.signals, t, hyper.w)).numpy()
                inflight = c if inflight is None else inflight
                drift(c, inflight)
            monitor_times.append(time.perf_counter() - start)
    lm, predictor, monitor = (float(np.median(x)) * 1e3 for x in (lm_times, predictor_times, monitor_times))
    monitor_mean = float(np.mean(monitor_times)) * 1e3
    ratio = (predictor + monitor_mean) / lm
    print(f"model: {source}; {repeats} x {tokens} tokens after a {context}-token context, 1 thread")
    print(f"LM decode step (median)            {lm:.3f} ms")
    print(f"predictor per token (median)       {predictor:.3f} ms")
    print(f"monitor per token (mean, every {hyper.monitor_every}) {monitor_mean:.3f} ms")
    print(f"overhead ratio (predictor + monitor) / LM step: {ratio:.3f} (target <= 0.10)")


if __name__ == "__main__":
    main()
