"""DeepHA's KV cache and compressed memory on long Crafter episodes: ms per step and context tokens.

Crafter (``crafter==1.8.3``) has no expert, so the environment runs a uniformly random policy for ``--steps``
steps (1,000 by default) while a randomly initialised DeepHA decoder (d 128, 4 layers, 8192 positions) decodes the
Chain-of-Action tokens of every step ([OBS][SKILL x3][GND x2][MOT]) greedily, as the agent would. Three ways of
decoding, in the same run:

* ``recompute``: the full context recomputed for every generated token (no cache). Its cost grows with t, so it
  is timed at every ``--sample``-th step only (replaying the KV-cached context to that point), and its mean is
  the mean over those steps (the steps are evenly spread, so this estimates the mean over all steps);
* ``kv_cache``: the full context through transformers' KV cache;
* ``compressed_kv``: the compressed context (W = 4) through the KV cache, rebuilt every W steps.

The OBS token of Crafter is its 64x64x3 frame average-pooled to 8x8x3 and projected to d (this benchmark's
adapter; BabyAI uses the 7x7x3 grid). Printed: ms per step and mean context tokens of each, and the ratios
against ``recompute``. ``--smoke`` runs 40 steps, timing a recompute every 10th (seconds; a check that it runs).

    .venv/bin/python benchmarks/deepha/kv.py [--steps 1000] [--sample 100] [--window 4] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from torch import nn


class CrafterEmbedder(nn.Module):
    """The DeepHA embedder with an OBS encoder for Crafter frames."""

    def __init__(self, d_model: int):
        super().__init__()
        from zoo.deepha.model import Embedder

        self.base = Embedder(d_model)
        self.frame = nn.Linear(8 * 8 * 3, d_model)

    def observe(self, images, dirs):
        frames = torch.as_tensor(images).float().div(255).permute(0, 3, 1, 2)
        pooled = nn.functional.adaptive_avg_pool2d(frames, 8).flatten(1)
        return self.frame(pooled)

    def forward(self, types, ids, obs=None):
        return self.base(types, ids, obs)


def rollout(policy, steps: int, seed: int, time_steps=None, reference=None) -> dict:
    """Random-policy Crafter episode(s) of ``steps`` steps in total; the policy decodes every step."""
    import crafter

    env = crafter.Env(seed=seed)
    obs = env.reset()
    rng = np.random.default_rng(seed)
    policy.reset([1, 2, 3, 10])  # "go to the door": any mission prefix
    seconds, timed = 0.0, 0
    for t in range(steps):
        if time_steps is None or t in time_steps:
            start = time.perf_counter()
            policy.act(obs, 0)
            seconds += time.perf_counter() - start
            timed += 1
        else:
            policy.act(obs, 0)
        obs, _, done, _ = env.step(int(rng.integers(17)))
        if done:
            obs = env.reset()
    return {"ms_per_step": 1000 * seconds / max(1, timed), "context_tokens": float(np.mean(policy.context_lengths))}


class _TimedRecompute:
    """Decodes with the KV cache, but times a full recompute of the same step at the sampled steps."""

    def __init__(self, cached, recompute, sample: int):
        self.cached, self.recompute, self.sample = cached, recompute, sample
        self.seconds, self.timed = 0.0, 0

    @property
    def context_lengths(self):
        return self.cached.context_lengths

    def reset(self, mission):
        self.cached.reset(mission)

    def act(self, image, direction):
        t = len(self.cached.steps)
        if t % self.sample == self.sample - 1:
            self.recompute.ctx, self.recompute.steps = list(self.cached.ctx), list(self.cached.steps)
            self.recompute.mission, self.recompute.context_lengths = self.cached.mission, []
            self.recompute.codes = self.cached.codes
            self.recompute.last_logits, self.recompute.obs = [], list(self.cached.obs)
            start = time.perf_counter()
            self.recompute.act(image, direction)
            self.seconds += time.perf_counter() - start
            self.timed += 1
        return self.cached.act(image, direction)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--sample", type=int, default=100, help="time a full recompute every this many steps")
    parser.add_argument("--window", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    parser.add_argument("--smoke", action="store_true", help="the smallest run: 40 steps, recompute every 10th")
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.sample = 40, 10
    from zoo.deepha.agent import Policy
    from zoo.deepha.model import Decoder

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    embedder = CrafterEmbedder(128).eval()
    decoder = Decoder(128, 4, 4, max_len=8 * args.steps + 64).eval()
    results = {}
    timed = _TimedRecompute(Policy(embedder, decoder, "coa"), Policy(embedder, decoder, "coa", use_cache=False),
                            args.sample)  # fmt: skip
    full = rollout(timed, args.steps, args.seed)
    results["kv_cache"] = full
    results["recompute"] = {"ms_per_step": 1000 * timed.seconds / max(1, timed.timed),
                            "context_tokens": full["context_tokens"], "timed_steps": timed.timed}  # fmt: skip
    results["compressed_kv"] = rollout(Policy(embedder, decoder, "coa", window=args.window), args.steps, args.seed)
    base = results["recompute"]
    for name in ("recompute", "kv_cache", "compressed_kv"):
        r = results[name]
        r["speedup_vs_recompute"] = base["ms_per_step"] / r["ms_per_step"]
        r["context_ratio_vs_full"] = r["context_tokens"] / base["context_tokens"]
        print(f"{name:14s} {r['ms_per_step']:8.2f} ms/step  context {r['context_tokens']:8.1f} tokens  "
              f"speed-up x{r['speedup_vs_recompute']:.2f}  context x{r['context_ratio_vs_full']:.3f}")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
