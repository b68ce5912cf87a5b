"""ProtoVAR's publishing steps of ``zoo reproduce protovar`` (``Protocol.steps``), each its own process:

python -m zoo.protovar.publish gate [FOLDER]   # the tokenizer's validation MSE and codebook usage, exit 1 if missed
python -m zoo.protovar.publish distilled       # the seed-0 protovar IPC 1/10 sets into the card, re-pinned
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

#: The tokenizer's thresholds: reconstruction MSE in [0, 1] units, share of the 256 codes used.
MAX_MSE, MIN_USAGE = 0.02, 0.5


def gate(folder: str | None = None, enforce: bool = True) -> dict[str, float]:
    """The tokenizer's reconstruction MSE and codebook usage on the 5,000 validation images; with ``enforce``,
    exit 1 when it misses the thresholds (so ``zoo reproduce`` stops before tuning and evaluating on it)."""
    import zoo
    from zoo.protovar.evaluate import tokenizer_scores

    module = zoo.load_folder(folder) if folder else zoo.load("protovar.tokenizer", pretrained=True)
    scores = tokenizer_scores(module.eval(), split="val")
    passed = scores["recon_mse"] < MAX_MSE and scores["codebook_usage"] >= MIN_USAGE
    print(f"tokenizer {folder or 'protovar.tokenizer'} on validation: {scores} ({'passes' if passed else 'MISSES'} "
          f"MSE < {MAX_MSE}, usage >= {MIN_USAGE})")  # fmt: skip
    if enforce and not passed:
        raise SystemExit(1)
    return scores


def export_distilled(folder: str | Path, seed: int = 0) -> list[Path]:
    """Write the ``protovar`` arm's IPC 1 and 10 sets of ``seed`` (published models, tuned settings) to ``folder``:
    ``distilled_ipc<N>.safetensors`` with ``images``, ``labels``, the teacher's ``soft_labels`` at T and, as
    metadata, the student protocol and the generator settings."""
    import numpy as np
    import torch
    from safetensors.torch import save_file

    import zoo
    from zoo.protovar.evaluate import arm_params, distilled_set, student_protocol
    from zoo.protovar.student import predict_batches

    generator = zoo.load("protovar.fmnist", pretrained=True).eval()
    teacher = zoo.load("protovar.teacher", pretrained=True).eval().net
    protocol = student_protocol()
    paths = []
    for ipc in (1, 10):
        images, labels = distilled_set("protovar", generator, teacher, ipc, seed)
        soft = (predict_batches(teacher, images) / protocol.temperature).softmax(-1)
        metadata = {
            "arm": "protovar",
            "seed": str(seed),
            "ipc": str(ipc),
            "generator": json.dumps(arm_params("protovar")),
            "student_protocol": json.dumps(asdict(protocol)),
            "student_note": "train_student(images, labels, teacher, protocol, seed) in zoo/protovar/student.py: "
            "soft labels are the teacher's logits of each augmented batch at T; soft_labels here are of the "
            "un-augmented images",
        }
        tensors = {
            "images": torch.from_numpy(np.ascontiguousarray(images)),
            "labels": torch.from_numpy(np.asarray(labels, dtype=np.int64)),
            "soft_labels": soft.float().contiguous(),
        }
        path = Path(folder) / f"distilled_ipc{ipc}.safetensors"
        save_file(tensors, str(path), metadata=metadata)
        paths.append(path)
    return paths


def distilled() -> dict[str, str]:
    """Export the seed-0 sets into the card of ``protovar.fmnist`` and pin its files anew; returns the pins."""
    from zoo._hub import pinned_files
    from zoo._pins import write_pins
    from zoo._registry import get_entry

    folder = get_entry("protovar.fmnist").mirror_dir
    for path in export_distilled(folder, seed=0):
        print("wrote", path)
    pins = pinned_files(folder)
    print("pinned in", write_pins("protovar.fmnist", pins))
    return pins


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("gate", help="validation MSE and codebook usage of the tokenizer (exit 1 if missed)")
    p.add_argument("folder", nargs="?", default=None, help="an exported tokenizer (default: the pinned one)")
    p.add_argument("--report-only", action="store_true", help="print, never exit 1 (toy fits)")
    sub.add_parser("distilled", help="export the seed-0 distilled sets into hub_cards/protovar.fmnist, re-pin")
    args = parser.parse_args(argv)
    if args.step == "gate":
        gate(args.folder, enforce=not args.report_only)
    else:
        distilled()


if __name__ == "__main__":
    main()
