"""Validation headroom of ProtoVAR's student protocol at other step counts: full_data against the real IPC-10 sets.

Issue 22's headroom check asks the full_data student to be >= 5 points above the better of random_real and
herding at IPC 10; with the evaluation's protocol (``tuning.json``) it is measured on validation by
``python -m zoo.protovar.tune``. This probe scores the same three students (seed 100, 5,000 validation images,
two single-thread workers) with ``--steps`` and ``--lr`` instead, to see how long a student must train before
the full pool helps; the test split is not read.

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/protovar_headroom.py --steps 1000 --lr 0.03
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[1000])
    parser.add_argument("--lr", type=float, default=0.03)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    import multiprocessing

    import torch

    import zoo
    from zoo.protovar import tune
    from zoo.protovar.evaluate import _pool_features, fast_teacher

    torch.set_num_threads(1)  # before any parallel region: the forked workers inherit it
    started = time.perf_counter()
    tune._MODELS["generator"] = zoo.load("protovar.fmnist", pretrained=True).eval()
    tune._MODELS["teacher"] = fast_teacher(zoo.load("protovar.teacher", pretrained=True).net)
    _pool_features(id(tune._MODELS["teacher"]), tune._MODELS["teacher"])
    sets = ("full_data", "random_real", "herding")
    tasks = [(arm, {"steps": steps, "lr": args.lr}, None) for steps in args.steps for arm in sets]
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        values = pool.map(tune._score, tasks, chunksize=1)
    for i, steps in enumerate(args.steps):
        full, real, herd = values[3 * i : 3 * i + 3]
        print(
            f"steps {steps} lr {args.lr}: full_data {full:.4f} random_real {real:.4f} herding {herd:.4f} "
            f"headroom {100 * (full - max(real, herd)):+.1f} points"
        )
    print(f"{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
