"""MountainCarContinuous validation trials of the exploration strength: ``python -m zoo.pbsac.tune_mcc``.

Each trial trains recipes/pbsac/mountain_car.yaml (15k steps) with training seed 100, which no evaluation seed
uses, and scores the deterministic policy on 10 episodes from environment seeds 3e6 + i (the evaluation uses
1e6 + i, the certificate checks 2e6 + i). PB-SAC's knob is the optimism kappa of the actor's value (the spec's
0.5 and stronger scales); SAC's is its entropy target (the default -|A| = -1 and higher, i.e. more random
exploration); both arms get the same number of trials. Rule, fixed before the trials: the highest validation
return wins, but a trial that never reaches the hilltop (return < 0 on every validation episode) is a tie with
the default, which then stays (differences below 1 return are the action cost of standing still, noise).
The record is zoo/pbsac/tuning.json; each trial takes 60-110 s on one core.

    python -m zoo.pbsac.tune_mcc --arm pbsac --values 0.5 10 100 1000 10000
    python -m zoo.pbsac.tune_mcc --arm sac --values -1 -0.5 0 0.5 1
"""

from __future__ import annotations

import argparse
import json
import time

VALIDATION_SEED = 100
VALIDATION_EPISODE_BASE = 3_000_000
KNOBS = {"pbsac": "kappa", "sac": "target_entropy"}


def trial(arm: str, value: float, episodes: int = 10) -> dict:
    """Train one configuration with the validation seed and score it on the validation episodes."""
    import numpy as np
    import torch

    from zoo.eval.run import fit_recipe
    from zoo.pbsac.evaluate import MCC_RECIPE, SAC_ARGS
    from zoo.pbsac.rollout import episode_returns

    torch.set_num_threads(1)
    setting = f"--model.init_args.{KNOBS[arm]}={value}"
    args = [*SAC_ARGS, setting] if arm == "sac" else ["--model.init_args.certificate_episodes=0", setting]
    started = time.perf_counter()
    model = fit_recipe(MCC_RECIPE, VALIDATION_SEED, args)
    seeds = [VALIDATION_EPISODE_BASE + i for i in range(episodes)]
    returns = episode_returns("MountainCarContinuous-v0", model.agent.act, seeds, model.scaler)
    train = [float(r) for r in model.episode_returns]
    return {
        "arm": arm, KNOBS[arm]: value, "val_return": float(np.mean(returns)), "val_goals": int((returns > 0).sum()),
        "train_goals": sum(r > 0 for r in train), "train_returns": [round(r, 2) for r in train],
        "seconds": round(time.perf_counter() - started, 1),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", choices=sorted(KNOBS), required=True)
    parser.add_argument("--values", type=float, nargs="+", required=True)
    args = parser.parse_args()
    for value in args.values:
        print(json.dumps(trial(args.arm, value)), flush=True)


if __name__ == "__main__":
    main()
