"""The evaluation's spectral residual on the published REPA-P and PIDM checkpoints, and its sensitivity to k.

Samples the first ``--conditions`` ID test conditions with both published seed-0 checkpoints exactly as
``zoo eval repa_p`` does (``zoo.repa_p.evaluate.draw_samples``: same test pairs, same sampling noise, the full
T = 100 chain), and reports, beside the zero field and the exact solution with and without white noise of rms
0.001 (>= 1% of the fields' spread): the 5-point residual (mean ``|R|``, the published metric), the spectral
residual (rms of the residual's lowest ``k x k`` sine modes, ``zoo.repa_p.pde.spectral_residual``; the default
``k`` and, as a sensitivity read-out only, 4 and 16), the share of conditions where an arm's spectral residual is
below the zero field's, and the MSE. Writes ``benchmarks/repa_p/spectral_residual.json``.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/repa_p/spectral_residual.py                 # 200 conditions
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/repa_p/spectral_residual.py --smoke         # 4 conditions, 5 steps
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

import zoo
from zoo.repa_p.evaluate import PROTOCOL, draw_samples, sampling_seed
from zoo.repa_p.pde import SPECTRAL_MODES, spectral_residual

ENTRIES = {"repa_p": "repa_p.poisson_32", "pidm": "repa_p.pidm_poisson_32"}
NOISE_RMS = 0.001  # the noise test
NOISE_SEED = 0
SENSITIVITY = (4, 16)
OUT = Path(__file__).with_suffix(".json")


def _row(task, fields, x0, condition, zero_spectral) -> dict:
    interior = task.residual(fields, condition)[0]
    spectral = spectral_residual(interior, SPECTRAL_MODES)
    row = {
        "residual_5pt": interior.abs().mean().item(),
        "residual_spectral": spectral.mean().item(),
        "residual_spectral_std": spectral.std().item() if len(spectral) > 1 else 0.0,
        "below_zero_field_share": (spectral < zero_spectral).float().mean().item(),
        "mse": (fields - x0).square().mean().item(),
    }
    for k in SENSITIVITY:
        row[f"residual_spectral_k{k}"] = spectral_residual(interior, k).mean().item()
    return {key: round(value, 6) for key, value in row.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conditions", type=int, default=200, help="first N ID test conditions (the protocol: 200)")
    parser.add_argument("--smoke", action="store_true", help="4 conditions, 5 sampling steps, no JSON written")
    args = parser.parse_args()
    settings = PROTOCOL.resolve()
    conditions = 4 if args.smoke else args.conditions
    if args.smoke:
        settings = {**settings, "sample_steps": 5}
    if not 1 <= conditions <= settings["test_conditions"]:
        raise SystemExit(f"--conditions must be in [1, {settings['test_conditions']}], got {conditions}")
    report, samples, started = {}, {}, time.perf_counter()
    for arm, name in ENTRIES.items():
        module = zoo.load(name, pretrained=True)
        samples[arm], x0, condition = draw_samples(module, "id", settings, limit=conditions)
    task = module.task
    zero_field = torch.zeros_like(x0)
    zero_spectral = task.spectral_residual(zero_field, condition, SPECTRAL_MODES)
    noise = NOISE_RMS * torch.randn(x0.shape, generator=torch.Generator().manual_seed(NOISE_SEED))
    fields = {**samples, "zero_field": zero_field, "exact": x0, "exact_plus_noise": x0 + noise}
    for arm, field in fields.items():
        report[arm] = _row(task, field, x0, condition, zero_spectral)
    seconds = time.perf_counter() - started
    result = {
        "split": "id",
        "conditions": conditions,
        "sample_steps": settings["sample_steps"],
        "k": SPECTRAL_MODES,
        "checkpoints": {arm: f"{name} (published, training seed 0)" for arm, name in ENTRIES.items()},
        "sampling_seed": sampling_seed(settings, "id"),
        "noise": {"rms": NOISE_RMS, "seed": NOISE_SEED, "fields_std": round(x0.std().item(), 6)},
        "metrics": "residual_5pt: mean |R| (physical units q/h^2, the published residual_id); residual_spectral: mean "
        "over conditions of the rms of R's lowest k x k sine modes (same units; _std over conditions; _kK: other k, "
        "sensitivity only); below_zero_field_share: conditions where the spectral residual is below U = 0's; mse: "
        "against the exact solution (network units)",
        "arms": report,
        "ratio_repa_p_over_pidm": {
            key: round(report["repa_p"][key] / report["pidm"][key], 4)
            for key in ("residual_5pt", "residual_spectral", "mse")
        },
        "seconds": round(seconds, 1),
        "threads": torch.get_num_threads(),
    }
    print(json.dumps(result, indent=2))
    if not args.smoke:
        OUT.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
