"""GEMQ split-v2 timing: seconds of each piece of the v2 evaluation and of a base's training step, on small inputs.

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/gemq/v2_timing.py [--calib 64] [--steps 5] [--json out.json]
    (--smoke: 8 calibration windows, one step)

Measures with one intra-op thread (what the recipes and the evaluation use):

* base pretraining: seconds per AdamW step (batch 16 x 128, forward + backward + step) of the two v2 base
  architectures (``recipes/gemq/wiki2_mixtral_fp.yaml``, ``wiki2_qwen2moe_fp.yaml``), randomly initialised;
* on the published v2 Mixtral base: importance statistics, one GPTQ quantization at 2.0 bits, RTN, scoring 32 windows
  (packed and float), the teacher's routing, and router alignment steps, on ``--calib`` calibration windows of split
  v2 (the costs that grow with the calibration set are linear in it: multiply by 640 / ``--calib`` for the card's).
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import torch


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def base_step_seconds(kind: str, steps: int) -> float:
    from zoo.gemq.model import MoEArch, build_moe_lm

    arch = MoEArch(**_recipe_arch(kind))
    model = build_moe_lm(arch).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = torch.randint(0, arch.vocab_size, (16, 128), generator=torch.Generator().manual_seed(0))

    def step():
        out = model(input_ids=batch, labels=batch, output_router_logits=True)
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        optimizer.step()

    step()  # warm-up
    return _time(lambda: [step() for _ in range(steps)]) / steps


def _recipe_arch(kind: str) -> dict:
    import yaml

    path = {"mixtral": "recipes/gemq/wiki2_mixtral_fp.yaml", "qwen2_moe": "recipes/gemq/wiki2_qwen2moe_fp.yaml"}[kind]
    with open(path) as handle:
        return yaml.safe_load(handle)["model"]["init_args"]["arch"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calib", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--json", default=None)
    parser.add_argument("--smoke", action="store_true", help="the smallest run: 8 calibration windows, one step")
    args = parser.parse_args()
    if args.smoke:
        args.calib, args.steps = 8, 1
    torch.set_num_threads(1)

    import zoo
    from zoo.gemq.alignment import RouterFTConfig, align_routers, teacher_router_logprobs
    from zoo.gemq.data import calibration_windows, chunk, wiki_splits
    from zoo.quant.moe.api import quantize_
    from zoo.quant.moe.importance import expert_importance
    from zoo.quant.moe.layout import find_moe_layers
    from zoo.quant.moe.pipeline import GEMQConfig, allocate, quant_config
    from zoo.quant.moe.routing import lm_metrics

    out: dict = {"threads": 1, "calib_sequences": args.calib}
    for kind in ("mixtral", "qwen2_moe"):
        out[f"base_step_s_{kind}"] = round(base_step_seconds(kind, args.steps), 3)
    fp = zoo.load("gemq.wiki2_mixtral_fp", pretrained=True).model.eval()
    splits = wiki_splits(4096)
    cal = calibration_windows(splits.calibration, args.calib, 128, 0)
    val = chunk(splits.validation, 128)[:32]
    names = [layer.name for layer in find_moe_layers(fp)]
    holder = {}
    out["importance_s"] = _time(lambda: holder.update(imp=expert_importance(fp, cal, (1, 2, 3))))
    widths = allocate(holder["imp"], 2.0, "ilp", True)
    gptq = quant_config(names, widths, GEMQConfig(method="gptq"))
    out["gptq_s"] = _time(lambda: holder.update(q=quantize_(copy.deepcopy(fp), gptq, cal)))
    rtn = quant_config(names, widths, GEMQConfig(method="rtn"))
    out["rtn_s"] = _time(lambda: quantize_(copy.deepcopy(fp), rtn))
    out["score_packed_32_s"] = _time(lambda: lm_metrics(holder["q"], val))
    out["score_fp_32_s"] = _time(lambda: lm_metrics(fp, val))
    out["teacher_routing_s"] = _time(lambda: holder.update(t=teacher_router_logprobs(fp, cal)))
    config = RouterFTConfig(lr=1e-3, max_steps=args.steps, eval_every=args.steps, patience=1)
    out["align_steps_plus_2_scores_s"] = _time(
        lambda: align_routers(holder["q"], fp, cal, val, config, teacher_calibration=holder["t"])
    )
    out["align_step_s"] = (out["align_steps_plus_2_scores_s"] - 2 * out["score_packed_32_s"]) / args.steps
    out = {k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
