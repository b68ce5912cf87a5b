"""ProtoVAR sampling speed: 500 candidates with the per-scale KV cache against recomputing the prefix each scale.

Both runs use the published generator (``--weights`` for a local export), the same classes, prototypes (IPC 10),
sampling settings and seed; the script checks that they produce identical images and prints both times and their
ratio. A VAR step predicts one whole scale, so without the cache step k reruns every token of scales <= k: 112
token passes instead of 85 per image (plus the attention over the prefix), whatever the speed of the machine.
``--smoke`` samples 20 candidates once (a check that it runs).

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/protovar/sampling.py
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=500, help="images sampled (spread over the 10 classes)")
    parser.add_argument("--repeats", type=int, default=2, help="timed repeats of each; the best is kept")
    parser.add_argument("--weights", default=None, help="an exported generator folder (default: the published one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="20 candidates, one repeat")
    args = parser.parse_args()
    candidates, repeats = (20, 1) if args.smoke else (args.candidates, args.repeats)

    import torch

    import zoo

    torch.set_num_threads(2)
    generator = (zoo.load_folder(args.weights) if args.weights else zoo.load("protovar.fmnist", pretrained=True)).eval()
    classes = torch.arange(candidates) % 10
    index = torch.arange(candidates) // 10
    times, images = {}, {}
    for use_cache in (True, False):
        best = float("inf")
        for _ in range(repeats):
            started = time.perf_counter()
            images[use_cache] = generator.generate(classes, seed=args.seed, ipc=10, index=index, use_cache=use_cache)
            best = min(best, time.perf_counter() - started)
        times[use_cache] = best
    identical = torch.equal(images[True], images[False])
    print(f"{candidates} candidates, seed {args.seed}, best of {repeats}:")
    print(f"  per-scale KV cache   {times[True]:.2f} s")
    print(f"  recompute the prefix {times[False]:.2f} s")
    print(f"  ratio {times[False] / times[True]:.2f}x (target >= 2x); identical images: {identical}")
    if not identical:
        raise SystemExit("the two samplers disagree")


if __name__ == "__main__":
    main()
