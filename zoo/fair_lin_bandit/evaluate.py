"""``zoo eval fair_lin_bandit``: FairLinBandit (PE and UCB) against OFUL, LinNash, ablations and uniform.

A seed ``s`` is one set of instances: K = 200 arms sampled with seed ``s`` from each of the 5 decoy instances (the
spec's river / synthetic instances with 3 arms replaced by decoys of mean 0.01 along new directions, where OFUL
spends early rounds at 0.01; :func:`~zoo.fair_lin_bandit.instances.decoy_instance`); test seeds 0-9,
:mod:`zoo.fair_lin_bandit.tune` uses 100-109. Every arm is a simulation (``Arm(measure=...)``): ``replicates``
independent runs per instance and horizon; ``E[mu_{x_t}]`` is their mean conditional expected reward and ``R_p =
mu* - M_p(E[mu])``. Arms: the method ``fair_pe``, the baseline ``linnash`` (constants scaled on validation so that
it eliminates arms within T), the ablations ``fair_ucb`` (the paper's second instantiation),
``fair_pe_linnash_width`` (LinNash's width), ``pe`` (no Phase 1), the references ``oful`` (the standard linear
bandit), ``linnash_published`` (LinNash with its published constants, untuned by definition) and ``uniform``.
Metrics per arm and seed (``<H>`` = ``2k`` / ``20k``, ``<tag>`` = ``1``, ``0p5``, ``0``, ``m1``, ``m5``):
``rp_<tag>_<H>`` (mean over the instances), ``rp_<tag>_<H>_realised`` (per-run regret, mean), ``nash_regret_<H>``
(= ``rp_0_<H>``), per instance ``nash_regret_<H>_<instance>`` and ``rp_<1|m1|m5>_<H>_<instance>``, and
``active_arms_<H>`` (arms not eliminated after round T, mean).
"""

from __future__ import annotations

import functools
import json

import numpy as np

from zoo.eval import Arm, Claim, Protocol, Setting, Step, Tuning, beats
from zoo.eval.claims import paired_gains, std
from zoo.fair_lin_bandit.instances import ALL_DATASETS, DECOY_DATASETS, build_instance
from zoo.fair_lin_bandit.policies import run_episode
from zoo.fair_lin_bandit.regret import P_TAGS, regret_table
from zoo.fair_lin_bandit.tune import TUNING_FILE

