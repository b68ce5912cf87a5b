"""REPA-P's cost: zero at inference, the heads' share at training time.

Prints, for the published architecture (32x32 Poisson U-Net), the forward latency, parameter count and FLOPs
of the exported REPA-P model against PIDM's (they must be equal: the heads are gone), and the time of one
training step with and without the bottleneck head. Run under the shared CPU lock:

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/repa_p/overhead.py
    .venv/bin/python benchmarks/repa_p/overhead.py --smoke     # 2 repeats of a batch of 2: seconds
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

import zoo
from zoo.repa_p.module import REPAPModule

ENTRIES = {"pidm": "repa_p.pidm_poisson_32", "repa_p": "repa_p.poisson_32"}


def _timeit(fn, repeats: int) -> float:
    fn()
    started = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - started) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--smoke", action="store_true", help="2 repeats of a batch of 2")
    args = parser.parse_args()
    repeats, batch = (2, 2) if args.smoke else (args.repeats, args.batch)
    torch.manual_seed(0)
    modules = {arm: REPAPModule(**zoo.get_entry(name).model_args) for arm, name in ENTRIES.items()}
    x0, condition = modules["pidm"].task.generate("train", batch, seed=0)
    t = torch.randint(0, 100, (batch,))
    report = {}
    for arm, module in modules.items():
        module.eval()
        with torch.no_grad(), FlopCounterMode(display=False) as flops:
            module(x0, condition, t)
        with torch.no_grad():
            latency = _timeit(lambda m=module: m(x0, condition, t), repeats)
        module.train()
        module.attach_heads()  # what fitting does; a no-op for PIDM
        optimizer = torch.optim.Adam(module.parameters(), lr=1e-4)

        def step(m=module, opt=optimizer):
            loss = m.losses(x0, condition, t, torch.randn_like(x0))["loss"]
            opt.zero_grad()
            loss.backward()
            opt.step()

        train_step = _timeit(step, repeats)
        module.detach_heads()  # what the end of fitting does
        report[arm] = {
            "inference_params": sum(p.numel() for p in module.parameters()),
            "inference_flops": flops.get_total_flops(),
            "forward_ms": round(1e3 * latency, 2),
            "train_step_ms": round(1e3 * train_step, 2),
            "head_params_while_training": sum(v.numel() for v in (module._exported_heads or {}).values()),
        }
    report["ratios_repa_p_over_pidm"] = {
        "inference_params": report["repa_p"]["inference_params"] / report["pidm"]["inference_params"],
        "inference_flops": report["repa_p"]["inference_flops"] / report["pidm"]["inference_flops"],
        "forward_time": report["repa_p"]["forward_ms"] / report["pidm"]["forward_ms"],
        "train_step_time": report["repa_p"]["train_step_ms"] / report["pidm"]["train_step_ms"],
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
