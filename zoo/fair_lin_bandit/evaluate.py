"""``zoo eval fair_lin_bandit``: FairLinBandit (PE and UCB) against LinNash, ablations and uniform, same instances.

A seed ``s`` is one set of instances: K = 200 arms sampled with seed ``s`` from each of the 5 instances (test seeds
0-9; :mod:`zoo.fair_lin_bandit.tune` uses 100-109). Every arm is a simulation (``Arm(measure=...)``): ``replicates``
independent runs per instance and horizon; ``E[mu_{x_t}]`` is their mean conditional expected reward and ``R_p =
mu* - M_p(E[mu])``. Arms: the method ``fair_pe``, the baseline ``linnash``, the ablations ``fair_ucb`` (the paper's
second instantiation), ``fair_pe_linnash_width`` (LinNash's width), ``pe`` and ``oful`` (no Phase 1), the
reference ``uniform``. Metrics per arm and seed (``<H>`` = ``2k`` / ``20k``, ``<tag>`` = ``1``, ``0p5``, ``0``,
``m1``, ``m5``): ``rp_<tag>_<H>`` (mean over the instances), ``rp_<tag>_<H>_realised`` (per-run regret, mean),
``nash_regret_<H>`` (= ``rp_0_<H>``) and ``nash_regret_<H>_<instance>``, ``rp_m5_<H>_synthetic``.
"""

from __future__ import annotations

import functools
import json

import numpy as np

from zoo.eval import Arm, Claim, Protocol, Setting, Step, Tuning, beats
from zoo.fair_lin_bandit.instances import DATASETS, build_instance
from zoo.fair_lin_bandit.policies import run_episode
from zoo.fair_lin_bandit.regret import P_TAGS, regret_table
from zoo.fair_lin_bandit.tune import C1_GRID, LINNASH_GRID, TUNING_FILE

TUNED = json.loads(TUNING_FILE.read_text())
HORIZONS = [2000, 20000]
_NOTE = (
    "mean Nash regret at T = 20k over the 5 instances of validation seeds 100-109 (python -m zoo.fair_lin_bandit.tune)"
)


def horizon_tag(horizon: int) -> str:
    return f"{horizon // 1000}k" if horizon % 1000 == 0 else str(horizon)


def measure(arm: str, run) -> dict[str, float]:
    """One arm on the instances of ``run.seed`` at every horizon; its mean-reward curves at the longest horizon
    (means over 100 equal blocks of rounds) go to the extras."""
    s, scores = run.settings, {}
    curves = run.extras.setdefault("reward_curves", {}).setdefault(arm, {})
    c1 = s["c1_ucb"] if arm == "fair_ucb" else s["c1_pe"]
    args = {"p": s["target_p"], "c1": c1, "linnash_multiplier": s["linnash_multiplier"]}
    for horizon in s["horizons"]:
        tag, tables = horizon_tag(horizon), {}
        for name in s["datasets"]:
            instance = build_instance(name, run.seed, s["num_arms"])
            outcome = run_episode(arm, instance.arms, instance.mu, horizon, run.seed, s["replicates"], **args)
            tables[name] = regret_table(outcome["expected"], outcome["realised"], instance.best, tuple(P_TAGS))
            scores[f"nash_regret_{tag}_{name}"] = tables[name]["rp_0"]
            if horizon == max(s["horizons"]):
                curves[name] = [round(float(b.mean()), 4) for b in np.array_split(outcome["expected"].mean(0), 100)]
        for key in tables[s["datasets"][0]]:
            metric = f"{key.removesuffix('_realised')}_{tag}{'_realised' if key.endswith('_realised') else ''}"
            scores[metric] = float(np.mean([table[key] for table in tables.values()]))
        scores[f"nash_regret_{tag}"] = scores[f"rp_0_{tag}"]
        if "synthetic" in tables:
            scores[f"rp_m5_{tag}_synthetic"] = tables["synthetic"]["rp_m5"]
    return scores


def _arm(name: str) -> Arm:
    return Arm(name, measure=functools.partial(measure, name))


def _tags(settings: dict) -> tuple[str, str]:
    horizons = sorted(settings["horizons"])
    return horizon_tag(horizons[0]), horizon_tag(horizons[-1])


#: A claim about fair_pe (the method) is a paper claim; one about fair_ucb alone can only be a check.
_ABOUT = {"fair_pe": {"arm": "fair_pe", "kind": "paper"}, "fair_ucb": {"arm": "fair_ucb", "kind": "paper"}}


