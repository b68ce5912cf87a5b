"""FedGR's modules one at a time (the spec's ablations) and the privacy variant, on setting A.

Variants: the full method; without the EMA distillation L_ema; without the representation regulariser
L_reg; without label refining (flagged samples are dropped: "sieving only"); and the privacy variant in
which each client fits its own GMM, so that no per-sample loss leaves a client. Prints the test accuracy
of the final global model and the detection F1 per variant, with the difference to the full method.

Run under the shared CPU lock (about 1 min per run on 2 cores):
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/fedgr_ablations.py --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import logging
import time

import numpy as np

VARIANTS = {
    "FedGR (full)": {},
    "without L_ema": {"distill": False},
    "without L_reg": {"regularise": False},
    "without refining (sieving only)": {"refine": False},
    "privacy: client-side GMM": {"client_sieve": True},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()

    from zoo.fedgr.config import FedGRConfig
    from zoo.fedgr.evaluate import score_run, train

    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    results: dict[str, dict[str, list[float]]] = {}
    for name, changes in VARIANTS.items():
        for seed in args.seeds:
            started = time.perf_counter()
            module, datamodule = train("fedgr", seed, module_args={"fedgr": FedGRConfig(**changes)})
            scores = score_run(module, datamodule.federation)
            scores["seconds"] = time.perf_counter() - started
            for key, value in scores.items():
                results.setdefault(name, {}).setdefault(key, []).append(value)
            print(f"{name:<34} seed {seed}: " + ", ".join(f"{k}={v:.4f}" for k, v in scores.items()), flush=True)
    full = np.mean(results["FedGR (full)"]["accuracy"])
    print(f"\nseeds {args.seeds}: mean test accuracy (difference to the full method), noise F1")
    for name, scores in results.items():
        accuracy = np.mean(scores["accuracy"])
        print(f"{name:<34} {accuracy:.4f} ({accuracy - full:+.4f})  F1 {np.mean(scores['noise_f1']):.3f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"seeds": args.seeds, "results": results}, handle, indent=2)


if __name__ == "__main__":
    main()
