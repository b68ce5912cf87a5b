"""Start-up cost of the zoo: ``import zoo; zoo.list_models()`` against ``import lightning``, in fresh processes.

Each command runs ``--repeats`` times, interleaved so that machine load affects both alike; the medians and
their ratio are printed (the README quotes the ratio; the target is at most 1.2).

    python benchmarks/zoo/import_time.py --repeats 7      (--smoke: one repeat)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "lightning": "import lightning",
    "zoo": "import zoo; zoo.list_models()",
}


def wall_time(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="one repeat: checks that it runs")
    args = parser.parse_args()
    if args.smoke:
        args.repeats = 1
    for code in COMMANDS.values():  # warm the file cache
        wall_time(code)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeats):
        for name, code in COMMANDS.items():
            times[name].append(wall_time(code))
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, code in COMMANDS.items():
        print(f"{name:>9}: median {medians[name]:.3f} s over {args.repeats} runs   python -c {code!r}")
    print(f"ratio zoo / lightning = {medians['zoo'] / medians['lightning']:.3f}  (target <= 1.2)")


if __name__ == "__main__":
    main()
