"""``zoo eval dwp``: DWP against standard training, noise injection (K = 1 and 4), the lambda = 0 ablation and two
references without gradient learning (the network untrained; nearest class mean), on Fashion-MNIST.

Metrics on the first ``eval_images`` test images: ``acc_sigma_<s>`` (additive max-scaled mismatch) and
``acc_mult_sigma_<s>`` (multiplicative), mean over ``draws`` draws; ``acc_drift_<t>`` and ``drift_range`` on the
simulated PCM chip; energy per inference at matched precision (:mod:`zoo.dwp.energy`).
"""

from __future__ import annotations

import dataclasses
import json
import statistics

import torch

from zoo._errors import ZooError
from zoo.dwp.tune import TUNING_FILE
from zoo.eval import Arm, Claim, Protocol, Setting, Step, Tuning, beats
from zoo.quant.cim import CIMConfig, PCMNoise, drift, program

KINDS = {"additive": "acc_sigma", "multiplicative": "acc_mult_sigma"}
DRIFT_TIMES = {"1s": 1.0, "1h": 3600.0, "1d": 86400.0, "1mo": 30 * 86400.0, "1y": 365 * 86400.0}
PROGRAMMINGS = 3
SEVERE_LOSS = 0.30  # the spec's severe level: the first sigma at which standard training lost 30 points
TUNED = json.loads(TUNING_FILE.read_text())  # written by python -m zoo.dwp.tune
PALETTE = ("tab:red", "tab:gray", "tab:green", "tab:olive", "tab:orange", "tab:blue", "black")  # of PROTOCOL.arms


def _tuning() -> dict[str, Tuning]:
    """The validation-split tuning record of every trained arm, from ``zoo/dwp/tuning.json``."""
    selection, protocol = TUNED["selection"], TUNED["protocol"]
    where = (
        f"trained on {protocol['train_limit']} training images for {protocol['epochs']} epoch(s), seed "
        f"{protocol['seed']}, scored on the 2,000 validation images (additive levels {protocol['levels']}, "
        f"{protocol['draws']} draws); severe level for selection: {selection['severe']}"
    )
    records = {}
    for arm in ("dwp", "standard", "noise_injection", "noise_injection_k4"):
        trials = [t for t in TUNED["trials"] if t["arm"] == arm]
        keys = dict.fromkeys(key for trial in trials for key in trial["config"])  # first-seen order, as tried
        grid = {key: list(dict.fromkeys(t["config"][key] for t in trials if key in t["config"])) for key in keys}
        records[arm] = Tuning("validation", grid, len(trials), f"chosen {selection['chosen'][arm]}; {where}")
    records["dwp_no_diversity"] = Tuning("none", {}, 0, "DWP's chosen configuration with lam = 0 (the ablation)")
    return records


def k4_overrides(run=None) -> list[str]:
    """noise_injection_k4's validation choice (``tuning.json["selection"]``) on top of noise_injection's recipe."""
    chosen = TUNED["selection"]["chosen"]["noise_injection_k4"]
    return [f"--model.init_args.{key}={value}" for key, value in chosen.items()]


def eval_cim_config() -> CIMConfig:
    """The simulated chip of the drift sweep and the energy report: PCM devices, 8-bit DAC and ADC."""
    return CIMConfig(dac_bits=8, adc_bits=8, adc_bound=12.0, noise=PCMNoise(), drift_compensation="global")


def _batches(limit: int | None = None, size: int = 1000) -> list[tuple[torch.Tensor, torch.Tensor]]:
    from zoo.dwp.data import load_split

    if limit is not None and limit > 10000:
        raise ZooError(f"--set eval_images={limit}: the test split has 10000 images")
    x, y = load_split("test", limit=limit)
    return [(x[i : i + size], y[i : i + size]) for i in range(0, len(y), size)]


