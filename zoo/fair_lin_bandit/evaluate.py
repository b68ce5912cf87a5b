"""``zoo eval fair_lin_bandit``: FairLinBandit (PE and UCB) against LinNash, ablations and uniform, same instances.

A seed ``s`` is one set of instances: K = 200 arms sampled with seed ``s`` from each of the 5 instances
(shuttle, yeast, phishing, solarflare, synthetic); test seeds 0-9, validation seeds 100-109 (tuning only, see
:mod:`zoo.fair_lin_bandit.tune`). On each instance and horizon every arm runs ``replicates`` independent
copies (one batch); ``E[mu_{x_t}]`` is their mean conditional expected reward and ``R_p = mu* - M_p(E[mu])``.

Metrics per arm and seed (``<H>`` = ``2k`` / ``20k``, ``<tag>`` = ``1``, ``0p5``, ``0``, ``m1``, ``m5``):
``rp_<tag>_<H>`` (mean over the 5 instances), ``rp_<tag>_<H>_realised`` (per-run regret, mean),
``nash_regret_<H>`` (= ``rp_0_<H>``) and ``nash_regret_<H>_<instance>``, ``rp_m5_<H>_synthetic``.

Arms: the method ``fair_pe``; the baseline ``linnash``; ``fair_ucb`` (the paper's second instantiation),
``fair_pe_linnash_width`` (our width replaced by LinNash's), ``pe`` and ``oful`` (Phase 1 removed) as
ablations; the reference ``uniform``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from zoo._eval import Claim, Protocol, Setting, Tuning, beats
from zoo.fair_lin_bandit.instances import DATASETS, build_instance
from zoo.fair_lin_bandit.policies import run_episode
from zoo.fair_lin_bandit.regret import P_TAGS, regret_table

TUNING_FILE = Path(__file__).with_name("tuning.json")
C1_GRID = (0.25, 0.5, 1.0, 2.0)
LINNASH_GRID = (0.5, 1.0, 2.0, 3.0)
VALIDATION_SEEDS = tuple(range(100, 110))


def _tuned() -> dict:
    if TUNING_FILE.is_file():
        return json.loads(TUNING_FILE.read_text())
    return {"c1_pe": 1.0, "c1_ucb": 1.0, "linnash_multiplier": 3.0, "scores": {}}


TUNED = _tuned()
_NOTE = (
    "mean Nash regret at T = 20k over the 5 instances of validation seeds 100-109 (python -m zoo.fair_lin_bandit.tune)"
)

PROTOCOL = Protocol(
    method="fair_pe",
    baselines=("linnash",),
    ablations=("fair_ucb", "fair_pe_linnash_width", "pe", "oful"),
    references=("uniform",),
    settings={
        "horizons": Setting([2000, 20000], "horizons T (shortest and longest: the sublinearity claim)", minimum=10),
        "datasets": Setting(list(DATASETS), "instances (mean metrics average over them)"),
        "num_arms": Setting(200, "K, arms sampled per seed", minimum=2),
        "replicates": Setting(4, "independent runs per instance; their mean estimates E[mu_x_t]", minimum=1),
        "target_p": Setting(0.0, "p whose regret FairLinBandit targets (Phase 1 length)"),
        "c1_pe": Setting(float(TUNED["c1_pe"]), "Phase 1 constant of fair_pe (and its width ablation), tuned"),
        "c1_ucb": Setting(float(TUNED["c1_ucb"]), "Phase 1 constant of fair_ucb, tuned"),
        "linnash_multiplier": Setting(float(TUNED["linnash_multiplier"]), "LinNash Part I multiplier (3 published)"),
    },
    tuning={
        "fair_pe": Tuning("validation", {"c1": list(C1_GRID)}, len(C1_GRID), _NOTE),
        "fair_ucb": Tuning("validation", {"c1": list(C1_GRID)}, len(C1_GRID), _NOTE),
        "linnash": Tuning("validation", {"part1_multiplier": list(LINNASH_GRID)}, len(LINNASH_GRID), _NOTE),
        "fair_pe_linnash_width": Tuning("none", {}, 0, "fair_pe's tuned c1"),
        "pe": Tuning("none", {}, 0, "no constant to tune (delta = 1/T)"),
        "oful": Tuning("none", {}, 0, "no constant to tune (delta = 1/T)"),
        "uniform": Tuning("none", {}, 0, "no parameter"),
    },
    seeds=tuple(range(10)),
    headline=("nash_regret_20k",),
    panels=2,
)  # fmt: skip


def horizon_tag(horizon: int) -> str:
    return f"{horizon // 1000}k" if horizon % 1000 == 0 else str(horizon)


def policy_args(arm: str, settings: dict) -> dict:
    c1 = settings["c1_ucb"] if arm == "fair_ucb" else settings["c1_pe"]
    return {"p": settings["target_p"], "c1": c1, "linnash_multiplier": settings["linnash_multiplier"]}


def measure_instances(arm: str, seed: int, settings: dict, curves: dict | None = None) -> dict[str, float]:
    """Every metric of ``arm`` on the instances of ``seed`` (``curves``, if given, receives mean-reward curves)."""
    scores: dict[str, float] = {}
    for horizon in settings["horizons"]:
        tag = horizon_tag(horizon)
        tables = {}
        for name in settings["datasets"]:
            instance = build_instance(name, seed, settings["num_arms"])
            outcome = run_episode(
                arm, instance.arms, instance.mu, horizon, seed, settings["replicates"], **policy_args(arm, settings)
            )
            tables[name] = regret_table(outcome["expected"], outcome["realised"], instance.best, tuple(P_TAGS))
            scores[f"nash_regret_{tag}_{name}"] = tables[name]["rp_0"]
            if curves is not None and horizon == max(settings["horizons"]):
                curves[name] = _downsample(outcome["expected"].mean(axis=0))
        for key in tables[settings["datasets"][0]]:
            scores[f"{key.replace('_realised', '')}_{tag}{'_realised' if key.endswith('_realised') else ''}"] = float(
                np.mean([table[key] for table in tables.values()])
            )
        scores[f"nash_regret_{tag}"] = scores[f"rp_0_{tag}"]
        if "synthetic" in tables:
            scores[f"rp_m5_{tag}_synthetic"] = tables["synthetic"]["rp_m5"]
    return scores


def _downsample(curve: np.ndarray, points: int = 100) -> list[float]:
    """Mean reward over ``points`` equal blocks of rounds."""
    return [round(float(block.mean()), 4) for block in np.array_split(curve, points)]


def measure(arm: str, run) -> dict[str, float]:
    """One arm on the 5 instances of ``run.seed`` at every horizon."""
    curves = {} if run.seed == run.protocol.seeds[0] else None
    scores = measure_instances(arm, run.seed, run.settings, curves)
    if curves:
        run.extras.setdefault("reward_curves", {})[arm] = curves
    return scores


def _tags(settings: dict) -> tuple[str, str]:
    horizons = sorted(settings["horizons"])
    return horizon_tag(horizons[0]), horizon_tag(horizons[-1])


def claims(result: dict) -> list[Claim]:
    arms, settings = result["arms"], result["settings"]
    short, long = _tags(settings)
    datasets = settings["datasets"]
    nash = f"nash_regret_{long}"
    out = [beats(result, nash, "fair_pe", "uniform", margin=0.05, higher_is_better=False)]
    for arm in ("fair_pe", "fair_ucb"):
        wins = sum(arms[arm][f"{nash}_{name}"] <= 0.8 * arms["linnash"][f"{nash}_{name}"] for name in datasets)
        needed = min(4, len(datasets))
        out.append(
            Claim.at_least(
                f"{arm}_beats_linnash_by_20pct",
                f"{arm}: Nash regret at {long} >= 20% below linnash's on >= {needed} "
                f"of {len(datasets)} instances (count)",
                wins,
                needed,
                "linnash",
            )
        )
    for arm in ("fair_pe", "fair_ucb"):
        for p, tag in P_TAGS.items():
            ratio = arms[arm][f"rp_{tag}_{long}"] / max(arms[arm][f"rp_{tag}_{short}"], 1e-12)
            out.append(
                Claim.at_most(
                    f"{arm}_sublinear_rp_{tag}",
                    f"{arm}: R_p({long}) < 0.5 R_p({short}) at p = {p:g} (ratio)",
                    ratio,
                    0.5,
                )
            )
    if "synthetic" in datasets:
        for arm in ("fair_pe", "fair_ucb"):
            metric = f"rp_m5_{long}_synthetic"
            gap = arms["oful"][metric] - arms[arm][metric]
            out.append(
                Claim.at_least(
                    f"{arm}_rp_m5_synthetic_below_oful",
                    f"{arm}: R_-5({long}) on synthetic below oful's (oful - {arm})",
                    gap,
                    1e-9,
                    "oful",
                )
            )
    gap = arms["fair_pe_linnash_width"][nash] - arms["fair_pe"][nash]
    out.append(
        Claim.at_least(
            "fair_pe_width_helps",
            f"fair_pe's Nash regret at {long} not above fair_pe_linnash_width's (their difference)",
            gap,
            0.0,
            "fair_pe_linnash_width",
        )
    )
    headroom = min(arms["uniform"][f"{nash}_{name}"] for name in datasets)
    out.append(
        Claim.at_least(
            "uniform_headroom",
            f"uniform's Nash regret at {long} >= 0.05 on every instance (min)",
            headroom,
            0.05,
            "uniform",
        )
    )
    return out  # fmt: skip


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    """A built module's Nash regret on phishing, test seed 0 (no weights: the registry's configuration).

    Args:
        module: A :class:`~zoo.fair_lin_bandit.module.FairLinBanditModule`.
        limit: Horizon instead of the module's.
    """
    instance = build_instance("phishing", 0)
    outcome = module.run(instance.arms, instance.mu, horizon=limit)
    return {"nash_regret": regret_table(outcome["expected"], outcome["realised"], instance.best, (0.0,))["rp_0"]}


def plot(result: dict, axes) -> None:
    """Nash regret per instance at the long horizon, and the mean-reward curves of seed 0 on synthetic."""
    arms, settings = result["arms"], result["settings"]
    _, long = _tags(settings)
    names = list(arms)
    datasets = settings["datasets"]
    ax = axes[0]
    width = 0.8 / len(names)
    for i, arm in enumerate(names):
        values = [arms[arm][f"nash_regret_{long}_{name}"] for name in datasets]
        ax.bar(np.arange(len(datasets)) + i * width, values, width, label=arm)
    ax.set_xticks(np.arange(len(datasets)) + 0.4 - width / 2, datasets, fontsize=7)
    ax.set(ylabel=f"Nash regret at T = {long}", title="Nash regret (lower is better)")
    ax.legend(fontsize=6)
    ax = axes[1]
    extras = result["extras"].get(str(result["seeds"][0]), {}).get("reward_curves", {})
    for arm, curves in extras.items():
        curve = curves.get("synthetic") or next(iter(curves.values()))
        ax.plot(np.linspace(0, 1, len(curve)), curve, label=arm, lw=1.2)
    ax.set(xlabel="fraction of the horizon", ylabel="mean expected reward", title=f"reward over time (T = {long})")
    ax.legend(fontsize=6)
