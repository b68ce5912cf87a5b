"""DeepHA's OBS-encoder pilot (issue 26): one arm's recipe with ``obs_encoder`` set, scored on validation seeds.

Fits ``coa_compressed`` (recipes/deepha/babyai.yaml) or ``flat`` (recipes/deepha/flat.yaml) with the tuning seed and
plays 50 greedy episodes of each training level on *validation* seeds, as one trial of ``zoo.deepha.tune``. The
results of 2026-12-04 (one core per process, two side by side) are in ``benchmarks/deepha_film_pilot.json``::

    OMP_NUM_THREADS=1 taskset -c 0 python benchmarks/deepha_film_pilot.py coa_compressed film
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from zoo._eval import fit_recipe
from zoo.deepha.evaluate import PROTOCOL
from zoo.deepha.tune import TUNE_SEED, recipe_of, validation_success


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("arm", choices=("coa_compressed", "flat"))
    parser.add_argument("obs_encoder", choices=("mlp", "film"))
    parser.add_argument("--out", type=Path, default=Path("runs/deepha_pilot"))
    args = parser.parse_args()

    started = time.perf_counter()
    overrides = [f"--model.init_args.obs_encoder={args.obs_encoder}", "--model.init_args.num_threads=1"]
    model = fit_recipe(recipe_of(args.arm), TUNE_SEED, overrides, PROTOCOL.seed_args)
    fit_s = time.perf_counter() - started
    result = {
        "arm": args.arm,
        "obs_encoder": args.obs_encoder,
        **validation_success(model, args.arm),
        "fit_s": round(fit_s, 1),
        "total_s": round(time.perf_counter() - started, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.arm}-{args.obs_encoder}.json").write_text(json.dumps(result))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
