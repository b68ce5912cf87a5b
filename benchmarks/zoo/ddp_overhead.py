"""What Lightning DDP costs on this machine: one recipe's training epoch in 2 processes (gloo) against 1 process.

Runs ``zoo fit -c RECIPE`` twice in the same invocation, for one epoch without validation: once in a single
process, once with ``--trainer.strategy=ddp --trainer.accelerator=cpu --trainer.devices=2``. The
:class:`EpochTimer` callback times the training epoch on rank 0 (from ``on_train_epoch_start`` to
``on_train_epoch_end``, after the ranks synchronise), so process start-up and data preparation are reported
separately as the command's wall time. Under DDP each rank sees half of the batches (the DistributedSampler),
so the same epoch of work is split over two processes; with ``--threads T`` every process gets T torch threads
(default: the single process gets all cores, each rank 1 core on a 2-core machine). Run under the CPU lock:

    python benchmarks/zoo/ddp_overhead.py --recipe dwp/standard --train-limit 4096     (--smoke: 256 images)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lightning.pytorch as pl

ROOT = Path(__file__).resolve().parents[2]


class EpochTimer(pl.Callback):
    """Write the first training epoch's wall time (rank 0, after a barrier) to ``path`` as JSON.

    Args:
        path: Output file.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._started = 0.0

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        trainer.strategy.barrier("epoch-timer-start")
        self._started = time.perf_counter()

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        trainer.strategy.barrier("epoch-timer-end")
        if trainer.is_global_zero and trainer.current_epoch == 0:
            seconds = time.perf_counter() - self._started
            Path(self.path).write_text(json.dumps({"epoch_s": seconds, "steps": trainer.global_step}))


def time_epoch(recipe: str, devices: int, extra: list[str], threads: int | None, workdir: Path) -> dict:
    """Run one epoch of ``recipe`` on ``devices`` CPU processes; the epoch's and the command's seconds."""
    out = workdir / f"epoch-{devices}.json"
    strategy = ["--trainer.strategy=ddp"] if devices > 1 else ["--trainer.strategy=auto"]
    args = [
        sys.executable, "-m", "zoo", "fit", "-c", recipe, *strategy, "--trainer.accelerator=cpu",
        f"--trainer.devices={devices}", "--trainer.max_epochs=1", "--trainer.max_steps=-1",
        "--trainer.limit_val_batches=0", "--trainer.num_sanity_val_steps=0", "--trainer.logger=false",
        "--trainer.enable_checkpointing=false", "--trainer.enable_progress_bar=false",
        f"--trainer.default_root_dir={workdir / f'run-{devices}'}",
        "--trainer.callbacks+=benchmarks.zoo.ddp_overhead.EpochTimer", f"--trainer.callbacks.path={out}", *extra,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    started = time.perf_counter()
    result = subprocess.run(args, env=env, cwd=workdir, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"zoo fit on {devices} process(es) failed:\n{result.stderr[-3000:]}")
    return {**json.loads(out.read_text()), "wall_s": wall, "processes": devices, "threads_per_process": threads}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="dwp/standard")
    parser.add_argument("--train-limit", type=int, default=4096, help="dwp: training images of the epoch")
    parser.add_argument("--threads", type=int, default=None, help="torch threads per process (default: cores/N)")
    parser.add_argument("--set", nargs="*", default=[], help="more --key=value overrides for zoo fit")
    parser.add_argument("--smoke", action="store_true", help="256 training images: checks that it runs")
    args = parser.parse_args()
    if args.smoke:
        args.train_limit = 256
    extra = list(args.set)
    if args.recipe.startswith("dwp/"):
        extra.append(f"--data.init_args.train_limit={args.train_limit}")
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as folder:
        workdir = Path(folder)
        single = time_epoch(args.recipe, 1, extra, args.threads or cores, workdir)
        ddp = time_epoch(args.recipe, 2, extra, args.threads or max(1, cores // 2), workdir)
    report = {
        "recipe": args.recipe,
        "overrides": extra,
        "cores": cores,
        "single": single,
        "ddp_2": ddp,
        "epoch_ratio_ddp_over_single": ddp["epoch_s"] / single["epoch_s"],
        "wall_ratio_ddp_over_single": ddp["wall_s"] / single["wall_s"],
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
