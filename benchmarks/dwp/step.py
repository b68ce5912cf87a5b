"""Cost of one DWP training step against standard training and plain noise injection, on the published backbone.

Prints ms per optimizer step (median of ``--repeats``) and the ratio to a standard step measured in the same
process, for the K realisations run as a loop and as one ``torch.func.vmap`` (the loop won: ``vectorize: false`` in
the recipes). ``--smoke`` runs the smallest arguments. Run under the shared CPU lock::

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/dwp/step.py
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch


def step_ms(mode: str, k: int, vectorize: bool, batch: int, repeats: int) -> float:
    from zoo.dwp.module import DWPModule

    torch.manual_seed(0)
    module = DWPModule(mode=mode, k=max(k, 2), vectorize=vectorize)
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
    x, y = torch.randn(batch, 1, 28, 28), torch.randint(10, (batch,))
    times = []
    for _ in range(repeats + 2):
        started = time.perf_counter()
        module.training_step((x, y), 0).backward()
        optimizer.step()
        optimizer.zero_grad()
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times[2:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--smoke", action="store_true", help="batch 8, 1 repeat: checks that it runs")
    args = parser.parse_args()
    if args.smoke:
        args.batch, args.repeats = 8, 1
    warnings.filterwarnings("ignore")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch}, K = {args.k}")
    base = step_ms("standard", 1, False, args.batch, args.repeats)
    print(f"{'standard':32s} {base:7.1f} ms/step  1.00x")
    for label, mode, k, vectorize in (
        ("noise_injection (K=1)", "noise_injection", 1, False),
        (f"dwp K={args.k}, loop", "dwp", args.k, False),
        (f"dwp K={args.k}, vmap", "dwp", args.k, True),
    ):
        ms = step_ms(mode, k, vectorize, args.batch, args.repeats)
        print(f"{label:32s} {ms:7.1f} ms/step  {ms / base:.2f}x")


if __name__ == "__main__":
    main()
