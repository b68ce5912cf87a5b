"""Environment steps per second: our SAC (and PB-SAC) against Stable-Baselines3's SAC on Pendulum-v1.

All agents run in this one process with the same settings: 2 x 128 MLPs, batch 128, Adam 3e-4,
1000 uniform random steps, then one gradient update per environment step, gamma 0.99, tau 0.005,
automatic temperature, and the same number of torch intra-op threads. Time is the whole training call
(SB3 ``learn``; our ``Trainer.fit``), random warm-up included. Neither zoo agent runs a certificate phase here
(certificate_episodes=0, check_episodes=0), so that only the training loop is timed.

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/pbsac/sac_speed.py            # threads 1 and 2
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/pbsac/sac_speed.py --steps 6000 --threads 1
    .venv/bin/python benchmarks/pbsac/sac_speed.py --smoke                            # 1200 steps, 1 thread
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings


def sb3_steps_per_second(steps: int, seed: int) -> float:
    import gymnasium as gym
    from stable_baselines3 import SAC

    model = SAC(
        "MlpPolicy", gym.make("Pendulum-v1"), learning_rate=3e-4, buffer_size=100_000, learning_starts=1000,
        batch_size=128, tau=0.005, gamma=0.99, train_freq=1, gradient_steps=1, ent_coef="auto",
        policy_kwargs={"net_arch": [128, 128]}, seed=seed, device="cpu", verbose=0,
    )  # fmt: skip
    started = time.perf_counter()
    model.learn(total_timesteps=steps)
    return steps / (time.perf_counter() - started)


def zoo_steps_per_second(steps: int, seed: int, bayesian: bool, threads: int) -> float:
    import lightning.pytorch as pl

    from zoo.pbsac.data import PBSACDataModule
    from zoo.pbsac.module import PBSACModule

    pl.seed_everything(seed, verbose=False)
    # Plain SAC has no posterior to certify: like pbsac.sac_pendulum it needs certificate_episodes=0.
    module = PBSACModule(
        bayesian=bayesian, bound_weight=1.0 if bayesian else 0.0, kappa=0.5 if bayesian else 0.0,
        certificate_every=0, certificate_episodes=0, check_episodes=0, num_threads=threads,
    )  # fmt: skip
    trainer = pl.Trainer(
        max_epochs=1, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0,
    )  # fmt: skip
    started = time.perf_counter()
    trainer.fit(module, PBSACDataModule(total_steps=steps, steps_per_batch=500))
    return steps / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4000, help="environment steps per agent (>= 1000 warm-up)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="torch intra-op thread counts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="1200 steps (200 updates), one thread: seconds")
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.threads = 1200, [1]
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    import torch

    print(f"Pendulum-v1, {args.steps} environment steps each (1000 random), torch {torch.__version__}")
    print(f"{'threads':>7} {'SB3 SAC':>10} {'zoo SAC':>10} {'zoo PB-SAC':>11} {'SAC ratio':>10} {'PB-SAC ratio':>13}")
    for threads in args.threads:
        torch.set_num_threads(threads)
        sb3 = sb3_steps_per_second(args.steps, args.seed)
        ours = zoo_steps_per_second(args.steps, args.seed, bayesian=False, threads=threads)
        pbsac = zoo_steps_per_second(args.steps, args.seed, bayesian=True, threads=threads)
        print(f"{threads:>7} {sb3:>10.1f} {ours:>10.1f} {pbsac:>11.1f} {ours / sb3:>9.2f}x {pbsac / sb3:>12.2f}x")


if __name__ == "__main__":
    main()
