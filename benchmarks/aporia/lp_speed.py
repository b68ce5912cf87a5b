"""APORIA-LP scoring speed: batched sorted-array W1 against a loop of ``scipy.stats.wasserstein_distance``.

Scores ``--points`` unlabelled projections against labelled sets of ``--labels`` points per class, the
way the LP rule does (D_c(z) against R_c for both classes), and prints the time of both and their ratio.
Also checks that the two give the same predictions. Then times the logistic-regression baseline of the
protocol (Newton in the row space of the labelled embeddings) against ``sklearn.linear_model.
LogisticRegression`` on ``--fits`` few-label fits in 384-d, and checks that they predict the same.

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/aporia/lp_speed.py [--smoke]

``--smoke``: 2,000 points, one repeat, 10 fits (seconds).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def scipy_scores(z: np.ndarray, z_genuine: np.ndarray, z_hallucinated: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The LP scores one point and one class at a time, with scipy."""
    from scipy.stats import wasserstein_distance

    from zoo.aporia.lp import pairwise_gaps

    out = []
    for labelled in (z_genuine, z_hallucinated):
        reference = pairwise_gaps(labelled)
        out.append(np.array([wasserstein_distance(np.abs(point - labelled), reference) for point in z]))
    return out[0], out[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=20_000, help="unlabelled projections to score")
    parser.add_argument("--labels", type=int, default=20, help="labelled points per class")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fits", type=int, default=100, help="logistic-regression fits (40 labels, 384-d)")
    parser.add_argument("--smoke", action="store_true", help="the smallest run: 2,000 points, 1 repeat, 10 fits")
    args = parser.parse_args()
    if args.smoke:
        args.points, args.repeats, args.fits = 2_000, 1, 10

    from zoo.aporia.lp import lp_scores

    rng = np.random.default_rng(0)
    z_genuine = rng.normal(0.0, 0.05, args.labels)
    z_hallucinated = rng.normal(0.6, 0.3, args.labels)
    z = np.r_[rng.normal(0.0, 0.05, args.points // 2), rng.normal(0.6, 0.3, args.points - args.points // 2)]

    def best(fn) -> tuple[float, tuple]:
        times, result = [], None
        for _ in range(args.repeats):
            started = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - started)
        return min(times), result

    batched_s, (wg, wh) = best(lambda: lp_scores(z, z_genuine, z_hallucinated))
    loop_s, (sg, sh) = best(lambda: scipy_scores(z, z_genuine, z_hallucinated))
    np.testing.assert_allclose(wg, sg, atol=1e-12)
    np.testing.assert_allclose(wh, sh, atol=1e-12)
    print(f"points={args.points} labels/class={args.labels}")
    print(f"scipy loop : {loop_s * 1e3:9.1f} ms")
    print(f"batched W1 : {batched_s * 1e3:9.1f} ms")
    print(f"speed-up   : {loop_s / batched_s:9.1f}x (identical scores)")
    logreg_speed(args.fits)


def logreg_speed(fits: int) -> None:
    """sklearn lbfgs against the protocol's row-space Newton solver, single-threaded BLAS as in the protocol."""
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    from zoo.aporia.baselines import logistic_regression

    rng = np.random.default_rng(1)
    problems = []
    for _ in range(fits):
        x = rng.normal(size=(60, 384)) + 0.15 * np.r_[np.zeros((36, 384)), np.ones((24, 384))]
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        problems.append((x[:40], np.r_[np.zeros(20), np.ones(20)], x[40:]))
    with threadpool_limits(1):
        started = time.perf_counter()
        reference = [LogisticRegression(C=1.0, max_iter=200).fit(x, y).predict(t) for x, y, t in problems]
        sklearn_s = time.perf_counter() - started
        started = time.perf_counter()
        ours = []
        for x, y, t in problems:
            weights, bias = logistic_regression(x, y, c=1.0)
            ours.append((t @ weights + bias > 0).astype(float))
        newton_s = time.perf_counter() - started
    agree = np.mean([np.mean(a == b) for a, b in zip(reference, ours, strict=True)])
    print(f"logreg fits={fits} (40 labels, 384-d)")
    print(f"sklearn lbfgs : {sklearn_s / fits * 1e3:9.2f} ms/fit")
    print(f"row-space Newton: {newton_s / fits * 1e3:7.2f} ms/fit")
    print(f"speed-up      : {sklearn_s / newton_s:9.1f}x (predictions agree on {agree:.2%})")


if __name__ == "__main__":
    main()
