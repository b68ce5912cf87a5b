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

Trims for the 2-core budget (issue 26: a no-flag run, seeds 0 1 2, within 45 minutes): 50 test episodes per level
(the spec's 100), 20 BossLevel episodes and 10 latency episodes. Seed 0 uses the published ``coa_compressed`` and
``flat`` weights; every other (arm, seed) trains its recipe (13 fits). :func:`prepare` measures the (arm, seed)
pieces in two one-thread worker processes side by side (fit, then rollouts), longest first; with
``ZOO_DEEPHA_EVAL_CACHE`` naming a folder they are kept there, so an interrupted run resumes and
``benchmarks/eval_pieces.py deepha`` can run them in slots. ``prepare`` measures every arm, also for ``--arms``.

Tuning (``settings.tuning``, :mod:`zoo.deepha.tune`, validation seeds only): every trained arm gets the same
trials (learning rate, epochs, drop probability); the chosen values that differ from the arm's recipe are passed
as overrides (:func:`tuned_overrides`), so a retuned arm never silently uses the published weights.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from zoo._errors import ZooError
from zoo._eval import Claim, Protocol, Setting, Tuning, beats, cached_piece, piece_path
from zoo.deepha.demos import LEVELS, MULTISTEP_LEVELS, TRAIN_LEVELS, make_env, split_seed

CONTEXT_LEVELS = ("Synth", "GoTo", "BossLevel")
TRAINED = ("coa_compressed", "decoupled", "coa_skill_only", "coa_grounding_only", "flat")
TUNING_FILE = Path(__file__).with_name("tuning.json")
CACHE_ENV = "ZOO_DEEPHA_EVAL_CACHE"  # folder of (arm, seed) results; prepare() uses a temporary one without it
WORKERS = 2  # prepare() measures the pieces in this many one-thread processes (the machine's 2 cores)
#: The hyperparameters tuning chooses, by their LightningCLI keys.
KNOBS = {
    "lr": "model.init_args.lr",
    "max_epochs": "trainer.max_epochs",
    "p_drop": "model.init_args.p_drop",
    "p_noise": "model.init_args.p_noise",
}
_ARM_SWITCH = {
    "decoupled": ["--model.init_args.arm=decoupled"],
    "coa_skill_only": ["--model.init_args.arm=coa_skill_only"],
    "coa_grounding_only": ["--model.init_args.arm=coa_grounding_only"],
}
#: Relative cost of one (arm, seed) piece that trains (fit + rollouts, one core): balances the workers.
_COST = {"coa_compressed": 1.0, "coa_skill_only": 0.8, "coa_grounding_only": 0.7, "decoupled": 0.6, "flat": 0.35}


def tuning_record() -> dict:
    """``tuning.json`` (written by :mod:`zoo.deepha.tune` on validation seeds), or {} before it ran."""
    return json.loads(TUNING_FILE.read_text()) if TUNING_FILE.is_file() else {}


def _tunings() -> dict[str, Tuning]:
    record = tuning_record()
    out = {}
    for arm in TRAINED:
        entry = record.get("arms", {}).get(arm)
        if entry is None:
            out[arm] = Tuning("none", {}, 0, "validation tuning not yet run (zoo.deepha.tune): the recipe's values")
        else:
            note = f"{record['note']}; chosen: {entry['chosen']} (validation success_all {entry['score']:.3f})"
            out[arm] = Tuning("validation", record["grid"], len(entry["trials"]), note)
    out["coa"] = Tuning("none", {}, 0, "the coa_compressed weights acting with the full context")
    out["reference_random"] = Tuning("none", {}, 0, "no learning")
    return out


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
        "split": Setting(
            "test",
            "episodes' seeds (validation: a check of the pipeline that reads no test episode)",
            choices=("test", "validation"),
        ),
        "fit_max_steps": Setting(
            -1,
            "optimizer steps per fit (-1: the recipe's epochs; a small value is a smoke test of the pipeline)",
            recipe_keys=("trainer.max_steps",),
            minimum=-1,
        ),
        "train_demos": Setting(
            600,
            "bot demos per training level of every fit (the spec's 600; fewer: a smoke test)",
            recipe_keys=("data.init_args.episodes_per_level",),
            minimum=1,
        ),
    },
    tuning=_tunings(),
    seed_args=("seed_everything", "model.init_args.seed", "data.init_args.seed"),
    headline=("success_multistep", "context_tokens_mean"),
)