TUNED = json.loads(TUNING_FILE.read_text())
HORIZONS = [2000, 20000]
#: The p-means regrets also reported per instance (average, Nash is nash_regret_*, p = -1 and -5).
PER_INSTANCE_TAGS = ("1", "m1", "m5")
_NOTE = (
    "mean Nash regret at T = 20k over the 5 decoy instances of validation seeds 100-109, grid extended past a "
    "winning edge (python -m zoo.fair_lin_bandit.tune)"
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
    args["linnash_width_scale"] = s["linnash_width_scale"]
    for horizon in s["horizons"]:
        tag, tables, active = horizon_tag(horizon), {}, []
        for name in s["datasets"]:
            instance = build_instance(name, run.seed, s["num_arms"])
            outcome = run_episode(arm, instance.arms, instance.mu, horizon, run.seed, s["replicates"], **args)
            tables[name] = regret_table(outcome["expected"], outcome["realised"], instance.best, tuple(P_TAGS))
            scores[f"nash_regret_{tag}_{name}"] = tables[name]["rp_0"]
            for p_tag in PER_INSTANCE_TAGS:
                scores[f"rp_{p_tag}_{tag}_{name}"] = tables[name][f"rp_{p_tag}"]
            active.append(float(np.mean(outcome["active"])))
            if horizon == max(s["horizons"]):
                curves[name] = [round(float(b.mean()), 4) for b in np.array_split(outcome["expected"].mean(0), 100)]
        for key in tables[s["datasets"][0]]:
            metric = f"{key.removesuffix('_realised')}_{tag}{'_realised' if key.endswith('_realised') else ''}"
            scores[metric] = float(np.mean([table[key] for table in tables.values()]))
        scores[f"nash_regret_{tag}"] = scores[f"rp_0_{tag}"]
        scores[f"active_arms_{tag}"] = float(np.mean(active))
    return scores


def _arm(name: str) -> Arm:
    return Arm(name, measure=functools.partial(measure, name))


def _tags(settings: dict) -> tuple[str, str]:
    horizons = sorted(settings["horizons"])
    return horizon_tag(horizons[0]), horizon_tag(horizons[-1])


#: A claim about fair_pe (the method) is a paper claim; one about fair_ucb alone can only be a check.
_ABOUT = {"fair_pe": {"arm": "fair_pe", "kind": "paper"}, "fair_ucb": {"arm": "fair_ucb", "kind": "paper"}}
FAIR = ("fair_pe", "fair_ucb")


def not_above(result: dict, metric: str, arm: str, other: str) -> Claim:
    """``arm``'s ``metric`` (a regret) is not above ``other``'s by more than the seed spread: the mean paired
    excess ``arm - other`` minus the standard deviation of the per-seed differences is at most 0."""
    gains = paired_gains(result, metric, arm, other, higher_is_better=False)  # other - arm, per seed
    excess, spread = -sum(gains) / len(gains), std(gains)
    text = (
        f"{arm}'s {metric} not above {other}'s by more than the seed spread (mean excess {excess:.4g} minus the "
        f"spread {spread:.3g} of the per-seed differences over {len(gains)} seeds)"
    )
    return Claim.at_most(f"{arm}_not_above_{other}_{metric}", text, excess - spread, 0.0, versus=other, **_ABOUT[arm])


def claims(result: dict) -> list[Claim]:
    arms, settings = result["arms"], result["settings"]
    (short, long), datasets = _tags(settings), settings["datasets"]
    nash, n = f"nash_regret_{long}", len(datasets)
    out = [beats(result, nash, "fair_pe", "uniform", margin=0.05, higher_is_better=False)]
    # the headline: against OFUL, the strongest simple rule (no fairness)
    for arm in FAIR:
        out.append(not_above(result, nash, arm, "oful"))
    needed = min(3, n)
    for arm in FAIR:
        wins = [
            name for name in datasets
            if beats(result, f"rp_m5_{long}_{name}", arm, "oful", higher_is_better=False).holds
        ]  # fmt: skip
        text = (
            f"{arm}: R_-5 at {long} below oful's by more than the seed spread on >= {needed} of {n} instances "
            f"(count; {', '.join(wins) or 'none'})"
        )
        out.append(Claim.at_least(f"{arm}_rp_m5_below_oful", text, len(wins), needed, versus="oful", **_ABOUT[arm]))
    # against LinNash with its constants scaled on validation (it eliminates arms within T)
    for arm in FAIR:
        out.append(beats(result, nash, arm, "linnash", higher_is_better=False))
    needed = min(4, n)
    for arm in FAIR:
        wins = sum(arms[arm][f"{nash}_{name}"] <= 0.8 * arms["linnash"][f"{nash}_{name}"] for name in datasets)
        text = f"{arm}: Nash regret at {long} >= 20% below linnash's on >= {needed} of {n} instances (count)"
        out.append(Claim.at_least(f"{arm}_beats_linnash_by_20pct", text, wins, needed, versus="linnash", **_ABOUT[arm]))
    for arm in FAIR:
        for p, tag in P_TAGS.items():
            ratio = arms[arm][f"rp_{tag}_{long}"] / max(arms[arm][f"rp_{tag}_{short}"], 1e-12)
            text = f"{arm}: R_p({long}) < 0.5 R_p({short}) at p = {p:g} (ratio)"
            out.append(Claim.at_most(f"{arm}_sublinear_rp_{tag}", text, ratio, 0.5, **_ABOUT[arm]))
    # Phase 1 (fair exploration + Bernstein elimination) against PE alone, at p <= -1, per instance
    helps = [
        f"p = {p:g} on {name}"
        for p, tag in ((-1.0, "m1"), (-5.0, "m5"))
        for name in datasets
        if beats(result, f"rp_{tag}_{long}_{name}", "fair_pe", "pe", higher_is_better=False).holds
    ]
    text = (
        f"fair_pe's R_p at {long} below pe's (no Phase 1) by more than the seed spread at p = -1 or -5 on some "
        f"instance (count of {2 * n}; {', '.join(helps) or 'none'})"
    )
    out.append(Claim.at_least("fair_pe_phase1_helps", text, len(helps), 1, versus="pe", **_ABOUT["fair_pe"]))
    gap = arms["fair_pe_linnash_width"][nash] - arms["fair_pe"][nash]
    text = f"fair_pe's Nash regret at {long} not above fair_pe_linnash_width's (their difference)"
    out.append(Claim.at_least("fair_pe_width_helps", text, gap, 0.0, versus="fair_pe_linnash_width", arm="fair_pe"))
    # gates: the instances leave room, and p-means fairness matters on them (OFUL's R_-5 >= 2 R_1)
    runs = result["per_seed"]["uniform"].values()
    worst = {name: min(scores[f"{nash}_{name}"] for scores in runs) for name in datasets}
    text = f"uniform's Nash regret at {long} >= 0.05 on every instance and seed (each instance's worst seed)"
    out.append(Claim.gate("uniform_headroom", text, worst, 0.05, arm="uniform"))
    runs = result["per_seed"]["oful"].values()
    worst = {
        name: min(scores[f"rp_m5_{long}_{name}"] / max(scores[f"rp_1_{long}_{name}"], 1e-12) for scores in runs)
        for name in datasets
    }
    text = f"oful's R_-5 at {long} >= 2x its R_1 on every instance and seed (ratio, each instance's worst seed)"
    out.append(Claim.gate("oful_rp_m5_headroom", text, worst, 2.0, arm="oful"))
    # LinNash: the tuned constants eliminate arms within T, the published ones do not (why both are shown)
    k = settings["num_arms"]
    text = f"linnash (scaled constants) has eliminated arms by T = {long} (mean arms left, of {k})"
    out.append(Claim.at_most("linnash_eliminates", text, arms["linnash"][f"active_arms_{long}"], k - 1,
                             kind="validity", arm="linnash"))  # fmt: skip
    text = f"linnash_published (published constants) eliminates no arm by T = {long} (mean arms left, of {k})"
    out.append(Claim.at_least("linnash_published_keeps_every_arm", text,
                              arms["linnash_published"][f"active_arms_{long}"], k, kind="validity",
                              arm="linnash_published"))  # fmt: skip
    return out


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    """A built :class:`~zoo.fair_lin_bandit.module.FairLinBanditModule`'s Nash regret on phishing_decoy, test seed 0,
    over ``limit`` rounds (default: the module's horizon); no weights: the registry's configuration."""
    instance = build_instance("phishing_decoy", 0)
    outcome = module.run(instance.arms, instance.mu, horizon=limit)
    return {"nash_regret": regret_table(outcome["expected"], outcome["realised"], instance.best, (0.0,))["rp_0"]}


def plot(result: dict, axes) -> None:
    """Nash regret per instance at the long horizon, and the mean-reward curves of the first seed on the last
    instance (synthetic_decoy by default)."""
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
        curve = curves.get(datasets[-1]) or next(iter(curves.values()))
        ax.plot(np.linspace(0, 1, len(curve)), curve, label=arm, lw=1.2)
    ax.set(xlabel="fraction of the horizon", ylabel="mean expected reward",
           title=f"reward over time, {datasets[-1]} (T = {long})")  # fmt: skip
    for ax in axes:
        ax.legend(fontsize=6)


#: Every metric is a regret (lower is better), by horizon tag; active_arms is a count (neither).
_REGRETS = ("nash_regret_{}", *(f"nash_regret_{{}}_{name}" for name in ALL_DATASETS))
_REGRETS += tuple(f"rp_{tag}_{{}}_{name}" for tag in PER_INSTANCE_TAGS for name in ALL_DATASETS)
_REGRETS += tuple(f"rp_{tag}_{{}}{realised}" for tag in P_TAGS.values() for realised in ("", "_realised"))
_GRIDS = TUNED["grids"]
PROTOCOL = Protocol(
    method=_arm("fair_pe"),
    baselines=(_arm("linnash"),),
    # fair_ucb is the paper's second instantiation (a method variant); OFUL, the standard linear bandit without
    # fairness, is a reference: it uses none of the method and has no constant to tune (delta = 1/T); so is
    # linnash_published, LinNash's published constants as a fixed point of comparison (the tuned one is the baseline)
    ablations=tuple(_arm(name) for name in ("fair_ucb", "fair_pe_linnash_width", "pe")),
    references=(_arm("oful"), _arm("linnash_published"), _arm("uniform")),
    method_variants=("fair_ucb",),
    settings={
        "horizons": Setting(HORIZONS, "horizons T (shortest and longest: the sublinearity claim)", minimum=10),
        "datasets": Setting(list(DECOY_DATASETS), "instances (mean metrics average over them); any of "
                            + ", ".join(ALL_DATASETS)),
        "num_arms": Setting(200, "K, arms sampled per seed", minimum=2),
        "replicates": Setting(4, "independent runs per instance; their mean estimates E[mu_x_t]", minimum=1),
        "target_p": Setting(0.0, "p whose regret FairLinBandit targets (Phase 1 length)"),
        "c1_pe": Setting(float(TUNED["c1_pe"]), "Phase 1 constant of fair_pe (and its width ablation), tuned; "
                         "0 = no Phase 1"),
        "c1_ucb": Setting(float(TUNED["c1_ucb"]), "Phase 1 constant of fair_ucb, tuned; 0 = no Phase 1"),
        "linnash_multiplier": Setting(float(TUNED["linnash_multiplier"]), "linnash's Part I multiplier, tuned "
                                      "(3 published; linnash_published uses 3)"),
        "linnash_width_scale": Setting(float(TUNED["linnash_width_scale"]), "scale of linnash's elimination "
                                       "constants 16 and 6, tuned (1 published; linnash_published uses 1)"),
    },
    tuning={
        "fair_pe": Tuning("validation", _GRIDS["fair_pe"], TUNED["trials"]["fair_pe"], _NOTE),
        "fair_ucb": Tuning("validation", _GRIDS["fair_ucb"], TUNED["trials"]["fair_ucb"], _NOTE),
        "linnash": Tuning("validation", _GRIDS["linnash"], TUNED["trials"]["linnash"], _NOTE),
        "linnash_published": Tuning("none", {}, 0, "the published constants (Part I multiplier 3, widths 16 and 6)"),
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
        Step("tune", ("python", "-m", "zoo.fair_lin_bandit.tune"), "tune c1 and LinNash's Part I multiplier and "
             "width scale on validation seeds (tuning.json: the settings' defaults)"),
    ),
)  # fmt: skip
