"""``zoo eval deepha``: CoA vs flat and decoupled policies, compressed memory + KV cache, on BabyAI.

Arms (every trained arm: the same decoder width, 1.27-1.28M parameters, and the same recipe budget):

* ``coa_compressed`` (method): the published CoA weights acting with the compressed context (W = 4) + KV cache;
* ``decoupled`` (baseline): a high-level decoder (skill + grounding) and a low-level decoder (motor from the
  step's OBS, skill and grounding), two layers each, sharing the token embedder;
* ``coa`` (ablation of the compression): the same weights with the full context;
* ``coa_skill_only`` / ``coa_grounding_only`` (ablations, one per action level): trained without grounding /
  without skill tokens;
* ``flat`` (reference: none of the method, motor tokens only) and ``reference_random`` (uniform random
  primitive actions: no learning).

Per arm and seed: ``success_<level>`` on ``test_episodes`` held-out test-seed episodes of each training level
and GoTo, ``success_multistep`` (PutNextLocal, UnlockLocal, Synth), ``success_all`` (the five training levels),
``success_goto``; ``context_tokens_mean`` and ``ms_per_step`` over the steps of Synth, GoTo and BossLevel
(``boss_episodes`` of it), where episodes outlast W; ``ms_per_step`` over ``latency_episodes`` Synth episodes
played one at a time; ``coa_compressed`` adds ``ms_per_step_recompute`` (the same compressed policy without the
cache, same episodes), ``kv_speedup`` and ``identical_actions`` (fraction of those episodes whose greedy actions
match exactly). Success rates come from lockstep batches of 50 episodes (:class:`~zoo.deepha.agent.BatchPolicy`,
the same actions as one at a time: tests/deepha). Rollouts use one torch thread (faster than two for
single-token steps). Seeds are training seeds; the test episodes are the same for every seed.
"""

from __future__ import annotations

import numpy as np

from zoo._eval import Claim, Protocol, Setting, Tuning, beats
from zoo.deepha.demos import LEVELS, MULTISTEP_LEVELS, TRAIN_LEVELS, make_env, split_seed

CONTEXT_LEVELS = ("Synth", "GoTo", "BossLevel")
TUNING_GRID = {"lr": [1e-3, 3e-3], "max_epochs": [8, 12], "p_drop": [0.0, 0.3]}
TRAINED = ("coa_compressed", "decoupled", "coa_skill_only", "coa_grounding_only", "flat")
_TUNE_NOTE = (
    "grid declared; validation tuning (50 validation-seed episodes per level, the same trials for every trained "
    "arm) NOT YET RUN: every arm uses the recipe's values (lr 1e-3, 8 epochs, p_drop 0.3)"
)

PROTOCOL = Protocol(
    method="coa_compressed",
    baselines=("decoupled",),
    ablations=("coa", "coa_skill_only", "coa_grounding_only"),
    references=("flat", "reference_random"),
    settings={
        "test_episodes": Setting(50, "held-out test-seed episodes per level (the spec's 100 trimmed to 50)", minimum=1),
        "boss_episodes": Setting(20, "BossLevel test episodes (context length and latency only)", minimum=0),
        "latency_episodes": Setting(10, "Synth episodes timed one at a time (and without the KV cache)", minimum=1),
        "window": Setting(4, "compression window W of coa_compressed at inference", minimum=1),
        "horizon": Setting(128, "episode cut (a cut episode failed); 7 x 128 tokens fit the 1024 positions", minimum=1),
    },
    tuning={arm: Tuning("validation", TUNING_GRID, 0, _TUNE_NOTE) for arm in TRAINED}
    | {
        "coa": Tuning("none", {}, 0, "the coa_compressed weights with the full context"),
        "reference_random": Tuning("none", {}, 0, "no learning"),
    },
    seed_args=("seed_everything", "model.init_args.seed", "data.init_args.seed"),
    headline=("success_multistep", "context_tokens_mean"),
)

_OVERRIDES = {
    "decoupled": ["--model.init_args.arm=decoupled"],
    "coa_skill_only": ["--model.init_args.arm=coa_skill_only"],
    "coa_grounding_only": ["--model.init_args.arm=coa_grounding_only"],
}


def model_for(arm: str, run):
    """The trained module behind ``arm`` for this seed (``coa`` and ``coa_compressed`` share one fit)."""
    if arm in ("coa", "coa_compressed"):
        if "coa" not in run.cache:
            run.cache["coa"] = run.load("coa_compressed")
        return run.cache["coa"]
    if arm == "flat":
        return run.load("flat")
    return run.load(arm, base="coa_compressed", overrides=_OVERRIDES[arm])


def episodes(make_policy, level: str, split: str, count: int, horizon: int, batch: int = 50) -> list[dict]:
    """Greedy episodes ``0..count-1`` of ``level`` on ``split`` seeds (in lockstep batches when the arm can)."""
    from zoo.deepha.agent import BatchPolicy, run_episode, run_episodes

    seeds = [split_seed(split, level, i) for i in range(count)]
    policy = make_policy(batch=True)
    if isinstance(policy, BatchPolicy):
        return [r for i in range(0, count, batch) for r in run_episodes(policy, level, seeds[i : i + batch], horizon)]
    env = make_env(level)
    return [run_episode(make_policy(), level, seed, horizon, env) for seed in seeds]