def _recipe_values(recipe: str) -> dict:
    """The recipe's value of every tuning knob."""
    import yaml

    from zoo._recipes import resolve_recipe

    config = yaml.safe_load(Path(resolve_recipe(recipe)).read_text())
    values = {}
    for knob, key in KNOBS.items():
        node = config
        for part in key.split("."):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        values[knob] = node if node != {} else None
    return values


def tuned_overrides(arm: str, recipe: str, record: dict | None = None) -> list[str]:
    """LightningCLI arguments that set ``arm``'s tuned values where they differ from ``recipe``'s."""
    record = tuning_record() if record is None else record
    chosen = record.get("arms", {}).get(arm, {}).get("chosen", {})
    have = _recipe_values(recipe) if chosen else {}
    return [f"--{KNOBS[k]}={v}" for k, v in sorted(chosen.items()) if have.get(k) != v]


def load_args(arm: str, run) -> tuple[str, list[str], str | None]:
    """``(arm, overrides, base)`` of :meth:`zoo._eval.Run.load` for an arm (``coa`` is ``coa_compressed``'s fit)."""
    key = "coa_compressed" if arm in ("coa", "coa_compressed") else arm
    base = None if key in ("coa_compressed", "flat") else "coa_compressed"
    recipe = run.entry(base or key).pretrained_cfg.recipe
    return key, [*_ARM_SWITCH.get(key, []), *tuned_overrides(key, recipe)], base


def model_for(arm: str, run):
    """The trained module behind ``arm`` for this seed (``coa`` and ``coa_compressed`` share one fit)."""
    key, overrides, base = load_args(arm, run)
    if key not in run.cache:
        run.cache[key] = run.load(key, overrides, base)
    return run.cache[key]


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


def _measure(arm: str, run) -> dict[str, float]:
    model = None if arm == "reference_random" else model_for(arm, run)
    make = policy_factory(arm, model, run.settings, run.seed)
    return score_policy(make, run.settings, run.settings["split"], recompute=arm == "coa_compressed")


def piece(arm: str, run, folder: str | Path | None = None) -> Path | None:
    """Where one (arm, seed) result is kept: ``folder`` or ``$ZOO_DEEPHA_EVAL_CACHE`` (None when neither is set),
    keyed by everything that decides it: the arm, seed and settings, the texts of both recipes, ``tuning.json``,
    ``--retrain``, ``--weights`` and whether the published weights are used (their pins)."""
    folder = folder or os.environ.get(CACHE_ENV)
    if not folder:
        return None
    from zoo._recipes import resolve_recipe

    key, overrides, base = load_args(arm, run) if arm != "reference_random" else (arm, [], None)
    recipes = [Path(resolve_recipe(run.entry(a).pretrained_cfg.recipe)).read_text() for a in ("coa_compressed", "flat")]
    published = None
    if arm != "reference_random" and base is None and run.uses_published(key, overrides):
        published = dict(run.entry(key).pretrained_cfg.sha256)
    weights = str(run.weights) if run.weights is not None and key == PROTOCOL.method else None
    record = [arm, run.seed, run.settings, recipes, tuning_record(), run.retrain, weights, published, overrides]
    return piece_path(folder, f"{arm}-seed{run.seed}", record)


def measure(arm: str, run) -> dict[str, float]:
    """One arm, one seed: a stored piece (see :func:`prepare`) or measured here."""
    return cached_piece(piece(arm, run, run.cache.get("pieces")), lambda: _measure(arm, run))


