"""``zoo eval dwp``: DWP, standard training and plain noise injection side by side on Fashion-MNIST.

For every arm (its published checkpoint, or a fresh training run with ``--retrain``), on the first
``ZOO_DWP_EVAL_IMAGES`` test images (default 2,000, to fit the shared CPU budget; 10000 for the whole split):

* ``acc_sigma_<s>``: accuracy under additive max-scaled weight mismatch ``s``, mean over 10 draws per seed
  (each draw is one chip: the same perturbed weights for every test image);
* ``acc_mult_sigma_<s>``: the same under multiplicative mismatch (fewer draws), the other reading of the
  paper's "mismatch level";
* ``acc_drift_<t>``: accuracy on the simulated PCM chip (``zoo.quant.cim``: programming noise, drift, 1/f read
  noise, 8-bit DAC/ADC, global drift compensation) ``t`` after programming, mean over programmings;
  ``drift_range`` is the max minus the min over the drift sweep;
* ``energy_cim_uJ`` / ``energy_digital_uJ``: energy per inference from :func:`zoo.quant.cim.energy_report`.
"""

from __future__ import annotations

import copy
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from zoo.progress import track

ARMS = {"dwp": "dwp.fashion_mnist", "standard": "dwp.standard", "noise_injection": "dwp.noise_injection"}
SIGMAS = (0.0, 0.2, 0.3, 0.5, 0.7)
MULT_SIGMAS = (0.3, 0.5, 0.7)
DRAWS = 10
MULT_DRAWS = 3
DRIFT_TIMES = {"1s": 1.0, "1h": 3600.0, "1d": 86400.0, "1mo": 30 * 86400.0, "1y": 365 * 86400.0}
PROGRAMMINGS = 3
EVAL_BATCH = 2000
DEFAULT_EVAL_IMAGES = 2000
ROOT = Path(__file__).resolve().parents[2]
ENERGY_SETTINGS = (
    "cim_over_digital",
    "cim_breakdown_uJ",
    "digital_breakdown_uJ",
    "totals",
    "energy_model",
    "dac_bits",
    "adc_bits",
    "tile_size",
)


def eval_cim_config():
    """The simulated chip of the drift sweep and the energy report: PCM devices, 8-bit DAC and ADC."""
    from zoo.quant.cim import CIMConfig, PCMNoise

    return CIMConfig(
        dac_bits=8, adc_bits=8, adc_bound=12.0, tile_size=256, noise=PCMNoise(), drift_compensation="global"
    )


def eval_images() -> int:
    """How many test images ``zoo eval dwp`` scores: ``ZOO_DWP_EVAL_IMAGES`` (1 to 10000), default 2,000."""
    raw = os.environ.get("ZOO_DWP_EVAL_IMAGES", str(DEFAULT_EVAL_IMAGES))
    if not raw.isdigit() or not 1 <= int(raw) <= 10000:
        raise ValueError(f"ZOO_DWP_EVAL_IMAGES must be an integer from 1 to 10000 test images, not {raw!r}")
    return int(raw)


