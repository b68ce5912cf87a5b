"""``zoo eval deepha``: CoA vs flat and decoupled policies, compressed memory + KV cache, on BabyAI (setup: card.md).

Per arm and seed (a training seed; the test episodes are the same for every seed): ``success_<level>`` on
``test_episodes`` test-seed episodes of each training level and GoTo, ``success_multistep`` and ``success_all``
(means over the multi-step and the training levels), ``context_tokens_mean`` over the steps of ``CONTEXT_LEVELS``
and ``ms_per_step`` over ``latency_episodes`` Synth episodes played one at a time (wall clock: every arm is timed);
``coa_compressed`` adds ``ms_per_step_recompute`` (no KV cache), ``kv_speedup`` and ``identical_actions``. A
trained arm's tuned values that differ from its recipe's are its overrides (:func:`tuned_overrides`).
``reference_oracle_coa`` (issue #71) plays coa_compressed's weights and W with the bot's skill and grounding tokens
forced at every step (:mod:`zoo.deepha.oracle`): success per training level only, and ``bot_failed``.
The level set (:data:`~zoo.deepha.demos.LEVEL_SETS`) is ``settings["level_set"]`` where the settings hold one and
``default`` (the spec's levels) otherwise: the published protocol has no such setting yet (plan: :mod:`.tune_plateau`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from zoo.common.records import read_record
from zoo.deepha.demos import LEVEL_SETS, level_set, make_env, split_seed
from zoo.eval import Arm, Claim, Protocol, Setting, Step, Tuning, beats, per_seed_values, ratio_of_means

CONTEXT_LEVELS = ("Synth", "GoTo", "BossLevel")
TRAINED = ("coa_compressed", "decoupled", "coa_skill_only", "coa_grounding_only", "flat")
RECIPES = {"coa": "recipes/deepha/babyai.yaml", "flat": "recipes/deepha/flat.yaml"}
TUNING_FILE = Path(__file__).with_name("tuning.json")
#: The hyperparameters tuning chooses, by their LightningCLI keys.
KNOBS = {
    "lr": "model.init_args.lr",
    "max_epochs": "trainer.max_epochs",
    "p_drop": "model.init_args.p_drop",
    "p_noise": "model.init_args.p_noise",
}
#: The module arm of the arms that train babyai.yaml with another stream.
ARM_SWITCH = {arm: (f"--model.init_args.arm={arm}",) for arm in ("decoupled", "coa_skill_only", "coa_grounding_only")}


def recipe_of(arm: str) -> str:
    """The recipe an arm trains: flat.yaml for ``flat``, babyai.yaml (with its arm switch) for the others."""
    return RECIPES["flat" if arm == "flat" else "coa"]


def tuning_record() -> dict:
    """``tuning.json`` (written by :mod:`zoo.deepha.tune` on validation seeds), or {} before it ran."""
    return json.loads(TUNING_FILE.read_text()) if TUNING_FILE.is_file() else {}


#: The level set whose plateau tuning the protocol's arms train with (issue #71; :data:`~zoo.deepha.demos.LEVEL_SETS`);
#: None until the card is measured with it (then a finished arm's plateau choice changes the protocol).
LEVEL_SET: str | None = None
#: The knob the plateau tuning adds: the span of the learning-rate schedule, so a fit stopped at the chosen epoch
#: replays that epoch of the tuning trial.
SCHEDULE_KNOB = {"schedule_epochs": "model.init_args.schedule_epochs"}
#: Every knob a tuning sets (tuning.json's and the plateau's), by its LightningCLI key.
TUNED_KEYS = {**KNOBS, **SCHEDULE_KNOB}
#: The data argument that names the level set.
LEVEL_SET_KEY = "data.init_args.level_set"


def plateau_file(name: str = "default") -> Path:
    """The plateau tuning's record of level set ``name``: ``tuning_plateau.json`` (``tuning_plateau_<name>.json``)."""
    return Path(__file__).with_name("tuning_plateau.json" if name == "default" else f"tuning_plateau_{name}.json")


def plateau_record(name: str | None) -> dict:
    """The plateau tuning's record of level set ``name`` ({} for None, or before its first trial)."""
    return read_record(plateau_file(name)) if name else {}


