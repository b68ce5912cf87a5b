"""GEMQ speed: wall time of the whole quantization pipeline, and packed vs float forward latency, as ratios.

Run under the shared CPU lock::

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/gemq/quantize.py [--repeats 5]   (--smoke: 8 calibration
    sequences, one repeat, 1.5 bits only)

Everything is measured in this one process on the published gemq.wiki_fp checkpoint:

* pipeline stages (importance statistics, ILP, GPTQ, router fine-tuning) at 2.5 bits per expert on ``--calib``
  (default 64) x 128 calibration tokens, each as seconds and as a multiple of one float forward+backward pass over
  the calibration set;
* forward latency of the packed model (dequantize-on-the-fly experts) over the float model at 2.5 / 2.0 / 1.5 bits:
  prefill (16 x 128 tokens) and one cached decode step (batch 1), medians of ``--repeats`` runs;
* packed expert bytes over fp16 expert bytes.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time

import torch


def _median_time(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calib", type=int, default=64, help="calibration sequences of 128 tokens")
    parser.add_argument("--smoke", action="store_true", help="the smallest run: 8 sequences, one repeat, one budget")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument(
        "--threads", type=int, default=1, help="intra-op threads (1: fastest for this small model on a shared machine)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.repeats, args.calib = 1, 8
    budgets = (1.5,) if args.smoke else (2.5, 2.0, 1.5)
    torch.set_num_threads(args.threads)

    import zoo
    from zoo.gemq.data import calibration_set, wiki_corpus
    from zoo.quant.moe.api import expert_fp16_nbytes, expert_nbytes, quantize_
    from zoo.quant.moe.importance import causal_lm_loss, expert_importance
    from zoo.quant.moe.layout import find_moe_layers
    from zoo.quant.moe.pipeline import GEMQConfig, allocate, quant_config
    from zoo.quant.moe.routing import finetune_routers

    torch.manual_seed(0)
    fp = zoo.load("gemq.wiki_fp", pretrained=True).model.eval()
    corpus = wiki_corpus(4096)
    calibration = calibration_set(corpus.train, args.calib, 128, seed=0)
    names = [layer.name for layer in find_moe_layers(fp)]

    def forward_backward():
        for batch in calibration.split(16):
            causal_lm_loss(fp, batch).backward()
        fp.zero_grad(set_to_none=True)

    unit = _median_time(forward_backward, max(args.repeats // 2, 1))
    config = GEMQConfig(budget=2.5)
    stages = {}
    start = time.perf_counter()
    importance = expert_importance(fp, calibration, config.bits)
    stages["importance"] = time.perf_counter() - start
    start = time.perf_counter()
    widths = allocate(importance, config.budget, "ilp", c2c3=True)
    stages["ilp"] = time.perf_counter() - start
    model = copy.deepcopy(fp)
    start = time.perf_counter()
    quantize_(model, quant_config(names, widths, config), calibration)
    stages["gptq"] = time.perf_counter() - start
    start = time.perf_counter()
    finetune_routers(model, calibration, lr=config.router_lr, epochs=1, batch_size=8)
    stages["router_finetune"] = time.perf_counter() - start
    stages["total"] = sum(stages.values())

    prefill_tokens = calibration[:16]
    prompt = calibration[:1, :64]

    def prefill(m):
        with torch.no_grad():
            m(prefill_tokens)

    def decode_step(m):
        with torch.no_grad():
            out = m(prompt, use_cache=True)
            cache = out.past_key_values
            next_token = out.logits[:, -1:].argmax(-1)

        def step():
            with torch.no_grad():
                m(next_token, past_key_values=cache, use_cache=True)
            cache.crop(-1)  # back to the prompt: every timed step decodes the same position

        return step

    latency = {"float": {"prefill_s": _median_time(lambda: prefill(fp), args.repeats)}}
    latency["float"]["decode_step_s"] = _median_time(decode_step(fp), args.repeats * 4)
    packed_models = {}
    for budget in budgets:
        packed = copy.deepcopy(fp)
        quantize_(packed, quant_config(names, allocate(importance, budget, "ilp"), GEMQConfig(method="rtn")))
        packed_models[budget] = packed
        latency[f"packed@{budget:g}"] = {
            "prefill_s": _median_time(lambda p=packed: prefill(p), args.repeats),
            "decode_step_s": _median_time(decode_step(packed), args.repeats * 4),
        }
    fp16 = expert_fp16_nbytes(fp)
    result = {
        "threads": torch.get_num_threads(),
        "calibration_tokens": int(calibration.numel()),
        "unit_fp_forward_backward_s": round(unit, 4),
        "pipeline_s": {k: round(v, 3) for k, v in stages.items()},
        "pipeline_x_forward_backward": {k: round(v / unit, 2) for k, v in stages.items()},
        "latency_s": {k: {m: round(v, 5) for m, v in d.items()} for k, d in latency.items()},
        "latency_ratio_packed_over_float": {
            k: {m: round(v / latency["float"][m], 3) for m, v in d.items()} for k, d in latency.items() if k != "float"
        },
        "expert_bytes_ratio_packed_over_fp16": {
            f"{b:g}": round(expert_nbytes(p) / fp16, 4) for b, p in packed_models.items()
        },
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
