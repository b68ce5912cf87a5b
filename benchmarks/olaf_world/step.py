"""olaf_world's training cost: a lam_align step against a lam_vae step, and cached tau against the teacher on the fly.

Both ratios come from the same process, on the same batch of 32 Crafter-sized clips (T = 4), the recipes'
architecture. ``align/vae`` should be <= 1.1 (the trajectory head is tiny and tau is read from the cache);
``on_the_fly/cached`` is what caching tau saves (EfficientNet-Lite0 on the batch's 128 frames each step).
Run under the shared CPU lock (``--smoke``: 1 repeat of a batch of 4, seconds; a check that it runs):

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/olaf_world/step.py [--smoke]
"""

from __future__ import annotations

import argparse
import json
import timeit

import torch

from zoo.olaf_world.clips import tau_from_features
from zoo.olaf_world.module import OlafLAMModule


def _timeit(fn, repeats: int) -> float:
    """Seconds per call of ``fn`` over ``repeats`` calls, after one warm-up call."""
    fn()
    return timeit.timeit(fn, number=repeats) / repeats


def _recipe_model_args() -> dict:
    """``model.init_args`` of recipes/olaf_world/align.yaml (the architecture the recipes train)."""
    from pathlib import Path

    import yaml

    from zoo._recipes import resolve_recipe

    recipe = Path(resolve_recipe("recipes/olaf_world/align.yaml"))
    return dict(yaml.safe_load(recipe.read_text())["model"]["init_args"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="the smallest run: 1 repeat of a batch of 4")
    args = parser.parse_args()
    if args.smoke:
        args.repeats, args.batch = 1, 4
    torch.set_num_threads(args.threads)
    from zoo.common.efficientnet import features

    torch.manual_seed(0)
    videos = torch.rand(args.batch, 4, 64, 64, 3)
    cached_tau = torch.nn.functional.normalize(torch.randn(args.batch, 1280), dim=1)
    recipe = _recipe_model_args()
    modules = {
        name: OlafLAMModule(**{**recipe, "align_weight": w, "seed": 0}) for name, w in (("vae", 0.0), ("align", 0.02))
    }
    optimisers = {name: m.configure_optimizers() for name, m in modules.items()}

    def step(name: str, tau_fn) -> None:
        module, optimiser = modules[name], optimisers[name]
        loss = module.losses({"videos": videos, "tau": tau_fn()})["loss"]
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 0.3)
        optimiser.step()

    def teacher_tau() -> torch.Tensor:
        frames = (videos * 255).to(torch.uint8).reshape(-1, 64, 64, 3).numpy()
        feats = features(frames, size=64).reshape(args.batch, 4, -1)
        return torch.as_tensor(tau_from_features(feats))

    features(videos[:1, 0].numpy())  # load the teacher once, outside the timings
    times = {
        "vae_step_s": _timeit(lambda: step("vae", lambda: cached_tau), args.repeats),
        "align_step_cached_tau_s": _timeit(lambda: step("align", lambda: cached_tau), args.repeats),
        "align_step_teacher_on_the_fly_s": _timeit(lambda: step("align", teacher_tau), args.repeats),
    }
    report = {
        **{k: round(v, 4) for k, v in times.items()},
        "align_over_vae": round(times["align_step_cached_tau_s"] / times["vae_step_s"], 3),
        "on_the_fly_over_cached": round(times["align_step_teacher_on_the_fly_s"] / times["align_step_cached_tau_s"], 3),
        "batch": args.batch,
        "threads": args.threads,
        "repeats": args.repeats,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