def plateau_entry(arm: str, record: dict) -> dict:
    """``arm``'s entry of a plateau record once its grid is complete (every planned rate run, the best one
    interior), else {}: an unfinished tuning never changes what the protocol trains."""
    entry = record.get("arms", {}).get(arm, {})
    return entry if entry.get("complete") else {}


def _tunings() -> dict[str, Tuning]:
    record, plateau = tuning_record(), plateau_record(LEVEL_SET)
    out = {}
    for arm in TRAINED:
        entry, tuned = record.get("arms", {}).get(arm), plateau_entry(arm, record=plateau)
        if tuned:
            grid = {"lr": tuned["done_lr"], "max_epochs": [f"the best check of epochs {plateau['rule']['first_check']}"
                    f"-{plateau['rule']['max_epochs']}"]}  # fmt: skip
            note = (f"{plateau['note']}; chosen: {tuned['chosen']} (validation success_all {tuned['score']:.3f}, level "
                    f"set {plateau['level_set']}); other knobs from tuning.json: {record['note']}")  # fmt: skip
            out[arm] = Tuning("validation", grid, len(tuned["done_lr"]), note)
        elif entry is None:
            out[arm] = Tuning("none", {}, 0, "validation tuning not yet run (zoo.deepha.tune): the recipe's values")
        else:
            note = f"{record['note']}; chosen: {entry['chosen']} (validation success_all {entry['score']:.3f})"
            out[arm] = Tuning("validation", record["grid"], len(entry["trials"]), note)
    out["coa"] = Tuning("none", {}, 0, "the coa_compressed weights acting with the full context")
    out["reference_oracle_coa"] = Tuning(
        "none",
        {},
        0,
        "the coa_compressed weights (tuned above) and its context W, with the bot's skill and grounding "
        "tokens forced: no parameter of its own",
    )
    out["reference_random"] = Tuning("none", {}, 0, "no learning")
    return out


def recipe_config(recipe: str) -> dict:
    """A recipe's YAML as a dict."""
    import yaml

    from zoo._recipes import resolve_recipe

    return yaml.safe_load(Path(resolve_recipe(recipe)).read_text())


def key_parent(config: dict, key: str) -> tuple[dict, str]:
    """The dict of a recipe's ``config`` that holds the dotted LightningCLI ``key`` (a new {} where a level is
    missing), and the key's last part."""
    *parents, leaf = key.split(".")
    node = config
    for part in parents:
        node = node.get(part, {}) if isinstance(node, dict) else {}
    return (node if isinstance(node, dict) else {}), leaf


def recipe_values(recipe: str) -> dict:
    """The recipe's value of every tuning knob (None where the recipe leaves the module's default)."""
    config = recipe_config(recipe)
    values = {}
    for knob, key in TUNED_KEYS.items():
        parent, leaf = key_parent(config, key)
        value = parent.get(leaf, {})
        values[knob] = value if value != {} else None
    return values


def chosen_values(arm: str, record: dict | None = None, plateau: dict | None = None) -> dict:
    """``arm``'s tuned knobs: ``tuning.json``'s choice, under the plateau's (arguments as :func:`tuned_values`)."""
    record = tuning_record() if record is None else record
    return {**record.get("arms", {}).get(arm, {}).get("chosen", {}), **(plateau or {})}


def tuned_values(arm: str, record: dict | None = None, plateau: dict | None = None) -> dict:
    """The values ``arm`` trains with of every tuning knob: its recipe's, under ``tuning.json``'s choice, under the
    plateau's (None where the recipe leaves the module's default).

    Args:
        arm: A trained arm.
        record: ``tuning.json``'s record (default: the file).
        plateau: The arm's plateau choice (:func:`plateau_entry`'s ``chosen``), which replaces ``tuning.json``'s
            learning rate and epochs; None: ``tuning.json`` alone (what the plateau trials start from).
    """
    return {**recipe_values(recipe_of(arm)), **chosen_values(arm, record, plateau)}


def tuned_overrides(
    arm: str, recipe: str | None = None, record: dict | None = None, plateau: dict | None = None
) -> list[str]:
    """LightningCLI arguments that set ``arm``'s tuned values (:func:`tuned_values`) where they differ from its
    recipe's.

    Args:
        arm: A trained arm.
        recipe: The recipe the values are compared with (default: the arm's).
        record: ``tuning.json``'s record (default: the file).
        plateau: The arm's plateau choice, as for :func:`tuned_values`.
    """
    chosen = chosen_values(arm, record, plateau)
    have = recipe_values(recipe or recipe_of(arm)) if chosen else {}
    return [f"--{TUNED_KEYS[k]}={v}" for k, v in sorted(chosen.items()) if have.get(k) != v]


