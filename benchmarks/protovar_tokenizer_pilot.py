"""Pilot of ProtoVAR's tokenizer with the dead-code restart (issue 22): fit, then validation MSE and codebook usage.

Each variant is ``zoo fit`` on ``recipes/protovar/tokenizer.yaml`` (the restart that fires; the pilot ran it as
``tokenizer_restart.yaml`` before it became the tokenizer's recipe) plus its overrides, into
``runs/protovar-pilot/<variant>``; the export is then scored on the 5,000 validation images (reconstruction MSE in
[0, 1] units on the 28x28 crop, the fraction of the 256 codes used at any scale, and per scale). ``published``
scores the published tokenizer (no fit); ``old_threshold`` refits the first published tokenizer's recipe (restart
threshold 0.01, which never fired). The test split is not read.
Results are appended to ``runs/protovar-pilot/results.jsonl``. A variant is skipped when the previous fit's wall
time says it would end after ``--budget`` seconds.

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/protovar_tokenizer_pilot.py published short restart
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

RECIPE = "recipes/protovar/tokenizer.yaml"
ROOT = Path("runs/protovar-pilot")
VARIANTS = {
    "short": ["--trainer.max_steps=40"],  # a timing piece: 40 of the 312 steps
    "restart": [],  # the recipe: threshold 1.0, every update
    "restart_every10": ["--model.init_args.restart_every=10"],
    "threshold_0.25": ["--model.init_args.dead_threshold=0.25"],
    "two_epochs": ["--trainer.max_epochs=2"],
    "old_threshold": ["--model.init_args.dead_threshold=0.01"],  # the first published tokenizer
    "seed1": ["--seed_everything=1", "--model.init_args.seed=1", "--data.init_args.seed=1"],
}
#: ``var``: the VAR recipe (recipes/protovar/var.yaml) on the tokenizer of the ``restart`` variant, scored by its
#: teacher-forced scale-8 code accuracy on validation images; ``published_var`` scores the published VAR so.
VAR_RECIPE = "recipes/protovar/var.yaml"
VAR_OVERRIDES = [f"--model.init_args.tokenizer_from={ROOT}/restart/pretrained"]
#: ``var_long``: the same VAR trained 1,000 steps instead of 350 (the recipe's cosine schedule stretches with it).
VAR_LONG = [*VAR_OVERRIDES, "--trainer.max_steps=1000"]


def score(module, limit=None) -> dict:
    import torch

    from zoo.protovar.data import fmnist_splits
    from zoo.protovar.tokenizer import to_model_range

    tok = module.tokenizer.eval()
    images = fmnist_splits()["val"][0][:limit]
    used = torch.zeros(len(tok.scales), tok.codebook.shape[0], dtype=torch.bool)
    errors = []
    with torch.no_grad():
        for start in range(0, len(images), 1000):
            x = to_model_range(torch.from_numpy(images[start : start + 1000]))
            codes = tok.encode(x)
            for s, c in enumerate(codes):
                used[s, c.flatten()] = True
            errors.append((((tok.decode(codes) - x) / 2)[..., 2:30, 2:30] ** 2).mean((1, 2, 3)))
    return {
        "val_mse": round(float(torch.cat(errors).mean()), 5),
        "val_usage": round(float(used.any(0).float().mean()), 4),
        "val_usage_per_scale": [round(float(u.float().mean()), 4) for u in used],
        "ema_live": int((tok.ema_count >= 1.0).sum()),
    }


def score_var(module, limit=None) -> dict:
    from zoo.protovar.evaluate import teacher_forced_accuracy

    return {"val_tf_acc_scale8": round(teacher_forced_accuracy(module.eval(), limit, split="val"), 4)}


def students(folder: Path, steps: int | None = None, val_images: int | None = None) -> dict:
    """Validation accuracy of one IPC-10 student per generative arm on the pilot VAR in ``folder``, each arm at its
    tuned settings (tuning.json, chosen for the published generator), as ``python -m zoo.protovar.tune`` scores a
    trial (seed 100, 5,000 validation images, two 1-thread workers); the published generator's scores at the same
    settings are in tuning.json."""
    import multiprocessing

    import torch

    import zoo
    from zoo.protovar import tune
    from zoo.protovar.evaluate import GENERATIVE, fast_teacher, tuning_record

    torch.set_num_threads(1)  # before any parallel region: the forked workers inherit it
    record = tuning_record()
    student = {**record["student"]["best"], **({"steps": steps} if steps else {})}
    if val_images:
        tune.VAL_IMAGES = val_images
    tune._MODELS["generator"] = zoo.load_folder(str(folder)).eval()
    tune._MODELS["teacher"] = fast_teacher(zoo.load("protovar.teacher", pretrained=True).net)
    tasks = [(arm, student, record["arms"][arm]["best"]) for arm in GENERATIVE]
    with multiprocessing.get_context("fork").Pool(2) as pool:
        values = pool.map(tune._score, tasks, chunksize=1)
    published = {arm: max(record["arms"][arm]["scores"]) for arm in GENERATIVE}
    return {"val_acc_ipc10": dict(zip(GENERATIVE, [round(v, 4) for v in values], strict=True)), "published": published}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    extra_variants = ["published", "published_var", "var", "var_long", "students", "students_long"]
    parser.add_argument("variants", nargs="+", choices=[*extra_variants, *VARIANTS])
    parser.add_argument("--budget", type=float, default=420.0, help="skip a fit that would end after this (s)")
    parser.add_argument("--limit", type=int, default=None, help="validation images (default all 5,000)")
    parser.add_argument(
        "--extra", action="extend", nargs="+", default=[], help="more overrides for every fit, e.g. --extra=--a=1"
    )
    args = parser.parse_args()

    import torch

    import zoo

    torch.set_num_threads(2)
    started, last_fit = time.perf_counter(), None
    ROOT.mkdir(parents=True, exist_ok=True)
    for name in args.variants:
        row = {"variant": name}
        if name in ("students", "students_long"):  # needs the ``var`` / ``var_long`` variant's export
            steps = 2 if args.extra else None  # a dry run (--extra given): 2-step students on 100 images
            folder = ROOT / ("var" if name == "students" else "var_long") / "pretrained"
            row.update(students(folder, steps, 100 if args.extra else None))
            row["elapsed_s"] = round(time.perf_counter() - started, 1)
            print(json.dumps(row), flush=True)
            with open(ROOT / "results.jsonl", "a") as handle:
                handle.write(json.dumps(row) + "\n")
            continue
        if name in ("published", "published_var"):
            module = zoo.load("protovar.tokenizer" if name == "published" else "protovar.fmnist", pretrained=True)
        else:
            factor = {"two_epochs": 2.0, "var": 4.0, "var_long": 10.0}.get(name, 1.0)
            if last_fit and time.perf_counter() - started + factor * last_fit > args.budget:
                print(f"{name}: skipped (would pass the {args.budget:.0f} s budget)", flush=True)
                continue
            folder = ROOT / name
            recipe, overrides = (RECIPE, VARIANTS.get(name))
            if name in ("var", "var_long"):
                recipe, overrides = VAR_RECIPE, VAR_OVERRIDES if name == "var" else VAR_LONG
            command = [sys.executable, "-m", "zoo.cli", "fit", "-c", recipe, *overrides]
            command += [f"--trainer.default_root_dir={folder}", f"--trainer.logger.init_args.save_dir={folder}"]
            command += ["--trainer.enable_progress_bar=false", *args.extra]
            fit_start = time.perf_counter()
            subprocess.run(command, check=True)
            row["fit_s"] = round(time.perf_counter() - fit_start, 1)
            if name == "short":
                last_fit = row["fit_s"] * 312 / 40
            elif name not in ("var", "var_long"):
                last_fit = row["fit_s"] / factor
            module = zoo.load_folder(str(folder / "pretrained"))
        var_like = name in ("var", "var_long", "published_var")
        row.update(score_var(module, args.limit) if var_like else score(module, args.limit))
        row["elapsed_s"] = round(time.perf_counter() - started, 1)
        print(json.dumps(row), flush=True)
        with open(ROOT / "results.jsonl", "a") as handle:
            handle.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
