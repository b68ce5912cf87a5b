"""Batched torch Kabsch RMSD (and TM-score) of ProMiSE against a loop of MDAnalysis ``rms.rmsd``.

1,000 samples x 2 states (AdK open/closed plus 1 A Gaussian noise per coordinate), in one process: the
MDAnalysis loop (QCP in Cython, one pair per call), our batched RMSD (:func:`zoo.promise.metrics.kabsch_rmsd`:
centring once per input, one batched covariance contraction, the largest eigenvalue of Horn's 4x4 key matrix by
QCP's Newton iteration, no rotation) and, timed separately, our fixed-correspondence TM-score of the same pairs
(an iterative 35-seed superposition search per pair, not comparable to one RMSD). Prints the times, the ratios
against the MDAnalysis loop (target >= 10x for the RMSD) and the largest RMSD difference (target <= 1e-4 A).
Best of ``--repeats`` runs each; ``--threads`` torch threads (default 1: MDAnalysis's loop uses one core too);
``--smoke`` times 50 samples once (a check that it runs, seconds).

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/promise/metrics.py
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
    parser.add_argument("--repeats", type=int, default=5, help="best of this many runs of the RMSD timings")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (MDAnalysis's loop uses one core)")
    parser.add_argument("--tm-samples", type=int, default=None, help="samples for the TM timing (default: all)")
    parser.add_argument("--smoke", action="store_true", help="50 samples, one repeat, 10 TM samples")
    args = parser.parse_args()
    if args.smoke:
        args.samples, args.repeats, args.tm_samples = 50, 1, 10
    torch.set_num_threads(args.threads)
    from MDAnalysis.analysis import rms

    from zoo.promise.metrics import kabsch_rmsd, tm_score
    from zoo.promise.structures import load_adk

    states = load_adk()["states"]
    rng = np.random.default_rng(0)
    samples = states[rng.integers(0, 2, args.samples)] + rng.normal(0, 1.0, (args.samples, *states.shape[1:]))
    samples_t, states_t = torch.as_tensor(samples), torch.as_tensor(states)

    def best(fn, repeats):
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - start)
        return min(times), out

    kabsch_rmsd(samples_t[:8, None], states_t[None])  # warm-up (first-call dispatch)
    mda_s, theirs = best(
        lambda: np.array([[rms.rmsd(x, s, center=True, superposition=True) for s in states] for x in samples]),
        args.repeats,
    )
    ours_s, ours = best(lambda: kabsch_rmsd(samples_t[:, None], states_t[None]), args.repeats)
    n_tm = args.tm_samples or args.samples
    tm_s, _ = best(lambda: tm_score(samples_t[:n_tm, None], states_t[None]), 1)
    tm_s *= args.samples / n_tm  # per --samples samples when a subset was timed
    report = {
        "pairs": 2 * args.samples,
        "threads": torch.get_num_threads(),
        "mdanalysis_loop_s": round(mda_s, 5),
        "torch_batched_rmsd_s": round(ours_s, 5),
        "ratio_rmsd": round(mda_s / ours_s, 2),
        "max_rmsd_difference_A": float(np.abs(ours.numpy() - theirs).max()),
        "torch_tm_score_s": round(tm_s, 3),
        "tm_samples_timed": n_tm,
        "ratio_tm_vs_mdanalysis_rmsd": round(mda_s / tm_s, 4),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