def _trained(name: str, fit_of: str | None = None, **kwargs) -> Arm:
    """A timed arm whose model is ``fit_of``'s recipe fit (its arm switch and tuned values, the plateau's where its
    tuning is complete) or published weights."""
    fit_of = fit_of or name
    plateau = plateau_entry(fit_of, plateau_record(LEVEL_SET)).get("chosen")
    overrides = (*ARM_SWITCH.get(fit_of, ()), *tuned_overrides(fit_of, plateau=plateau))
    return Arm(name, overrides=overrides, timed=True, **kwargs)


def episodes(make_policy, level: str, split: str, count: int, horizon: int, batch: int = 50) -> list[dict]:
    """Greedy episodes ``0..count-1`` of ``level`` on ``split`` seeds (in lockstep batches when the arm can)."""
    from zoo.deepha.agent import BatchPolicy, run_episode, run_episodes

    seeds = [split_seed(split, level, i) for i in range(count)]
    policy = make_policy(batch=True)
    if isinstance(policy, BatchPolicy):
        return [r for i in range(0, count, batch) for r in run_episodes(policy, level, seeds[i : i + batch], horizon)]
    env = make_env(level)
    return [run_episode(make_policy(), level, seed, horizon, env) for seed in seeds]


def _success(runs: list[dict]) -> float:
    return float(np.mean([r["success"] for r in runs]))


def level_means(scores: dict[str, float], levels) -> dict[str, float]:
    """``success_multistep`` and ``success_all``: means of ``success_<level>`` over a level set's multi-step and
    training levels (:class:`~zoo.deepha.demos.LevelSet`)."""
    return {
        "success_multistep": float(np.mean([scores[f"success_{lv.lower()}"] for lv in levels.multistep])),
        "success_all": float(np.mean([scores[f"success_{lv.lower()}"] for lv in levels.train])),
    }


def score_policy(make_policy, settings, recompute: bool = False) -> dict[str, float]:
    """Every metric of one arm: success per level, context tokens and latency (see the module docstring)."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        n, horizon, split = settings["test_episodes"], settings["horizon"], settings["split"]
        levels = level_set(settings.get("level_set", "default"))
        runs = {level: episodes(make_policy, level, split, n, horizon) for level in (*levels.train, "GoTo")}
        if settings["boss_episodes"]:
            runs["BossLevel"] = episodes(make_policy, "BossLevel", split, settings["boss_episodes"], horizon)
        out = {f"success_{level.lower()}": _success(eps) for level, eps in runs.items()}
        out.update(level_means(out, levels))
        contexts = [c for level in CONTEXT_LEVELS if level in runs for r in runs[level] for c in r["context"]]
        out["context_tokens_mean"] = float(np.mean(contexts)) if contexts else 0.0
        out.update(latency(make_policy, settings, recompute))
        return out
    finally:
        torch.set_num_threads(saved)


def latency(make_policy, settings, recompute: bool = False) -> dict[str, float]:
    """ms per step of one Synth episode at a time; with ``recompute`` also of the same episodes without the KV cache
    (``identical_actions``: the fraction of episodes whose greedy actions match)."""
    from zoo.deepha.agent import run_episode

    env = make_env("Synth")
    seeds = [split_seed(settings["split"], "Synth", i) for i in range(settings["latency_episodes"])]

    def timed(use_cache):
        runs = [run_episode(make_policy(use_cache=use_cache), "Synth", s, settings["horizon"], env) for s in seeds]
        return runs, 1000 * sum(r["seconds"] for r in runs) / max(1, sum(r["steps"] for r in runs))

    cached, ms_cached = timed(True)
    out = {"ms_per_step": ms_cached}
    if recompute:
        recomputed, ms_recompute = timed(False)
        same = np.mean([a["actions"] == b["actions"] for a, b in zip(cached, recomputed, strict=True)])
        out["ms_per_step_recompute"], out["kv_speedup"] = ms_recompute, ms_recompute / ms_cached
        out["identical_actions"] = same
    return out


def score_oracle(model, settings) -> dict[str, float]:
    """``reference_oracle_coa``: the method's weights and context (W) with the bot's skill and grounding forced,
    on the training levels (success per level, multistep, all) and the fraction of episodes the bot gave up."""
    import torch

    from zoo.deepha.oracle import oracle_episodes

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        n, horizon, split = settings["test_episodes"], settings["horizon"], settings["split"]
        levels = level_set(settings.get("level_set", "default"))
        out, failed = {}, []
        for level in levels.train:
            seeds = [split_seed(split, level, i) for i in range(n)]
            runs = [r for i in range(0, n, 50) for r in oracle_episodes(model, level, seeds[i : i + 50], horizon,
                                                                          settings["window"])]  # fmt: skip
            out[f"success_{level.lower()}"] = _success(runs)
            failed += [r["bot_failed"] for r in runs]
        out.update(level_means(out, levels))
        out["bot_failed"] = float(np.mean(failed))
        return out
    finally:
        torch.set_num_threads(saved)


def score(arm: str, model, run) -> dict[str, float]:
    """A trained arm's greedy policy (``coa_compressed`` with the compressed context W, the others in full)."""
    if arm == "reference_oracle_coa":
        return score_oracle(model, run.settings)
    window = run.settings["window"] if arm == "coa_compressed" else None

    def make(use_cache=True, batch=False):
        return model.batch_policy(window) if batch else model.policy(window=window, use_cache=use_cache)

    return score_policy(make, run.settings, recompute=arm == "coa_compressed")


