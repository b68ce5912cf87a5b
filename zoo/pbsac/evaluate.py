"""``zoo eval pbsac``: PB-SAC and SAC trained side by side on Pendulum-v1, returns and certificates.

Both arms are trained from scratch with their recipes (recipes/pbsac/pendulum.yaml and
sac_pendulum.yaml; identical networks, hyper-parameters and seeds) for every seed, because the claim
is about training: the certificates are computed at checkpoints during training. Each trained agent
plays the same 10 deterministic evaluation episodes (environment seeds 1e6 .. 1e6 + 9).

Metrics per arm: ``return_mean`` and ``return_std`` over the 10 episodes x seeds. PB-SAC also reports
``certificate`` (the Markov-aware bound at the final checkpoint, mean over seeds), ``coverage`` (the
fraction of all checkpoints, over all seeds, where the certificate is at least the loss measured on 20
fresh independent rollouts), their i.i.d.-bound counterparts, and ``return_rel_gap`` = |PB-SAC - SAC| / |SAC|.

Budget: 15k environment steps per run, 2 arms x 3 seeds; about 7 minutes on 2 shared CPU cores (PB-SAC
~75 s per seed including its 6 certificates, SAC ~55 s per seed). ``--seeds`` runs other seeds.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from zoo.progress import track

ROOT = Path(__file__).resolve().parents[2]
RECIPES = {"pbsac": "recipes/pbsac/pendulum.yaml", "sac": "recipes/pbsac/sac_pendulum.yaml"}
DEFAULT_SEEDS = [0, 1, 2]
EVAL_EPISODES = 10


def recipe_args(recipe: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The model and data ``init_args`` of a recipe (the eval trains exactly what the recipe trains).

    Without a repository checkout (an installed wheel has no recipes/), the registry's ``model_args`` of
    the entry that names the recipe and the data module's defaults are used: they are the same settings.
    """
    import yaml

    path = ROOT / recipe
    if path.is_file():
        config = yaml.safe_load(path.read_text())
        return dict(config["model"].get("init_args", {})), dict(config["data"].get("init_args", {}))
    from zoo._registry import _all_entries

    for entry in _all_entries():
        if entry.pretrained_cfg.recipe == recipe:
            return dict(entry.model_args), {}
    from zoo._errors import RecipeError

    raise RecipeError(f"recipe {recipe} does not exist and no registry entry names it; reinstall icml26-zoo")


def train_agent(model_args: dict[str, Any], data_args: dict[str, Any], seed: int):
    """Train one agent the way ``zoo fit`` does (seed_everything, then Trainer.fit), without logging or export."""
    import lightning.pytorch as pl

    from zoo.pbsac.data import PBSACDataModule
    from zoo.pbsac.module import PBSACModule

    pl.seed_everything(seed, verbose=False)
    module = PBSACModule(**model_args)
    trainer = pl.Trainer(
        max_epochs=1, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0,
    )  # fmt: skip
    trainer.fit(module, PBSACDataModule(**data_args))
    return module


