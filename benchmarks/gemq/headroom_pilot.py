"""GEMQ headroom pilot (issue 73): how much can quantizing the routed experts cost on each published base?

    /work/cpu .venv/bin/python benchmarks/gemq/headroom_pilot.py [--windows 256] [--json out.json]
    (--smoke: 8 windows, the v2 Mixtral base only)

For each base: the test perplexity's relative rise when every routed expert is round-to-nearest at 2 bits (min-max per
group of 128 (the evaluation's reference), of 32, or per row) and when the routed experts are removed (their down
projections zeroed: the block adds nothing but a Qwen2-MoE shared expert), on the first ``--windows`` 128-token test
windows. One thread; about 25 s per base.

Measured 2026-12-06 (256 windows): 2-bit RTN costs 4.7% / 3.1% / 5.6% (group 128 / 32 / row) on the v2 Mixtral base,
0.8% / 0.2% / 1.5% on the v2 Qwen2-MoE base and 7.7% / 5.1% / 7.0% on the v1 base, while removing the routed experts
multiplies the perplexity by 72 (Mixtral v2), 46 (v1) and 1.74 (Qwen2-MoE, whose fp shared expert carries it).
A longer v2 Mixtral fit (the recipe with max_steps 1900, max_epochs 8, max_time 14:30: stopped at step 1,709, best
validation perplexity 100.5) costs 6.2% / 4.6% / 8.4% (same windows; loaded from its exported folder).
"""

from __future__ import annotations

import argparse
import copy
import json
import time

import torch

BASES = (
    ("gemq.wiki2_mixtral_fp", "wiki_splits"),
    ("gemq.wiki2_qwen2moe_fp", "wiki_splits"),
    ("gemq.wiki_fp", "wiki_corpus"),
)


def pilot(name: str, corpus: str, windows: int) -> dict[str, float]:
    import zoo
    from zoo.gemq.evaluate import held_out_windows
    from zoo.quant.moe.allocation import uniform_allocation
    from zoo.quant.moe.api import quantize_
    from zoo.quant.moe.layout import find_moe_layers
    from zoo.quant.moe.pipeline import GEMQConfig, quant_config
    from zoo.quant.moe.routing import lm_metrics

    fp = zoo.load(name, pretrained=True)
    test = held_out_windows(fp, corpus)[1][:windows]
    model = fp.model.eval()
    base = lm_metrics(model, test)[0]["ppl"]
    layers = find_moe_layers(model)
    widths = uniform_allocation(len(layers), layers[0].num_experts, (1, 2, 3), 2.0)
    out = {"fp_ppl": base}
    for group in (128, 32, None):
        config = quant_config([layer.name for layer in layers], widths, GEMQConfig(method="rtn", group_size=group))
        quantized = quantize_(copy.deepcopy(model), config, None)
        out[f"rtn2_group{group or '_row'}"] = lm_metrics(quantized, test)[0]["ppl"] / base - 1
    removed = copy.deepcopy(model)
    with torch.no_grad():
        for key, parameter in removed.named_parameters():
            if ".experts." in key and "down_proj" in key:
                parameter.zero_()
    out["experts_removed"] = lm_metrics(removed, test)[0]["ppl"] / base - 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=256)
    parser.add_argument("--json")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    bases, windows = (BASES[:1], 8) if args.smoke else (BASES, args.windows)
    results = {}
    for name, corpus in bases:
        started = time.perf_counter()
        results[name] = {k: round(v, 4) for k, v in pilot(name, corpus, windows).items()}
        print(name, results[name], f"{time.perf_counter() - started:.0f} s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
