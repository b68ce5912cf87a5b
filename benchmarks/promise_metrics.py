"""Batched torch Kabsch RMSD (and TM-score) of ProMiSE against a loop of MDAnalysis ``rms.rmsd``.

1,000 samples x 2 states (AdK open/closed plus Gaussian noise), in one process: the MDAnalysis loop (QCP, one
pair per call), our batched Kabsch RMSD, and our batched Kabsch + fixed-correspondence TM-score. Prints the
times, the ratios against the MDAnalysis loop (target >= 10x) and the largest RMSD difference (target <= 1e-4 A).

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/promise_metrics.py
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs of each")
    parser.add_argument("--tm-samples", type=int, default=None, help="samples for the TM timing (default: all)")
    args = parser.parse_args()
    torch.set_num_threads(2)
    from MDAnalysis.analysis import rms

    from zoo.promise.metrics import kabsch_rmsd, tm_score
    from zoo.promise.structures import load_adk

    states = load_adk()["states"]
    rng = np.random.default_rng(0)
    samples = states[rng.integers(0, 2, args.samples)] + rng.normal(0, 1.0, (args.samples, *states.shape[1:]))
    samples_t, states_t = torch.as_tensor(samples), torch.as_tensor(states)

    def best(fn):
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - start)
        return min(times), out

    mda_s, theirs = best(
        lambda: np.array([[rms.rmsd(x, s, center=True, superposition=True) for s in states] for x in samples])
    )
    ours_s, ours = best(lambda: kabsch_rmsd(samples_t[:, None], states_t[None]))
    n_tm = args.tm_samples or args.samples
    tm_s, _ = best(
        lambda: (kabsch_rmsd(samples_t[:n_tm, None], states_t[None]), tm_score(samples_t[:n_tm, None], states_t[None]))
    )
    tm_s *= args.samples / n_tm  # per 1,000 samples when a subset was timed
    report = {
        "pairs": 2 * args.samples,
        "mdanalysis_loop_s": round(mda_s, 4),
        "torch_kabsch_rmsd_s": round(ours_s, 4),
        "torch_kabsch_plus_tm_s": round(tm_s, 3),
        "ratio_rmsd": round(mda_s / ours_s, 2),
        "ratio_rmsd_plus_tm": round(mda_s / tm_s, 4),
        "max_rmsd_difference_A": float(np.abs(ours.numpy() - theirs).max()),
        "threads": torch.get_num_threads(),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