def _jobs(runs) -> list[dict]:
    """The pieces still to measure, grouped so that one worker fits ``coa`` / ``coa_compressed`` once per seed."""
    jobs = []
    for run in runs:
        groups = [["coa_compressed", "coa"], ["flat"], ["decoupled"], ["coa_skill_only"], ["coa_grounding_only"]]
        groups.append(["reference_random"])
        for arms in groups:
            todo = [arm for arm in arms if not piece(arm, run, run.cache["pieces"]).is_file()]
            if not todo:
                continue
            key, overrides, base = load_args(arms[0], run) if arms[0] != "reference_random" else (None, [], None)
            trains = key is not None and not (base is None and run.uses_published(key, overrides))
            cost = _COST[key] if trains else 0.15
            spec = {"seed": run.seed, "arms": todo, "settings": run.settings, "retrain": run.retrain}
            spec["weights"] = str(run.weights) if run.weights is not None else None
            jobs.append({"spec": spec, "cost": cost})
    return jobs


def prepare(runs) -> None:
    """Measure every (arm, seed) piece in ``WORKERS`` one-thread processes side by side, before the harness asks.

    Each piece trains its arm's recipe for that seed (except the published weights of seed 0), plays its test
    episodes and writes its metrics to the piece folder (``$ZOO_DEEPHA_EVAL_CACHE``, kept for later runs and for
    ``benchmarks/eval_pieces.py``; a temporary folder without it); :func:`measure` then reads them. The pieces are
    dealt longest first to the least loaded worker. This keeps a no-flag ``zoo eval deepha`` (seeds 0 1 2: 13
    fits and 21 arms' rollouts) on both cores.

    Args:
        runs: Every seed's run, as ``zoo._eval.run_eval`` builds them.
    """
    import atexit
    import shutil
    import subprocess
    import sys
    import tempfile

    folder = os.environ.get(CACHE_ENV)
    if not folder:
        folder = tempfile.mkdtemp(prefix="zoo-deepha-eval-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    Path(folder).mkdir(parents=True, exist_ok=True)
    for run in runs:
        run.cache["pieces"] = folder
    jobs = sorted(_jobs(runs), key=lambda job: -job["cost"])
    if len(jobs) < 2:
        return  # nothing to share: measure() runs it in this process
    loads = [[0.0, []] for _ in range(WORKERS)]
    for job in jobs:
        least = min(loads, key=lambda load: load[0])
        least[0] += job["cost"]
        least[1].append(job["spec"])
    env = {**os.environ, CACHE_ENV: folder, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    workers = []
    for i, (_, specs) in enumerate(loads):
        if not specs:
            continue
        log = open(Path(folder) / f"worker{i}.log", "a")  # noqa: SIM115 (closed below)
        command = [sys.executable, "-m", "zoo.deepha.evaluate", "--pieces", json.dumps(specs)]
        workers.append((log, subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)))
    failed = []
    for log, worker in workers:
        if worker.wait() != 0:
            failed.append(Path(log.name))
        log.close()
    if failed:
        tails = "; ".join(f"{path.name}: ...{path.read_text()[-600:]}" for path in failed)
        raise ZooError(f"deepha eval worker(s) failed: {tails}")


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


if __name__ == "__main__":  # a worker of prepare(): measure the given pieces into $ZOO_DEEPHA_EVAL_CACHE
    import argparse
    import logging
    import time

    import torch

    from zoo._eval import Run, paper_arms

    parser = argparse.ArgumentParser(description="measure (arm, seed) pieces of zoo eval deepha (a worker of prepare)")
    parser.add_argument(
        "--pieces", required=True, help='JSON list of {"seed", "arms", "settings", "retrain", "weights"}'
    )
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    torch.set_num_threads(1)
    entries = paper_arms("deepha")
    for spec in json.loads(parser.parse_args().pieces):
        worker_run = Run(entries, PROTOCOL, spec["seed"], spec["settings"], spec["retrain"], spec["weights"])
        for arm in spec["arms"]:
            started = time.perf_counter()
            measure(arm, worker_run)
            print(f"seed {spec['seed']} {arm}: {time.perf_counter() - started:.0f} s", flush=True)
