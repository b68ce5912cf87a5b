"""Validation pilot of tokenizer variants for the tokenizer gate (issue 64): ``python -m zoo.protovar.tokenizer_pilot``.

Each variant is a fresh ``ProtoVARModule(stage="tokenizer")`` (the recipe's settings, ``recipes/protovar/
tokenizer.yaml``, with the variant's changes) trained ``--steps`` steps of batch 64 on the VAR's 20,000 training
images, then scored on the 5,000 validation images only: reconstruction MSE and codebook usage
(:func:`~zoo.protovar.evaluate.tokenizer_scores`), the published teacher's accuracy on the reconstructions
(gate: >= 0.85) and, with ``--seeds``, per seed the validation accuracy of a student on the reconstructed
random-real IPC-10 set against one on the real set (gate: at most 3 points below). ``--published`` scores the
pinned tokenizer, ``--folder`` an exported one (``zoo fit`` of a tokenizer recipe), instead of training one. Every
result is appended to ``--out`` (JSON lines); the pilot's results are kept in ``tokenizer_pilot.json``.

    python -m zoo.protovar.tokenizer_pilot published --published --seeds 0 1 2
    python -m zoo.protovar.tokenizer_pilot h32_cls1 --steps 1560 --hidden 32 --class-weight 1.0 --seeds 0 1 2
    python -m zoo.protovar.tokenizer_pilot refit --folder runs/protovar.tokenizer/pretrained --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

OUT = Path("runs/protovar-tokenizer-pilot.jsonl")
RECIPE = "recipes/protovar/tokenizer.yaml"  # the settings every variant starts from


def fit_tokenizer(steps: int, seed: int = 0, **model_args):
    """A tokenizer of the recipe's settings (``model_args`` on top) trained ``steps`` steps; returns the module."""
    import lightning.pytorch as pl
    import yaml

    from zoo._recipes import resolve_recipe
    from zoo.protovar.data import FMNISTDataModule
    from zoo.protovar.module import ProtoVARModule

    recipe = yaml.safe_load(Path(resolve_recipe(RECIPE)).read_text())
    pl.seed_everything(seed, verbose=False)
    module = ProtoVARModule(**{**recipe["model"]["init_args"], "seed": seed, **model_args})
    data = FMNISTDataModule(**{**recipe["data"]["init_args"], "seed": seed})
    trainer = pl.Trainer(max_steps=steps, max_epochs=-1, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=False,
                         num_sanity_val_steps=0, limit_val_batches=0)  # fmt: skip
    trainer.fit(module, datamodule=data)
    return module.eval()


def score(module, teacher, seeds=()) -> dict:
    """The validation numbers of one tokenizer (see the module docstring)."""
    from zoo.protovar import evaluate as ev

    out = {**ev.tokenizer_scores(module, ev.VAL_LIMIT, split="val")}
    out |= {f"teacher_{k}": v for k, v in ev.teacher_on_reconstructions(module, teacher, "val", ev.VAL_LIMIT).items()}
    for seed in seeds:
        images, labels = ev.real_set("random_real", teacher, ev.GATE_IPC, seed)
        real = ev.student_accuracy(images, labels, teacher, seed, "val", ev.VAL_LIMIT)
        recon = ev.student_accuracy(ev.reconstruct(module, images), labels, teacher, seed, "val", ev.VAL_LIMIT)
        out[f"seed{seed}"] = {"real": real, "recon": recon, "gap": recon - real}
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name")
    parser.add_argument("--published", action="store_true", help="score the pinned tokenizer (no training)")
    parser.add_argument("--folder", default=None, help="score this exported tokenizer folder (no training)")
    # defaults: the first recipe's (312 steps, hidden 16, no classifier loss), so the recorded variants rerun
    parser.add_argument("--steps", type=int, default=312, help="training steps of batch 64 (published: 1560)")
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--codebook", type=int, default=256)
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--class-weight", type=float, default=0.0)
    parser.add_argument("--seeds", type=int, nargs="*", default=[], help="student gate seeds (none: skip)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)

    import zoo
    from zoo.protovar.evaluate import fast_teacher

    teacher = fast_teacher(zoo.load("protovar.teacher", pretrained=True).net)
    started = time.perf_counter()
    if args.published or args.folder:
        source = args.folder or "protovar.tokenizer"
        module = (zoo.load_folder(args.folder) if args.folder else zoo.load(source, pretrained=True)).eval()
        config = {"scored": source}
    else:
        config = {"steps": args.steps, "hidden": args.hidden, "codebook_size": args.codebook,
                  "scales": args.scales, "class_weight": args.class_weight}  # fmt: skip
        extra = {"teacher_from": "protovar.teacher"} if args.class_weight > 0 else {}
        module = fit_tokenizer(args.steps, hidden=args.hidden, codebook_size=args.codebook, scales=args.scales,
                               class_weight=args.class_weight, **extra)  # fmt: skip
    fit_s = time.perf_counter() - started
    record = {"name": args.name, **config, "fit_s": round(fit_s, 1), **score(module, teacher, args.seeds)}
    record["total_s"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as handle:
        handle.write(json.dumps(record) + "\n")
    print(json.dumps(record))
    return record


if __name__ == "__main__":
    main()