def evaluate(name: str, *, seeds: list[int] | None = None, retrain: bool = False) -> dict:
    """Train both arms for every seed and measure returns, certificates and coverage.

    Args:
        name: Registry name (any pbsac entry).
        seeds: Training seeds (default 0, 1, 2).
        retrain: Ignored: every arm is always trained, since the certificates are computed during training.
    """
    from zoo.pbsac.module import EVAL_SEED_BASE

    seeds = list(DEFAULT_SEEDS if seeds is None else seeds)
    eval_seeds = [EVAL_SEED_BASE + i for i in range(EVAL_EPISODES)]
    arms: dict[str, dict[str, float]] = {}
    per_seed: dict[str, dict[str, list]] = {}
    checkpoints: list[dict] = []
    timings: dict[str, float] = {}
    settings: dict[str, Any] = {"recipes": RECIPES, "eval_episode_seeds": [eval_seeds[0], eval_seeds[-1]]}
    for arm, recipe in RECIPES.items():
        model_args, data_args = recipe_args(recipe)
        settings[f"{arm}_env_steps"] = data_args.get("total_steps")
        returns, finals, speeds = [], [], []
        started = time.perf_counter()
        for seed in track(seeds, desc=f"pbsac eval: {arm}"):
            fit_started = time.perf_counter()
            module = train_agent(model_args, data_args, seed)
            speeds.append(module.env_steps.item() / (time.perf_counter() - fit_started))
            episode = module.evaluate_returns(eval_seeds)
            returns.append(episode)
            per_seed.setdefault(arm, {}).setdefault("episode_returns", []).append([round(float(r), 4) for r in episode])
            for record in module.certificates:
                checkpoints.append(
                    {
                        "seed": seed,
                        **{
                            k: record[k]
                            for k in (
                                "step",
                                "value",
                                "iid_value",
                                "fresh_loss",
                                "empirical_risk",
                                "t_mix",
                                "covered",
                                "iid_covered",
                            )
                        },
                    }
                )
            if module.certificates:
                finals.append(module.certificates[-1])
        timings[f"{arm}_s"] = round(time.perf_counter() - started, 1)
        flat = np.concatenate(returns)
        arms[arm] = {"return_mean": float(flat.mean()), "return_std": float(flat.std())}
        if finals:
            arm_checks = [c for c in checkpoints if c["fresh_loss"] is not None]
            arms[arm].update(
                certificate=float(np.mean([f["value"] for f in finals])),
                coverage=float(np.mean([c["covered"] for c in arm_checks])),
                certificate_iid=float(np.mean([f["iid_value"] for f in finals])),
                coverage_iid=float(np.mean([c["iid_covered"] for c in arm_checks])),
                fresh_loss=float(np.mean([f["fresh_loss"] for f in finals])),
                t_mix=float(np.mean([f["t_mix"] for f in finals])),
            )
        arms[arm]["env_steps_per_s"] = float(np.mean(speeds))
    if "pbsac" in arms and "sac" in arms:
        sac_return = arms["sac"]["return_mean"]
        arms["pbsac"]["return_rel_gap"] = abs(arms["pbsac"]["return_mean"] - sac_return) / max(abs(sac_return), 1e-12)
    settings["per_seed"] = per_seed
    settings["checkpoints"] = checkpoints
    settings["thresholds"] = {"return_rel_gap": "<= 0.10", "certificate": "< 1", "coverage": ">= 0.95"}
    return {"settings": settings, "seeds": seeds, "arms": arms, "timings": timings}


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    """Mean return of a loaded agent on the first ``limit`` (default 10) evaluation episodes."""
    from zoo.pbsac.module import EVAL_SEED_BASE

    count = EVAL_EPISODES if limit is None else max(1, min(limit, EVAL_EPISODES))
    return {"return_mean": float(module.evaluate_returns([EVAL_SEED_BASE + i for i in range(count)]).mean())}


def plot(result: dict, path, highlight: str | None = None) -> None:
    """Returns per arm (mean and std over episodes x seeds) and the certificates against fresh-rollout losses."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = result["arms"]
    fig, (ax_return, ax_cert) = plt.subplots(1, 2, figsize=(9.5, 3.4))
    names = list(arms)
    ax_return.bar(
        range(len(names)), [arms[a]["return_mean"] for a in names], yerr=[arms[a]["return_std"] for a in names],
        color=["tab:red" if a == highlight else "tab:gray" for a in names], capsize=4,
    )  # fmt: skip
    ax_return.set_xticks(range(len(names)), names)
    ax_return.set_title("evaluation return (10 episodes x seeds)", fontsize=9)
    checkpoints = result.get("settings", {}).get("checkpoints", [])
    for seed in sorted({c["seed"] for c in checkpoints}):
        rows = sorted((c for c in checkpoints if c["seed"] == seed), key=lambda c: c["step"])
        steps = [c["step"] for c in rows]
        label = seed == min(c["seed"] for c in checkpoints)
        ax_cert.plot(steps, [c["value"] for c in rows], "-o", color="tab:red", label="Markov bound" if label else None)
        ax_cert.plot(
            steps, [c["iid_value"] for c in rows], "--s", color="tab:blue", label="i.i.d. bound" if label else None
        )
        ax_cert.plot(
            steps, [c["fresh_loss"] for c in rows], ":x", color="black", label="fresh-rollout loss" if label else None
        )
    ax_cert.axhline(1.0, color="gray", lw=0.8)
    ax_cert.set_xlabel("environment steps")
    ax_cert.set_title("certificate vs. loss on fresh rollouts (PB-SAC)", fontsize=9)
    if checkpoints:
        ax_cert.legend(fontsize=7)
    fig.suptitle(f"{result['name']}: zoo eval, seeds {result['seeds']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
