"""Judge calls per second: the cached, batched judge against naive per-call forwards, in one run.

CVPO runs on a few test items (lockstep) while a recorder notes every judge request and the batches of new images
each round brings. The requests are then replayed twice: (1) naive: every call encodes both images with
EfficientNet-Lite0 and draws the answer; (2) cached and batched: each round's new images are encoded in one batch
(``prefetch``) and identical requests are answered from the cache. Both must give identical answers; the ratio of
calls per second is printed (target >= 5x).

Run: ``flock /tmp/zoo-cpu.lock python benchmarks/visual_persuasion/judge.py [--items 4 --rounds 10]`` (``--smoke``: 1
item, 2 rounds).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch


class Recorder:
    """Wraps a judge: notes each request and each prefetched batch, in order."""

    def __init__(self, judge):
        self.judge, self.num_prompts, self.events = judge, judge.num_prompts, []

    def prefetch(self, images):
        self.events.append(("prefetch", list(images)))
        self.judge.prefetch(images)

    def answer(self, first, second, prompt, nonce=0):
        self.events.append(("answer", (first, second, prompt, nonce)))
        return self.judge.answer(first, second, prompt, nonce)


def main(argv=None) -> dict:
    import zoo
    from zoo.visual_persuasion import optimise
    from zoo.visual_persuasion.images import base_items
    from zoo.visual_persuasion.judge import CachedJudge
    from zoo.visual_persuasion.pipeline import make_judge
    from zoo.visual_persuasion.tune import tuned_settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="1 item, 2 rounds: checks that it runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.items, args.rounds = 1, 2
    torch.set_num_threads(2)
    model = zoo.load("visual_persuasion", pretrained=True)
    weights, bias = model.head_weight.detach().numpy()[:3], model.head_bias.detach().numpy()[:3]
    items = base_items("test")[: args.items]
    settings = tuned_settings()
    recorder = Recorder(CachedJudge(make_judge(weights, bias, seed=0)))
    mean, std = model.attribute_stats
    steps = []
    for index, item in enumerate(items):
        ctx = optimise.ItemContext(item, model.editor(), recorder, np.random.default_rng([0, index]), mean, std)
        proposer = optimise.Proposer(settings.cvpo_step, settings.cvpo_noise, settings.mask_size)
        steps.append(optimise.cvpo(ctx, proposer, settings.cvpo_candidates, args.rounds, args.rounds))
    optimise.run_lockstep(steps, recorder)
    requests = [payload for kind, payload in recorder.events if kind == "answer"]

    naive = make_judge(weights, bias, seed=0)
    naive.cache_features = False
    naive.encode(np.stack([items[0]] * 2))  # warm-up outside the timing
    started = time.perf_counter()
    naive_answers = [naive.answer(*request) for request in requests]
    naive_s = time.perf_counter() - started

    cached = CachedJudge(make_judge(weights, bias, seed=0))
    started = time.perf_counter()
    cached_answers = []
    for kind, payload in recorder.events:
        if kind == "prefetch":
            cached.prefetch(payload)
        else:
            cached_answers.append(cached.answer(*payload))
    cached_s = time.perf_counter() - started
    if naive_answers != cached_answers:
        raise SystemExit("the cached judge's answers differ from the naive judge's")
    report = {
        "calls": len(requests),
        "unique_calls": cached.misses,
        "naive_encoded_images": naive.encoded,
        "cached_encoded_images": cached.judge.encoded,
        "naive_calls_per_s": round(len(requests) / naive_s, 1),
        "cached_calls_per_s": round(len(requests) / cached_s, 1),
        "speedup": round(naive_s / cached_s, 2),
        "identical_decisions": True,
        "items": args.items,
        "rounds": args.rounds,
    }
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
