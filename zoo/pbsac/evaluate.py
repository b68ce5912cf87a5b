"""``zoo eval pbsac``: PB-SAC against SAC on Pendulum-v1: returns, certificates, and two references.

Arms: ``pbsac`` and ``sac`` train their recipes (recipes/pbsac/pendulum.yaml, sac_pendulum.yaml; identical
networks, hyper-parameters and seeds); seed 0 is the published checkpoint, whose certificates (computed during
training, every 2.5k steps and at the end) are read from its config.json. ``reference_untrained`` is the
PB-SAC recipe stopped after its 1k-step uniform warm-up: random actor and critic, loss scale M frozen, then
certified by the same code. ``reference_random_policy`` plays uniform random actions (return only).

Metrics per seed: ``return_mean`` over ``eval_episodes`` deterministic episodes (environment seeds 1e6, 1e6+1,
...); for certified arms the final ``certificate`` (Markov-aware bound), ``certificate_iid`` (C = 1), the
``fresh_loss`` it must cover, ``t_mix``, and ``coverage`` / ``coverage_iid`` (the fraction of checkpoints where
the bound is at least the loss on 20 fresh rollouts). About 9 minutes on 2 cores (pbsac, sac train seeds 1, 2).
"""

from __future__ import annotations

import torch

from zoo._eval import Claim, Protocol, Setting, Tuning, beats
from zoo._figures import bar_panel
from zoo._serialization import read_config

# fmt: off
PROTOCOL = Protocol(
    method="pbsac",
    baselines=("sac",),
    references=("reference_untrained", "reference_random_policy"),
    settings={
        "total_steps": Setting(
            15_000, "environment steps of training; kappa anneals over them (>= the 5k validation interval)",
            recipe_keys=("data.init_args.total_steps", "model.init_args.kappa_anneal_steps"), minimum=5_000,
        ),
        "eval_episodes": Setting(10, "deterministic evaluation episodes per agent and seed", minimum=1),
        "env": Setting(
            "Pendulum-v1", "gymnasium task (the MuJoCo ones are far from converged at this budget)",
            choices=("Pendulum-v1", "InvertedPendulum-v5", "HalfCheetah-v5"), recipe_keys=("model.init_args.env_id",),
        ),
    },
    tuning={
        "pbsac": Tuning("none", {}, 0, "SAC constants and the bound's constants fixed by the spec (02-pbsac.md)"),
        "sac": Tuning("none", {}, 0, "the same SAC constants as pbsac (Stable-Baselines3 defaults)"),
    },
    headline=("return_mean", "certificate"),
    panels=3,
)
CURVES = {"value": ("-o", "tab:red", "Markov bound"), "iid_value": ("--s", "tab:blue", "i.i.d. bound"),
          "fresh_loss": (":x", "black", "fresh-rollout loss")}
# fmt: on
# The untrained reference: the PB-SAC recipe stopped when its first update would run (learning_starts = 1k).
UNTRAINED = ("--data.init_args.total_steps=1000", "--model.init_args.learning_starts=1000")


def measure(arm: str, run) -> dict[str, float]:
    from zoo.pbsac.module import EVAL_SEED_BASE
    from zoo.pbsac.rollout import ActionScaler, env_dims, episode_returns, make_env

    env, history = run.settings["env"], []
    if arm == "reference_random_policy":
        _, act_dim, low, high = env_dims(make_env(env))
        generator = torch.Generator().manual_seed(run.seed)
        act, scaler = (lambda obs: torch.rand(len(obs), act_dim, generator=generator) * 2 - 1), ActionScaler(low, high)
    else:
        untrained = arm == "reference_untrained"
        model = run.load(arm, (*UNTRAINED, "--trainer.limit_val_batches=0"), "pbsac") if untrained else run.load(arm)
        act, scaler, history = model.agent.act, model.scaler, model.certificates
        if run.uses_published(arm):  # a published (or --weights) folder keeps the certificates made in training
            folder = run.weights if arm == PROTOCOL.method and run.weights else run.entry(arm).mirror_dir
            history = read_config(folder).get("metadata", {}).get("certificates", [])
    seeds = [EVAL_SEED_BASE + i for i in range(run.settings["eval_episodes"])]
    episodes = run.extras.setdefault("episode_returns", {})[arm] = episode_returns(env, act, seeds, scaler).tolist()
    scores = {"return_mean": sum(episodes) / len(episodes)}
    if history:
        checked, final = [record for record in history if record["fresh_loss"] is not None], history[-1]
        scores.update(
            certificate=final["value"], certificate_iid=final["iid_value"], fresh_loss=final["fresh_loss"],
            t_mix=final["t_mix"], coverage=sum(r["covered"] for r in checked) / max(1, len(checked)),
            coverage_iid=sum(r["iid_covered"] for r in checked) / max(1, len(checked)),
        )  # fmt: skip
        run.extras.setdefault("certificates", {})[arm] = [[r[k] for k in ("step", *CURVES)] for r in history]
    return scores


def claims(result: dict) -> list[Claim]:
    pbsac, sac = result["arms"]["pbsac"], result["arms"]["sac"]
    gap = abs(pbsac["return_mean"] - sac["return_mean"]) / max(abs(sac["return_mean"]), 1e-12)
    worst = max(scores["certificate"] for scores in result["per_seed"]["pbsac"].values())
    coverage = "certificate >= fresh-rollout TD loss at >= 95% of PB-SAC's checkpoints"
    return [
        Claim.at_most("return_rel_gap", "|PB-SAC - SAC| / |SAC| of the mean return <= 0.10", gap, 0.10, "sac"),
        Claim("certificate_non_vacuous", "PB-SAC's final certificate < 1 on every seed", round(worst, 6), 1, worst < 1),
        Claim.at_least("coverage", coverage, pbsac["coverage"], 0.95),
        beats(result, "return_mean", "pbsac", "reference_untrained", margin=500.0),
        beats(result, "return_mean", "pbsac", "reference_random_policy", margin=500.0),
        # Issue 17: does the certificate tell the trained agent from the untrained one at all (lower is better)?
        beats(result, "certificate", "pbsac", "reference_untrained", margin=0.0, higher_is_better=False),
    ]


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    """Mean return of a loaded agent on the first ``limit`` (default 10) evaluation episodes."""
    from zoo.pbsac.module import EVAL_SEED_BASE

    seeds = [EVAL_SEED_BASE + i for i in range(10 if limit is None else max(1, min(limit, 10)))]
    return {"return_mean": float(module.evaluate_returns(seeds).mean())}


def plot(result: dict, axes) -> None:
    """Returns and final certificates per arm; PB-SAC's certificates against the fresh-rollout loss over training."""
    bar_panel(axes[0], result, "return_mean", ylabel="evaluation return")
    bar_panel(axes[1], result, "certificate", ylabel="final certificate (normalised TD loss)")
    for index, extras in enumerate(result["extras"].values()):  # one curve per seed and quantity
        rows = extras.get("certificates", {}).get("pbsac", [])
        steps = [r[0] for r in rows]
        for column, (style, colour, label) in enumerate(CURVES.values(), start=1):
            axes[2].plot(steps, [r[column] for r in rows], style, color=colour, label=None if index else label)
    axes[2].set_xlabel("environment steps")
    axes[2].set_ylabel("PB-SAC certificate / fresh loss")
    axes[2].legend(fontsize=6)