def _batches(limit: int | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    from zoo.dwp.data import load_split

    x, y = load_split("test", limit=limit)
    return [(x[i : i + EVAL_BATCH], y[i : i + EVAL_BATCH]) for i in range(0, len(y), EVAL_BATCH)]


@torch.no_grad()
def _accuracy(model: torch.nn.Module, batches) -> float:
    correct = sum((model(x).argmax(-1) == y).sum().item() for x, y in batches)
    return correct / sum(y.numel() for _, y in batches)


def mismatch_sweep(module, batches, sigmas, form: str, draws: int, seeds: list[int]) -> dict[float, list[float]]:
    """Accuracy per mismatch level: one value per draw (seed ``1000 * seed + draw``); sigma 0 is evaluated once."""
    from zoo.dwp.dwp import perturbed_accuracy

    net = module.net.eval()
    results = {}
    for sigma in sigmas:
        draw_seeds = [1000 * seed + draw for seed in seeds for draw in range(draws if sigma > 0 else 1)]
        results[sigma] = perturbed_accuracy(net, batches, sigma, form, draw_seeds)
    return results


def drift_sweep(
    module, batches, times: dict[str, float], programmings: int, seeds: list[int]
) -> dict[str, list[float]]:
    """Accuracy of the simulated chip at each time after programming; one chip per programming seed, followed
    through all times."""
    from zoo.quant.cim import drift, program

    chip = module.to_cim(eval_cim_config())
    results: dict[str, list[float]] = {label: [] for label in times}
    for seed in seeds:
        for repeat in range(programmings):
            program(chip.net, seed=10_000 + 100 * seed + repeat)
            for i, (label, t_seconds) in enumerate(times.items()):
                drift(chip.net, t_seconds, seed=20_000 + 100 * seed + 10 * repeat + i)
                results[label].append(_accuracy(chip.net, batches))
    return results


def energy(module) -> dict[str, Any]:
    """Energy per inference of the arm's network on the eval chip and on the digital baseline."""
    from zoo.quant.cim import energy_report

    config = eval_cim_config()
    return energy_report(
        copy.deepcopy(module.net).eval(),
        torch.zeros(1, 1, 28, 28),
        dac_bits=config.dac_bits,
        adc_bits=config.adc_bits,
        tile_size=config.tile_size,
    )


def _load_arm(arm: str, seed: int, retrain: bool, workdir: Path):
    import zoo

    if not retrain:
        return zoo.load(ARMS[arm], pretrained=True).eval()
    from zoo._lightning_cli import ZooCLI

    recipe = zoo.get_entry(ARMS[arm]).pretrained_cfg.recipe
    cli = ZooCLI(
        args=[
            "-c",
            str(ROOT / recipe),
            f"--seed_everything={seed}",
            f"--trainer.default_root_dir={workdir / arm}",
            "--trainer.logger=false",
            "--trainer.enable_checkpointing=false",
        ],
        run=False,
    )
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    return cli.model.eval()


def _key(sigma: float) -> str:
    return f"{sigma:g}"


def evaluate(name: str, *, seeds: list[int] | None = None, retrain: bool = False) -> dict[str, Any]:
    """Run the three arms on the same test images, noise draws and chips.

    Args:
        name: The registry entry (any of the three; all arms are run).
        seeds: Noise seeds (each adds 10 mismatch draws and 3 programmings per arm); with ``retrain`` also the
            training seeds. Default ``[0]``.
        retrain: Train every arm with its recipe (about 3 minutes for the three on 2 CPU cores) instead of
            loading weights.
    """
    seeds = list(seeds) if seeds else [0]
    images = eval_images()
    batches = _batches(images)
    arms: dict[str, dict[str, float]] = {}
    spread: dict[str, dict[str, float]] = {}
    timings: dict[str, float] = {}
    energy_info: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="dwp-eval-") as workdir:
        for arm in track(ARMS, desc="dwp arms"):
            started = time.perf_counter()
            modules = [
                _load_arm(arm, seed, retrain, Path(workdir) / str(seed)) for seed in (seeds if retrain else [seeds[0]])
            ]
            metrics: dict[str, list[float]] = {}
            for module in modules:
                for sigma, values in mismatch_sweep(module, batches, SIGMAS, "additive", DRAWS, seeds).items():
                    metrics.setdefault(f"acc_sigma_{_key(sigma)}", []).extend(values)
                for sigma, values in mismatch_sweep(
                    module, batches, MULT_SIGMAS, "multiplicative", MULT_DRAWS, seeds
                ).items():
                    metrics.setdefault(f"acc_mult_sigma_{_key(sigma)}", []).extend(values)
                for label, values in drift_sweep(module, batches, DRIFT_TIMES, PROGRAMMINGS, seeds).items():
                    metrics.setdefault(f"acc_drift_{label}", []).extend(values)
            arms[arm] = {key: statistics.fmean(values) for key, values in metrics.items()}
            spread[arm] = {key: statistics.pstdev(values) for key, values in metrics.items() if len(values) > 1}
            drift_means = [arms[arm][f"acc_drift_{label}"] for label in DRIFT_TIMES]
            arms[arm]["drift_range"] = max(drift_means) - min(drift_means)
            report = energy(modules[0])
            arms[arm]["energy_cim_uJ"] = report["energy_cim_uJ"]
            arms[arm]["energy_digital_uJ"] = report["energy_digital_uJ"]
            energy_info = {key: report[key] for key in ENERGY_SETTINGS}
            timings[f"{arm}_s"] = round(time.perf_counter() - started, 1)
    return {
        "settings": {
            "dataset": f"Fashion-MNIST test split, first {images} of 10,000 images (ZOO_DWP_EVAL_IMAGES)",
            "weights": "retrained with each arm's recipe" if retrain else "published checkpoints",
            "mismatch": f"additive max-scaled, w + sigma * max|W_l| * eps per Linear/Conv2d weight; {DRAWS} draws "
            f"per seed (seed 1000*seed+draw); multiplicative w * (1 + sigma * eps), {MULT_DRAWS} draws",
            "sigmas": list(SIGMAS),
            "drift_times_s": DRIFT_TIMES,
            "programmings_per_seed": PROGRAMMINGS,
            "chip": eval_cim_config().to_dict(),
            "energy": energy_info,
            "criteria": criteria(arms),
            "spread_std_over_draws": spread,
        },
        "seeds": seeds,
        "arms": arms,
        "timings": timings,
    }