def random_policy(run) -> dict[str, float]:
    """Uniformly random primitive actions (a fresh generator seeded by the run's seed for every episode)."""
    from zoo.deepha.agent import RandomPolicy

    return score_policy(lambda use_cache=True, batch=False: RandomPolicy(run.seed), run.settings)


def claims(result: dict) -> list[Claim]:
    arms = result["arms"]
    compressed, multistep = arms["coa_compressed"], {arm: arms[arm]["success_multistep"] for arm in arms}
    ctx_ratio = ratio_of_means(result, "context_tokens_mean", "coa_compressed", "coa")
    flat = {f"seed {seed}": value for seed, value in per_seed_values(result, "flat", "success_multistep").items()}
    return [
        beats(result, "success_multistep", "coa", "flat", margin=0.10),  # coa: a method variant
        Claim.at_least("coa_at_least_decoupled", "coa >= decoupled on success_multistep (mean gap)",
                       multistep["coa"] - multistep["decoupled"], 0.0, versus="decoupled", arm="coa"),
        Claim.at_least("compressed_within_2_points_of_coa",
                       "coa_compressed within 2 points of coa on success_multistep",
                       multistep["coa_compressed"] - multistep["coa"], -0.02, versus="coa", arm="coa_compressed"),
        Claim.at_most("compressed_context_at_most_30pct", "coa_compressed context_tokens_mean <= 30% of coa's",
                      ctx_ratio, 0.30, versus="coa", arm="coa_compressed"),
        Claim.at_least("kv_cache_speedup_1p5x", "KV cache >= 1.5x faster per step than recomputing (coa_compressed)",
                       compressed["kv_speedup"], 1.5, arm="coa_compressed"),
        Claim.at_least("kv_cache_identical_outputs", "cached and recomputed greedy actions identical (fraction of "
                       "episodes)", compressed["identical_actions"], 1.0, kind="validity", arm="coa_compressed"),
        Claim.gate("headroom_flat_multistep", "flat success_multistep <= 0.85 (the levels leave headroom)", flat, 0.85,
                   at_most=True, arm="flat"),
        beats(result, "success_all", "coa_compressed", "reference_random", margin=0.10),
        beats(result, "success_multistep", "coa_compressed", "flat", margin=0.10),  # the claim (#71)
        *gates(result),
    ]  # fmt: skip