def class_means_model():
    """Nearest class mean as a DWPModule: logits ``mu_c . x - |mu_c|^2 / 2``, ``mu_c`` over the training split."""
    from zoo.dwp.data import load_split
    from zoo.dwp.module import DWPModule

    x, y = load_split("train")
    means = torch.stack([x[y == c].flatten(1).mean(0) for c in range(10)])
    model = DWPModule(mode="standard", backbone="mlp", channels=())
    model.net[-1].weight.data.copy_(means)
    model.net[-1].bias.data.copy_(-0.5 * means.pow(2).sum(1))
    return model.eval()


@torch.no_grad()
def sweep(module, batches, levels, kind: str, draws: int, seed: int) -> dict[str, float]:
    """Accuracy per mismatch level, mean over draws (seed ``1000 * seed + draw``); level 0 is evaluated once."""
    from zoo.dwp.dwp import perturbed_accuracy

    def accuracy(s: float) -> float:
        draw_seeds = [1000 * seed + d for d in range(draws if s > 0 else 1)]
        return statistics.fmean(perturbed_accuracy(module.net.eval(), batches, s, kind, draw_seeds))

    return {f"{KINDS[kind]}_{s:g}": accuracy(s) for s in levels}


@torch.no_grad()
def drift_sweep(module, batches, seed: int) -> dict[str, float]:
    """Accuracy of the simulated chip at each time after programming, each programmed chip followed over time."""
    chip = module.to_cim(eval_cim_config()).net
    scores: dict[str, list[float]] = {t: [] for t in DRIFT_TIMES}
    for repeat in range(PROGRAMMINGS):
        program(chip, seed=10_000 + 100 * seed + repeat)
        for i, (label, t_seconds) in enumerate(DRIFT_TIMES.items()):
            drift(chip, t_seconds, seed=20_000 + 100 * seed + 10 * repeat + i)
            correct = sum((chip(x).argmax(-1) == y).sum().item() for x, y in batches)
            scores[label].append(correct / sum(len(y) for _, y in batches))
    means = {f"acc_drift_{t}": statistics.fmean(v) for t, v in scores.items()}
    return {**means, "drift_range": max(means.values()) - min(means.values())}


def _sweep_keys(settings) -> tuple[list[str], list[float]]:
    kinds = [settings["mismatch"]] if settings["mismatch"] in KINDS else list(KINDS)
    return [KINDS[kind] for kind in kinds], sorted({0.0, *settings["sigmas"]})


def score(arm: str, module, run) -> dict[str, float]:
    """The chip over time, every mismatch sweep of the settings and the energy model of one arm's network."""
    from zoo.dwp.energy import matched_precision_energy

    settings = run.settings
    batches = run.memo("test", lambda: _batches(settings["eval_images"]))
    prefixes, levels = _sweep_keys(settings)
    scores = drift_sweep(module, batches, run.seed)
    for kind in (kind for kind, prefix in KINDS.items() if prefix in prefixes):
        scores.update(sweep(module, batches, levels, kind, settings["draws"], run.seed))
    cim = eval_cim_config()
    return {**scores, **matched_precision_energy(module.to_cim(cim).net, cim.dac_bits, cim.adc_bits)}


def severe_level(result: dict, prefix: str) -> tuple[float, bool]:
    """``(the first sigma at which standard training lost 30 points, True)``, else ``(the largest level, False)``."""
    _, levels = _sweep_keys(result["settings"])
    standard = result["arms"]["standard"]
    lost = [s for s in levels[1:] if standard[f"{prefix}_0"] - standard[f"{prefix}_{s:g}"] >= SEVERE_LOSS]
    return (lost[0], True) if lost else (levels[-1], False)


