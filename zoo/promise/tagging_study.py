"""Validation-only study of two reconstruction choices of ProMiSE's analogue: context tags and training length.

The spec tags only closed-half items ``ligand`` (probability 0.5), so the apo context holds a larger open share
(26%) than the training set (15%) and classifier-free guidance can push apo samples toward the open state. This
study retrains the recipe with ``--data.init_args.tagging=state`` (the spec) or ``independent`` (every item
tagged ``ligand`` with probability 0.5 whatever its state; the recipe's choice) plus any further overrides
(``--extra=--trainer.max_steps=2000``: the spec's training length) and, for each checkpoint, scores every (w, T)
of the evaluation's grid on the *validation* ensembles (sampling seeds from 1,000,000; the test ensembles are
not touched), then applies the evaluation's selection rules (:func:`zoo.promise.evaluate.tune`). It prints one
JSON record per checkpoint:

    /work/cpu .venv/bin/python -m zoo.promise.tagging_study --taggings independent --out study.json

Every checkpoint is a recipe fit (validation batches skipped, as in the evaluation); one torch thread unless
``--threads``.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from zoo.promise.evaluate import CONTEXTS, PROTOCOL, Pools, score_ensembles, target, tune

RECIPE = "recipes/promise/adk.yaml"


def validation_table(module, seed: int, settings: dict) -> dict:
    """Every grid point's validation metrics (with and without reweighting) and the evaluation's choices."""
    pools = Pools(module, seed, settings, validation=True)
    goal = target()
    rows = []
    for guidance in settings["guidance_grid"]:
        for temperature in settings["temperature_grid"]:
            tables = [pools.pool(c, guidance, temperature)[1] for c in CONTEXTS]
            median = float(torch.cat([t.min(dim=-1).values.flatten() for t in tables]).median())
            row = {"guidance": guidance, "temperature": temperature, "val_median_rmsd": round(median, 4)}
            for reweight in (False, True):
                ensembles = {c: pools.ensembles(c, guidance, temperature, reweight) for c in CONTEXTS}
                scores = score_ensembles(goal, ensembles, settings["coverage_rmsd"])
                tag = "rw" if reweight else "plain"
                for key in ("multistate_success", "coverage_open", "coverage_closed", "context_delta"):
                    row[f"{key}_{tag}"] = round(scores[key], 4)
            rows.append(row)
    chosen = tune(module, seed, settings, pools)  # the evaluation's own choice of both decoders

    def row_of(decoder: str) -> dict:
        w, t = chosen[decoder]["guidance"], chosen[decoder]["temperature"]
        return next(r for r in rows if (r["guidance"], r["temperature"]) == (w, t))

    biased, debiased = row_of("biased"), row_of("debiased")
    return {
        "rows": rows,
        "biased": {
            k: biased[k] for k in ("guidance", "temperature", "multistate_success_plain", "context_delta_plain")
        },
        "debiased": {k: debiased[k] for k in ("guidance", "temperature", "multistate_success_rw", "context_delta_rw")},
        "no_reweight_success": debiased["multistate_success_plain"],
        "gain": round(debiased["multistate_success_rw"] - biased["multistate_success_plain"], 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--taggings", nargs="+", default=["state", "independent"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--spec-seeds", nargs="+", type=int, default=[0], help="seeds of the spec's tagging")
    parser.add_argument("--val-ensembles", type=int, default=None, help="default: the evaluation's 20")
    parser.add_argument("--extra", nargs="*", default=[], help="further recipe overrides (smoke runs)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the shared machine's slot is one)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from zoo.eval.run import fit_recipe

    settings = {key: setting.default for key, setting in PROTOCOL.settings.items()}
    if args.val_ensembles:
        settings["val_ensembles"] = args.val_ensembles
    records = []
    for tagging in args.taggings:
        for seed in args.spec_seeds if tagging == "state" else args.seeds:
            start = time.perf_counter()
            overrides = ["--trainer.limit_val_batches=0", f"--data.init_args.tagging={tagging}", *args.extra]
            module = fit_recipe(RECIPE, seed, overrides).eval()
            fitted = time.perf_counter()
            record = {"tagging": tagging, "seed": seed, **validation_table(module, seed, settings)}
            record["fit_s"] = round(fitted - start, 1)
            record["score_s"] = round(time.perf_counter() - fitted, 1)
            records.append(record)
            brief = {k: record[k] for k in ("tagging", "seed", "biased", "debiased", "no_reweight_success", "gain")}
            print(json.dumps(brief | {"fit_s": record["fit_s"], "score_s": record["score_s"]}), flush=True)
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(records, handle, indent=1)


if __name__ == "__main__":
    main()