def gates(result: dict) -> list[Claim]:
    """The headroom gates of issue #71, on every seed: flat >= 0.5 on each multi-step level (the comparison is not
    one level), and ``reference_oracle_coa`` (the hierarchy's upper bound) >= flat + 0.10 on multi-step success."""
    multistep = level_set(result.get("settings", {}).get("level_set", "default")).multistep
    flat = {
        f"{level} seed {seed}": value
        for level in multistep
        for seed, value in per_seed_values(result, "flat", f"success_{level.lower()}").items()
    }
    oracle = per_seed_values(result, "reference_oracle_coa", "success_multistep")
    base = per_seed_values(result, "flat", "success_multistep")
    gains = {f"seed {seed}": oracle[seed] - base[seed] for seed in oracle if seed in base}
    return [
        Claim.gate("headroom_flat_each_multistep_level", "flat success >= 0.5 on each multi-step level", flat, 0.5,
                   arm="flat"),
        Claim.gate("headroom_oracle_coa_above_flat", "reference_oracle_coa - flat >= 0.10 on success_multistep", gains,
                   0.10, arm="reference_oracle_coa", versus="flat"),
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
    return {"success_putnextlocal": _success(runs)}


STEPS = (
    Step("tune", ("python", "-m", "zoo.deepha.tune"), "validation tuning of the five trained arms (4 trials each, "
         "seed 100) -> zoo/deepha/tuning.json; about 80 min on 2 cores, resumable"),
    *([Step("tune_plateau", ("python", "-m", "zoo.deepha.tune_plateau", "--level-set", LEVEL_SET), "every trained "
            "arm's learning rate and epochs to a validation plateau (seed 100) -> " + plateau_file(LEVEL_SET).name +
            "; 6-12 core-hours, resumable")] if LEVEL_SET else []),
    Step("apply", ("python", "-m", "zoo.deepha.tune", "--apply"), "write the chosen values of coa_compressed and "
         "flat into recipes/deepha/{babyai,flat}.yaml (review the diff)"),
)  # fmt: skip
#: The level set as a setting once the protocol trains with the plateau tuning (:data:`LEVEL_SET`).
LEVEL_SET_SETTING = (
    {
        "level_set": Setting(
            LEVEL_SET,
            "training levels and their multi-step subset (zoo.deepha.demos.LEVEL_SETS; the plateau tuning's)",
            choices=tuple(LEVEL_SETS),
            recipe_keys=(LEVEL_SET_KEY,),
        )
    }
    if LEVEL_SET
    else {}
)

PROTOCOL = Protocol(
    method=_trained("coa_compressed"),
    baselines=(_trained("decoupled", base="coa_compressed"),),
    ablations=(
        _trained("coa", "coa_compressed", entry="deepha.babyai", help="coa_compressed's weights, full context"),
        _trained("coa_skill_only", base="coa_compressed"),
        _trained("coa_grounding_only", base="coa_compressed"),
    ),
    references=(
        _trained("flat"),
        Arm("reference_random", measure=random_policy, timed=True),
        Arm(
            "reference_oracle_coa",
            overrides=_trained("coa_compressed").overrides,
            entry="deepha.babyai",
            timed=True,
            help="coa_compressed's weights and W with the bot's skill and grounding tokens forced (teacher forcing "
            "at inference): the hierarchy's upper bound",
        ),
    ),
    ceilings=("reference_oracle_coa",),  # sees the bot's thoughts, which no competitor may
    method_variants=("coa",),  # the method's weights acting with the full context: CoA's own claims are about it
    score=score,
    score_pretrained=score_pretrained,
    claims=claims,
    settings={
        "test_episodes": Setting(50, "held-out test-seed episodes per level (the spec's 100 trimmed to 50)", minimum=1),
        "boss_episodes": Setting(20, "BossLevel test episodes (context length and latency only)", minimum=0),
        "latency_episodes": Setting(10, "Synth episodes timed one at a time (and without the KV cache)", minimum=1),
        "split": Setting(
            "test",
            "episodes' seeds (validation: a check of the pipeline that reads no test episode)",
            choices=("test", "validation"),
        ),
        "window": Setting(4, "compression window W of coa_compressed at inference", minimum=1),
        "horizon": Setting(128, "episode cut (a cut episode failed); 7 x 128 tokens fit the 1024 positions", minimum=1),
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
        **LEVEL_SET_SETTING,
    },
    tuning=_tunings(),
    seed_args=("seed_everything", "model.init_args.seed", "data.init_args.seed"),
    headline=("success_multistep", "context_tokens_mean"),
    lower_is_better=("context_tokens_mean", "ms_per_step", "ms_per_step_recompute"),
    steps=STEPS,
)