def claims(result: dict) -> list[Claim]:
    """The spec's acceptance checks (accuracies in [0, 1], so 15 points is 0.15)."""
    (prefixes, levels), arms = _sweep_keys(result["settings"]), result["arms"]
    dwp, standard = arms["dwp"], arms["standard"]
    clean = f"{prefixes[0]}_0"

    def at_least(claim_id: str, text: str, value: float, threshold: float, versus: str | None = None) -> Claim:
        return Claim.at_least(claim_id, text, value, threshold, versus=versus, arm="dwp")

    def beats_at(severe: str, other: str, margin: float, text: str) -> Claim:
        claim = beats(result, severe, "dwp", other, margin=margin)
        return dataclasses.replace(claim, text=f"{text}; {claim.text}")

    text = "DWP's clean accuracy at most 2 points below standard training's"
    found = [at_least("dwp_clean_within_2_of_standard", text, dwp[clean] - standard[clean], -0.02, "standard")]
    for prefix in prefixes:
        level, lost = severe_level(result, prefix)
        severe = f"{prefix}_{level:g}"
        where = f"the first level at which standard training lost 30 points ({severe})"
        if not lost:
            where = f"{severe}: standard training never lost 30 points, so the largest level"
        found.append(beats_at(severe, "standard", 0.15, f"DWP at least 15 points above standard at {where}"))
        gaps = {o: {s: dwp[f"{prefix}_{s:g}"] - arms[o][f"{prefix}_{s:g}"] for s in levels} for o in arms}
        for other in ("noise_injection_k4", "dwp_no_diversity"):
            worst = min(gaps[other], key=gaps[other].get)
            text = f"DWP at least {other}'s mean accuracy at every level of {prefix} (value: least gap, at {worst:g})"
            found.append(at_least(f"dwp_at_least_{other}_every_{prefix}", text, gaps[other][worst], 0.0, other))
            found.append(beats_at(severe, other, 0.02, f"DWP at least 2 points above {other} at {where}"))
        text = f"DWP at most 3 points below noise injection (K = 1) at every level of {prefix} (the spec; smallest gap)"
        least = min(gaps["noise_injection"].values())
        found.append(at_least(f"dwp_within_3_of_noise_injection_{prefix}", text, least, -0.03, "noise_injection"))
        found.append(beats(result, severe, "dwp", "reference_untrained", margin=0.10))
    year = dwp["acc_drift_1y"] - standard["acc_drift_1y"]
    ratio = dwp["energy_cim_uJ"] / dwp["energy_digital_int8_uJ"]
    text = "After 1 year on the simulated PCM chip, DWP at least standard training's accuracy"
    found.append(at_least("dwp_1y_at_least_standard", text, year, 0.0, "standard"))
    text = "DWP's chip accuracy range, 1 s to 1 year, at most 4 points"
    found.append(Claim.at_most("dwp_drift_range", text, dwp["drift_range"], 0.04, arm="dwp"))
    found.append(beats(result, clean, "dwp", "reference_class_means"))
    text = "8-bit CIM energy per inference below 8-bit digital (matched precision; CIM per-op energies assumed)"
    found.append(Claim.at_most("cim_over_int8_digital_energy", text, ratio, 1.0, kind="validity", arm="dwp"))
    return found


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    """Clean accuracy and accuracy at additive mismatch 0.3 (the eval's draws of seed 0) on the first ``limit``."""
    return sweep(module, _batches(limit), (0.0, 0.3), "additive", PROTOCOL.settings["draws"].default, 0)


def _colour(arm: str) -> str | None:
    return dict(zip(PROTOCOL.arms, PALETTE)).get(arm)


def _errorbars(ax, result, keys, xs, **labels) -> None:
    """Every arm's mean +- std of ``keys`` against ``xs`` (references dashed)."""
    for arm, values in result["arms"].items():
        style = {"color": _colour(arm), "label": arm, "marker": "o", "capsize": 2, "markersize": 3}
        style["linestyle"] = "--" if arm.startswith("reference") else "-"
        ax.errorbar(xs, [values[k] for k in keys], [values[k + "_std"] for k in keys], **style)
    ax.set(**labels)
    ax.legend(fontsize=5)


