"""Throughput of the robust resettable sketch against Apache DataSketches' theta sketch, in one process.

Both consume the same oblivious churn stream (default 1M updates, fresh keys, so theta's A-not-B emulation
of resets is exact). DataSketches has no batch API: it gets its fastest Python path (two tight loops of
``update``); the robust sketch uses its compiled ``update_batch`` in chunks (after a warm-up pass that loads
the numba kernel). Prints updates/s and the ratio (the spec's bar: robust >= 1 x theta; the evaluation's
``robust_throughput_vs_theta`` claim measures the same). Run under the lock (``--smoke``: 20k updates, one run):

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/resettable_sketch/throughput.py
"""

from __future__ import annotations

import argparse

from zoo.resettable_sketch.evaluate import arm_factories, throughput
from zoo.resettable_sketch.streams import churn_stream


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=1_000_000, help="updates in the churn stream")
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs per sketch")
    parser.add_argument("--smoke", action="store_true", help="20k updates, one run: checks that it runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.length, args.repeats = 20_000, 1
    stream = churn_stream(args.length, seed=0)
    factories = arm_factories()
    names = ("datasketches_theta", "robust", "robust_unbounded", "hash_threshold", "reference_exact")
    speed = {name: throughput(factories[name][1], stream, repeats=args.repeats) for name in names}
    print(f"churn stream: {args.length:,} updates ({int((stream[0] == 1).sum()):,} resets)")
    for name in names:
        ratio = speed[name] / speed["datasketches_theta"]
        print(f"  {name:20s} {speed[name] / 1e6:7.2f} M updates/s   {ratio:5.2f} x theta")
    ratio = speed["robust"] / speed["datasketches_theta"]
    print(f"robust / theta = {ratio:.2f} ({'pass' if ratio >= 1.0 else 'FAIL'}: needs >= 1)")


if __name__ == "__main__":
    main()