def criteria(arms: dict[str, dict[str, float]]) -> dict[str, Any]:
    """The issue's acceptance checks, computed from the arms (accuracies in [0, 1]; thresholds in points / 100)."""
    dwp, standard, injection = arms["dwp"], arms["standard"], arms["noise_injection"]
    clean = standard["acc_sigma_0"]
    severe = [s for s in SIGMAS if clean - standard[f"acc_sigma_{_key(s)}"] >= 0.30]
    level = max(severe) if severe else None
    margin = dwp[f"acc_sigma_{_key(level)}"] - standard[f"acc_sigma_{_key(level)}"] if level is not None else None
    gaps = {_key(s): dwp[f"acc_sigma_{_key(s)}"] - injection[f"acc_sigma_{_key(s)}"] for s in SIGMAS}
    return {
        "severe_sigma": level,
        "dwp_minus_standard_at_severe": margin,
        "pass_dwp_beats_standard_by_15": margin is not None and margin >= 0.15,
        "dwp_minus_noise_injection": gaps,
        "pass_dwp_within_3_of_noise_injection": all(gap >= -0.03 for gap in gaps.values()),
        "dwp_drift_range": dwp["drift_range"],
        "pass_drift_range_at_most_4": dwp["drift_range"] <= 0.04,
        "pass_cim_below_digital_energy": dwp["energy_cim_uJ"] < dwp["energy_digital_uJ"],
    }


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    """Clean accuracy and accuracy at additive mismatch 0.3 (the eval's 10 draws of seed 0) on the first
    ``limit`` test images."""
    batches = _batches(limit)
    sweep = mismatch_sweep(module, batches, (0.0, 0.3), "additive", DRAWS, [0])
    return {"acc_sigma_0": sweep[0.0][0], "acc_sigma_0.3": statistics.fmean(sweep[0.3])}


def plot(result: dict[str, Any], path, highlight: str | None = None) -> None:
    """Accuracy against mismatch level and against time on the simulated chip, one line per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = result["arms"]
    colours = {"dwp": "tab:red", "standard": "tab:gray", "noise_injection": "tab:blue"}
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.4))
    for arm, values in arms.items():
        width = 2.5 if arm == highlight else 1.5
        sigmas = [s for s in SIGMAS if f"acc_sigma_{_key(s)}" in values]
        left.plot(
            sigmas,
            [100 * values[f"acc_sigma_{_key(s)}"] for s in sigmas],
            "o-",
            lw=width,
            color=colours.get(arm),
            label=arm,
        )
        labels = [label for label in DRIFT_TIMES if f"acc_drift_{label}" in values]
        right.plot(
            range(len(labels)),
            [100 * values[f"acc_drift_{label}"] for label in labels],
            "o-",
            lw=width,
            color=colours.get(arm),
            label=arm,
        )
        right.set_xticks(range(len(labels)), labels)
    left.set(xlabel="additive mismatch sigma (x max|W|)", ylabel="test accuracy (%)", title="weight mismatch")
    right.set(xlabel="time after programming", title="simulated PCM chip, 8-bit DAC/ADC")
    left.legend(fontsize=8)
    energy_note = ""
    if "dwp" in arms and "energy_cim_uJ" in arms["dwp"]:
        cim, digital = arms["dwp"]["energy_cim_uJ"], arms["dwp"]["energy_digital_uJ"]
        energy_note = f"; energy per inference: CIM {cim:.3g} uJ, digital {digital:.3g} uJ"
    fig.suptitle(f"{result['name']}: zoo eval, seeds {result['seeds']}{energy_note}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
