"""Cost of simulated CIM inference against the digital network, on the published DWP backbone.

Prints ms per 1,000 Fashion-MNIST-sized images (median of ``--repeats``) for the digital forward, the programmed
chip with ideal periphery, and the chip with 8-bit DAC/ADC on 256x256 tiles, with ratios to the digital forward
measured in the same process. ``--smoke`` runs the smallest arguments. Run under the shared CPU lock::

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/dwp/cim_inference.py
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def forward_ms(model: torch.nn.Module, x: torch.Tensor, repeats: int) -> float:
    times = []
    with torch.no_grad():
        for _ in range(repeats + 1):
            started = time.perf_counter()
            model(x)
            times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times[1:])


def main() -> None:
    from zoo.dwp.evaluate import eval_cim_config
    from zoo.dwp.module import DWPModule
    from zoo.quant.cim import drift, program

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="batch 8, 1 repeat: checks that it runs")
    args = parser.parse_args()
    if args.smoke:
        args.batch, args.repeats = 8, 1
    torch.manual_seed(0)
    module = DWPModule().eval()
    x = torch.randn(args.batch, 1, 28, 28)
    base = forward_ms(module, x, args.repeats)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch}")
    print(f"{'digital':36s} {base:8.1f} ms  1.00x")
    ideal = eval_cim_config()
    ideal.dac_bits = ideal.adc_bits = None
    for label, config in (
        ("CIM, PCM noise, ideal periphery", ideal),
        ("CIM, PCM noise, 8-bit DAC/ADC", eval_cim_config()),
    ):
        chip = module.to_cim(config)
        program(chip.net, seed=0)
        drift(chip.net, 86400.0, seed=1)
        ms = forward_ms(chip, x, args.repeats)
        print(f"{label:36s} {ms:8.1f} ms  {ms / base:.2f}x")


if __name__ == "__main__":
    main()