def claims(result: dict) -> list[Claim]:
    arms, settings = result["arms"], result["settings"]
    (short, long), datasets = _tags(settings), settings["datasets"]
    nash, n, both = f"nash_regret_{long}", len(datasets), ("fair_pe", "fair_ucb")
    needed = min(4, n)
    out = [beats(result, nash, "fair_pe", "uniform", margin=0.05, higher_is_better=False)]
    for arm in both:
        wins = sum(arms[arm][f"{nash}_{name}"] <= 0.8 * arms["linnash"][f"{nash}_{name}"] for name in datasets)
        text = f"{arm}: Nash regret at {long} >= 20% below linnash's on >= {needed} of {n} instances (count)"
        out.append(Claim.at_least(f"{arm}_beats_linnash_by_20pct", text, wins, needed, versus="linnash", **_ABOUT[arm]))
    for arm in both:
        for p, tag in P_TAGS.items():
            ratio = arms[arm][f"rp_{tag}_{long}"] / max(arms[arm][f"rp_{tag}_{short}"], 1e-12)
            text = f"{arm}: R_p({long}) < 0.5 R_p({short}) at p = {p:g} (ratio)"
            out.append(Claim.at_most(f"{arm}_sublinear_rp_{tag}", text, ratio, 0.5, **_ABOUT[arm]))
    for arm in both if "synthetic" in datasets else ():
        gap = arms["oful"][f"rp_m5_{long}_synthetic"] - arms[arm][f"rp_m5_{long}_synthetic"]
        text = f"{arm}: R_-5({long}) on synthetic below oful's (oful - {arm})"
        out.append(Claim.at_least(f"{arm}_rp_m5_synthetic_below_oful", text, gap, 1e-9, versus="oful", **_ABOUT[arm]))
    gap = arms["fair_pe_linnash_width"][nash] - arms["fair_pe"][nash]
    text = f"fair_pe's Nash regret at {long} not above fair_pe_linnash_width's (their difference)"
    out.append(Claim.at_least("fair_pe_width_helps", text, gap, 0.0, versus="fair_pe_linnash_width", arm="fair_pe"))
    runs = result["per_seed"]["uniform"].values()
    worst = {name: min(scores[f"{nash}_{name}"] for scores in runs) for name in datasets}
    text = f"uniform's Nash regret at {long} >= 0.05 on every instance and seed (each instance's worst seed)"
    out.append(Claim.gate("uniform_headroom", text, worst, 0.05, arm="uniform"))
    return out


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    """A built :class:`~zoo.fair_lin_bandit.module.FairLinBanditModule`'s Nash regret on phishing, test seed 0, over
    ``limit`` rounds (default: the module's horizon); no weights: the registry's configuration."""
    instance = build_instance("phishing", 0)
    outcome = module.run(instance.arms, instance.mu, horizon=limit)
    return {"nash_regret": regret_table(outcome["expected"], outcome["realised"], instance.best, (0.0,))["rp_0"]}


def plot(result: dict, axes) -> None:
    """Nash regret per instance at the long horizon, and the mean-reward curves of the first seed on synthetic."""
    arms, settings = result["arms"], result["settings"]
    _, long = _tags(settings)
    names, datasets = list(arms), settings["datasets"]
    ax, width = axes[0], 0.8 / len(names)
    for i, arm in enumerate(names):
        values = [arms[arm][f"nash_regret_{long}_{name}"] for name in datasets]
        ax.bar(np.arange(len(datasets)) + i * width, values, width, label=arm)
    ax.set_xticks(np.arange(len(datasets)) + 0.4 - width / 2, datasets, fontsize=7)
    ax.set(ylabel=f"Nash regret at T = {long}", title="Nash regret (lower is better)")
    ax = axes[1]
    extras = result["extras"].get(str(result["seeds"][0]), {}).get("reward_curves", {})
    for arm, curves in extras.items():
        curve = curves.get("synthetic") or next(iter(curves.values()))
        ax.plot(np.linspace(0, 1, len(curve)), curve, label=arm, lw=1.2)
    ax.set(xlabel="fraction of the horizon", ylabel="mean expected reward", title=f"reward over time (T = {long})")
    for ax in axes:
        ax.legend(fontsize=6)


#: Every metric is a regret (lower is better), by horizon tag.
_REGRETS = ("nash_regret_{}", *(f"nash_regret_{{}}_{name}" for name in DATASETS), "rp_m5_{}_synthetic")
_REGRETS += tuple(f"rp_{tag}_{{}}{realised}" for tag in P_TAGS.values() for realised in ("", "_realised"))
PROTOCOL = Protocol(
    method=_arm("fair_pe"),
    baselines=(_arm("linnash"),),
    # fair_ucb is the paper's second instantiation (a method variant); OFUL, the standard linear bandit without
    # fairness, is a reference: it uses none of the method and has no constant to tune (delta = 1/T)
    ablations=tuple(_arm(name) for name in ("fair_ucb", "fair_pe_linnash_width", "pe")),
    references=(_arm("oful"), _arm("uniform")),
    method_variants=("fair_ucb",),
    settings={
        "horizons": Setting(HORIZONS, "horizons T (shortest and longest: the sublinearity claim)", minimum=10),
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
        **dict.fromkeys(("pe", "oful"), Tuning("none", {}, 0, "no constant to tune (delta = 1/T)")),
        "uniform": Tuning("none", {}, 0, "no parameter"),
    },
    claims=claims,
    plot=plot,
    score_pretrained=score_pretrained,
    seeds=tuple(range(10)),
    headline=("nash_regret_20k",),
    lower_is_better=tuple(metric.format(horizon_tag(h)) for h in HORIZONS for metric in _REGRETS),
    panels=2,
    steps=(
        Step("tune", ("python", "-m", "zoo.fair_lin_bandit.tune"), "tune c1 and LinNash's multiplier on validation "
             "seeds (tuning.json: the settings' defaults)"),
    ),
)  # fmt: skip
