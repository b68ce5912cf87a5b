"""``zoo eval protovar`` in (arm, seed) pieces run by single-thread worker processes, resumable through its cache.

Every piece is ``run_eval("protovar", seeds=[seed], arms=[arm])``: its result lands in the evaluation's
``cache_dir`` (``runs/protovar-eval``, keyed by the settings, the tuning record and the pinned weights), so a
later ``zoo eval protovar --json out.json --card`` reads the pieces instead of training again. On 2 shared cores
two 1-thread students run faster than one 2-thread student, hence ``--workers 2``. The published models and the
herding features are loaded before the workers fork.

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/protovar_eval_pieces.py --seeds 0 1 2
    .venv/bin/zoo eval protovar --json out.json --card   # every piece cached: seconds
"""

from __future__ import annotations

import argparse
import logging
import time

HEAVY_FIRST = (
    "full_data",
    "protovar",
    "var_unguided_select",
    "herding",
    "random_real",
    "protovar_noselect",
    "var_unguided",
    "teacher",
    "tokenizer",
)


def _piece(task: tuple[str, int, tuple[str, ...]]) -> str:
    from zoo._eval import run_eval

    arm, seed, overrides = task
    started = time.perf_counter()
    result = run_eval("protovar", seeds=[seed], arms=[arm], overrides=list(overrides))
    scores = {k: round(v, 4) for k, v in result["per_seed"][arm][str(seed)].items()}
    return f"{arm} seed {seed} ({time.perf_counter() - started:.1f} s): {scores}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", nargs="+", default=list(HEAVY_FIRST), help="default: every arm, heavy ones first")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--workers", type=int, default=2, help="single-thread worker processes")
    parser.add_argument("--set", nargs="*", default=[], help="KEY=VALUE settings, as zoo eval --set")
    args = parser.parse_args()

    import multiprocessing

    import torch

    torch.set_num_threads(1)  # before any parallel region: the forked workers inherit it
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    from zoo.protovar.data import fmnist_splits
    from zoo.protovar.evaluate import _pool_features, _published, fast_teacher

    total = time.perf_counter()
    fmnist_splits()
    _published("protovar.fmnist"), _published("protovar.tokenizer")
    teacher = fast_teacher(_published("protovar.teacher").net)
    _pool_features(id(teacher), teacher)
    print(f"loaded ({time.perf_counter() - total:.1f} s)", flush=True)
    tasks = [(arm, seed, tuple(args.set)) for seed in args.seeds for arm in args.arms]
    tasks.sort(key=lambda task: args.arms.index(task[0]))  # heavy arms of every seed first
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        for line in pool.imap_unordered(_piece, tasks, chunksize=1):
            print(line, flush=True)
    print(f"pieces: {time.perf_counter() - total:.1f} s")


if __name__ == "__main__":
    main()