def score_policy(make_policy, settings, split: str = "test", recompute: bool = False) -> dict[str, float]:
    """Every metric of one arm: success per level, context tokens and latency (see the module docstring)."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        n, horizon = settings["test_episodes"], settings["horizon"]
        runs = {level: episodes(make_policy, level, split, n, horizon) for level in (*TRAIN_LEVELS, "GoTo")}
        if settings["boss_episodes"]:
            runs["BossLevel"] = episodes(make_policy, "BossLevel", split, settings["boss_episodes"], horizon)
        out = {f"success_{level.lower()}": float(np.mean([r["success"] for r in eps])) for level, eps in runs.items()}
        out["success_multistep"] = float(np.mean([out[f"success_{lv.lower()}"] for lv in MULTISTEP_LEVELS]))
        out["success_all"] = float(np.mean([out[f"success_{lv.lower()}"] for lv in TRAIN_LEVELS]))
        contexts = [c for level in CONTEXT_LEVELS if level in runs for r in runs[level] for c in r["context"]]
        out["context_tokens_mean"] = float(np.mean(contexts)) if contexts else 0.0
        out.update(latency(make_policy, settings, split, recompute))
        return out
    finally:
        torch.set_num_threads(saved)


def latency(make_policy, settings, split: str = "test", recompute: bool = False) -> dict[str, float]:
    """ms per step of one episode at a time on Synth; with ``recompute`` also without the KV cache.

    The same ``latency_episodes`` Synth episodes run with the cache and recomputing the context for every
    token: ``ms_per_step_recompute``, ``kv_speedup`` and ``identical_actions`` (fraction of episodes whose greedy
    actions are identical).
    """
    from zoo.deepha.agent import run_episode

    env = make_env("Synth")
    seeds = [split_seed(split, "Synth", i) for i in range(settings["latency_episodes"])]

    def timed(use_cache):
        runs = [run_episode(make_policy(use_cache=use_cache), "Synth", s, settings["horizon"], env) for s in seeds]
        return runs, 1000 * sum(r["seconds"] for r in runs) / max(1, sum(r["steps"] for r in runs))

    cached, ms_cached = timed(True)
    out = {"ms_per_step": ms_cached}
    if recompute:
        recomputed, ms_recompute = timed(False)
        same = np.mean([a["actions"] == b["actions"] for a, b in zip(cached, recomputed, strict=True)])
        out.update(
            {"ms_per_step_recompute": ms_recompute, "kv_speedup": ms_recompute / ms_cached, "identical_actions": same}
        )
    return out


def policy_factory(arm: str, model, settings, seed: int = 0):
    """``make(use_cache=True, batch=False)``: a fresh greedy policy for ``arm`` (batched or one episode)."""
    from zoo.deepha.agent import RandomPolicy

    if arm == "reference_random":
        return lambda use_cache=True, batch=False: RandomPolicy(seed)
    window = settings["window"] if arm == "coa_compressed" else None

    def make(use_cache=True, batch=False):
        return model.batch_policy(window) if batch else model.policy(window=window, use_cache=use_cache)

    return make


def measure(arm: str, run) -> dict[str, float]:
    model = None if arm == "reference_random" else model_for(arm, run)
    make = policy_factory(arm, model, run.settings, run.seed)
    return score_policy(make, run.settings, "test", recompute=arm == "coa_compressed")


def claims(result: dict) -> list[Claim]:
    arms = result["arms"]

    def gap(metric, a, b):
        return arms[a][metric] - arms[b][metric]

    ctx_ratio = arms["coa_compressed"]["context_tokens_mean"] / max(arms["coa"]["context_tokens_mean"], 1e-9)
    return [
        beats(result, "success_multistep", "coa", "flat", margin=0.10),
        Claim.at_least(
            "coa_at_least_decoupled", "coa >= decoupled on success_multistep (mean gap)",
            gap("success_multistep", "coa", "decoupled"), 0.0, "decoupled",
        ),
        Claim.at_least(
            "compressed_within_2_points_of_coa", "coa_compressed within 2 points of coa on success_multistep",
            gap("success_multistep", "coa_compressed", "coa"), -0.02, "coa",
        ),
        Claim.at_most(
            "compressed_context_at_most_30pct", "coa_compressed context_tokens_mean <= 30% of coa's",
            ctx_ratio, 0.30, "coa",
        ),
        Claim.at_least(
            "kv_cache_speedup_1p5x", "KV cache >= 1.5x faster per step than recomputing (coa_compressed)",
            arms["coa_compressed"]["kv_speedup"], 1.5,
        ),
        Claim.at_least(
            "kv_cache_identical_outputs", "cached and recomputed greedy actions identical (fraction of episodes)",
            arms["coa_compressed"]["identical_actions"], 1.0,
        ),
        Claim.at_most(
            "headroom_flat_multistep", "flat success_multistep <= 0.85 (the levels leave headroom)",
            arms["flat"]["success_multistep"], 0.85, "flat",
        ),
        beats(result, "success_all", "coa_compressed", "reference_random", margin=0.10),
    ]  # fmt: skip


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    """Greedy success of a loaded checkpoint on the first ``limit`` (default 50) PutNextLocal test episodes."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        window = module.hparams.window if module.hparams.arm == "coa" else None
        runs = episodes(lambda batch=False, use_cache=True: module.batch_policy(window), "PutNextLocal", "test",
                        limit or 50, 128)  # fmt: skip
    finally:
        torch.set_num_threads(saved)
    return {"success_putnextlocal": float(np.mean([r["success"] for r in runs]))}


assert set(CONTEXT_LEVELS) <= set(LEVELS)