def plot(result: dict, axes) -> None:
    """Accuracy against both mismatch kinds, the clean-versus-robust trade-off (test; validation trials), chip drift."""
    prefixes, levels = _sweep_keys(result["settings"])
    names = {"acc_sigma": "additive max-scaled", "acc_mult_sigma": "multiplicative"}
    for ax, prefix in zip(axes[:2], prefixes, strict=False):
        keys, label = [f"{prefix}_{s:g}" for s in levels], f"{names[prefix]} mismatch sigma"
        _errorbars(ax, result, keys, levels, xlabel=label, ylabel="test accuracy (mean ± std, seeds)")
    # trade-off on the test split: clean accuracy (x) against accuracy at each level (y), one marker per level
    ax, prefix = axes[2], prefixes[0]
    markers = "ov^sDP*"
    for arm, values in result["arms"].items():
        clean, colour = values[f"{prefix}_0"], _colour(arm)
        for i, s in enumerate(levels[1:]):
            robust = values[f"{prefix}_{s:g}"]
            ax.scatter(clean, robust, color=colour, marker=markers[i % 7], s=14, label=None if i else arm)
    ax.plot([0, 1], [0, 1], color="0.8", linewidth=0.5)
    ax.set(xlabel="clean test accuracy", ylabel=f"test accuracy under {names[prefix]} mismatch")
    ax.set_title("markers: " + ", ".join(f"{markers[i]}={s:g}" for i, s in enumerate(levels[1:])), fontsize=6)
    ax.legend(fontsize=5)
    # every validation trial: clean against the tuning's severe level, annotated with sigma_train
    ax = axes[3]
    severe = TUNED["selection"]["severe"]
    for arm in ("standard", "noise_injection", "noise_injection_k4", "dwp"):
        trials = [t for t in TUNED["trials"] if t["arm"] == arm]
        xs, ys = [t["val"]["acc_sigma_0"] for t in trials], [t["val"][severe] for t in trials]
        ax.scatter(xs, ys, color=_colour(arm), s=12, label=f"{arm} (validation trials)")
        for trial, x, y in zip(trials, xs, ys, strict=True):
            ax.annotate(f"{trial['config'].get('sigma_train', 0):g}", (x, y), fontsize=5)
    ax.set(xlabel="clean validation accuracy (tuning budget)", ylabel=f"validation {severe} (label: sigma_train)")
    ax.legend(fontsize=5)
    keys, label = [f"acc_drift_{t}" for t in DRIFT_TIMES], "time after programming (simulated PCM chip)"
    _errorbars(axes[4], result, keys, range(len(DRIFT_TIMES)), xlabel=label, ylabel="test accuracy")
    axes[4].set_xticks(range(len(DRIFT_TIMES)), list(DRIFT_TIMES))


PROTOCOL = Protocol(
    method="dwp",
    baselines=(
        "standard",
        "noise_injection",
        Arm("noise_injection_k4", base="noise_injection", overrides=k4_overrides, help="noise injection, K = 4"),
    ),
    ablations=(Arm("dwp_no_diversity", base="dwp", overrides=("--model.init_args.lam=0.0",), help="DWP, lam = 0"),),
    references=(
        Arm("reference_untrained", measure=lambda run: score("reference_untrained", run.untrained("dwp"), run)),
        Arm("reference_class_means", measure=lambda run: score("reference_class_means", class_means_model(), run)),
    ),
    settings={
        "mismatch": Setting("both", "weight-mismatch kind of the sigma sweep", choices=(*KINDS, "both")),
        "sigmas": Setting([0.1, 0.2, 0.3, 0.5, 0.7], "mismatch levels (0 is always added)", minimum=0),
        "draws": Setting(5, "mismatch draws per level and seed", minimum=1),
        "eval_images": Setting(1000, "first test images scored, 1 to 10000", minimum=1),
    },
    tuning=_tuning(),
    score=score,
    claims=claims,
    plot=plot,
    score_pretrained=score_pretrained,
    lower_is_better=("drift_range", "energy_cim_uJ", "energy_digital_int8_uJ", "energy_digital_fp32_uJ"),
    panels=5,
    steps=(Step("tune", ("python", "-m", "zoo.dwp.tune"), "validation trials -> tuning.json (the recipes' values)"),),
)
