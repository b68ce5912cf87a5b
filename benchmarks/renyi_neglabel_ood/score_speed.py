"""Renyi score speed: beta solved for a whole batch at once vs a per-image ``scipy.optimize.minimize_scalar`` loop.

Prints images per second of each and their ratio, measured in the same process, and the largest difference
between the two scores (the batched solver is safeguarded Newton on the monotone slope of F, float32, exact to
1e-7 in beta;
the loop minimises F per image with ``minimize_scalar(method="bounded")``). Also prints the speed of the
paper's fixed-step descent (15 steps), batched. Inputs: synthetic similarities shaped like tier 2 (10 ID labels,
``--negatives`` negatives); the loop runs on the first ``--loop-images`` images (it is slow).

Target: ratio >= 50x, max score difference <= 1e-3.

Run: ``flock /tmp/zoo-cpu.lock python benchmarks/renyi_neglabel_ood/score_speed.py [--images 4000 --negatives 1400]``
(``--smoke``: 200 images, 100 negatives, a 20-image loop, in seconds)
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import minimize_scalar

from zoo.renyi_neglabel_ood.scores import objective, penalty, renyi_score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=4000)
    parser.add_argument("--negatives", type=int, default=1400)
    parser.add_argument("--loop-images", type=int, default=200)
    parser.add_argument("--smoke", action="store_true", help="the smallest sizes (a few seconds)")
    args = parser.parse_args()
    if args.smoke:
        args.images, args.negatives, args.loop_images = 200, 100, 20
    tau, r, eta = 0.01, 1.05, 1.2
    rng = np.random.default_rng(0)
    s_id = rng.normal(0.15, 0.05, (args.images, 10))
    s_id[np.arange(args.images), rng.integers(10, size=args.images)] += 0.2
    s_neg = rng.normal(0.1, 0.05, (args.images, args.negatives))

    started = time.perf_counter()
    batched = renyi_score(s_id, s_neg, tau, r, eta, solver="newton", dtype=np.float32)
    batched_rate = args.images / (time.perf_counter() - started)

    started = time.perf_counter()
    renyi_score(s_id, s_neg, tau, r, eta, solver="bisection")
    bisection_rate = args.images / (time.perf_counter() - started)

    started = time.perf_counter()
    renyi_score(s_id, s_neg, tau, r, eta, beta0=-0.1, steps=15, lr=0.01, dtype=np.float32)
    descent_rate = args.images / (time.perf_counter() - started)

    n = min(args.loop_images, args.images)
    s = np.concatenate([s_id[:n], s_neg[:n]], axis=1)
    started = time.perf_counter()
    looped = np.empty(n)
    for i in range(n):
        row = s[i : i + 1]
        beta = minimize_scalar(
            lambda b, row=row: objective(row, np.array([b]), tau, r, eta)[0],
            bounds=(row.min() - 1.0, row.max()),
            method="bounded",
            options={"xatol": 1e-8},
        ).x
        z = (s_id[i] - beta) / tau
        top = z.max()
        looped[i] = top + np.log(np.exp(z - top).sum()) - eta * penalty(row, np.array([beta]), tau, r)[0]
    loop_rate = n / (time.perf_counter() - started)

    difference = float(np.abs(batched[:n] - looped).max())
    ratio = batched_rate / loop_rate
    print(f"labels per image: {10 + args.negatives} (10 ID + {args.negatives} negatives); tau {tau}, r {r}, eta {eta}")
    print(f"batched (Newton, exact beta, f32): {batched_rate:8.0f} images/s  ({args.images} images)")
    print(f"batched (bisection, f64):        {bisection_rate:10.0f} images/s")
    print(f"batched (descent, 15 steps, f32): {descent_rate:9.0f} images/s")
    print(f"per-image minimize_scalar loop:  {loop_rate:10.1f} images/s  ({n} images)")
    print(f"ratio batched / loop: {ratio:.0f}x (target >= 50x): {'holds' if ratio >= 50 else 'FAILS'}")
    print(f"max |score difference|: {difference:.2e} (target <= 1e-3): {'holds' if difference <= 1e-3 else 'FAILS'}")


if __name__ == "__main__":
    main()
