"""Environment helpers: making environments, rescaling actions, and batched rollouts.

Rollouts for certificates and evaluation step several independent gymnasium environments in lock
step with one batched policy call per step, which is where the time goes on small networks.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

Policy = Callable[[torch.Tensor], torch.Tensor]


def make_env(env_id: str, seed: int | None = None):
    """``gymnasium.make(env_id)``, reset with ``seed``; a clear error for unknown ids or missing extras."""
    import gymnasium as gym

    try:
        env = gym.make(env_id)
    except gym.error.Error as error:
        raise ValueError(
            f"cannot make gymnasium environment {env_id!r} ({error}); use e.g. 'Pendulum-v1', "
            "'InvertedPendulum-v5' or 'HalfCheetah-v5' (MuJoCo tasks need `pip install gymnasium[mujoco]`)"
        ) from None
    if seed is not None:
        env.reset(seed=seed)
        env.action_space.seed(seed)
    return env


def env_dims(env) -> tuple[int, int, np.ndarray, np.ndarray]:
    """Observation size, action size and the action box (low, high) of a continuous-control env."""
    import gymnasium as gym

    if not isinstance(env.action_space, gym.spaces.Box) or not isinstance(env.observation_space, gym.spaces.Box):
        raise ValueError(
            f"SAC needs a Box observation and action space; {env.spec.id if env.spec else env} has "
            f"{env.observation_space} and {env.action_space}"
        )
    low, high = env.action_space.low.astype(np.float32), env.action_space.high.astype(np.float32)
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        raise ValueError("SAC squashes actions into a bounded box; this environment's action space is unbounded")
    return int(np.prod(env.observation_space.shape)), int(np.prod(env.action_space.shape)), low, high


class ActionScaler:
    """Maps policy actions in [-1, 1] to the environment's box and back.

    Args:
        low: Lower bounds of the action box.
        high: Upper bounds of the action box.
    """

    def __init__(self, low: np.ndarray, high: np.ndarray) -> None:
        self.centre = ((high + low) / 2).astype(np.float32)
        self.half_range = ((high - low) / 2).astype(np.float32)

    def to_env(self, action: np.ndarray) -> np.ndarray:
        return self.centre + self.half_range * action


def collect_chains(
    env_id: str,
    policy: Policy,
    num_chains: int,
    steps: int,
    seed: int,
    obs_dim: int,
    act_dim: int,
    scaler: ActionScaler,
) -> torch.Tensor:
    """Run ``num_chains`` independent trajectories of ``steps`` transitions each, resets included.

    Episodes that end (terminated or truncated) are reset in place and the chain continues, so each
    chain is one trajectory of the ergodic chain "episode with resets".

    Args:
        env_id: Gymnasium id.
        policy: Batched policy, observations (B, obs_dim) -> actions in [-1, 1] (B, act_dim).
        num_chains: Number of independent chains B.
        steps: Transitions per chain T.
        seed: Chain b uses environment seed ``seed + b``.
        obs_dim: Observation size.
        act_dim: Action size.
        scaler: Action rescaling to the environment's box.

    Returns:
        Rows ``[obs, act, reward, terminated, next_obs]`` (the replay-buffer layout), shape (B, T, row).
    """
    envs = [make_env(env_id) for _ in range(num_chains)]
    obs = np.stack([env.reset(seed=seed + b)[0] for b, env in enumerate(envs)]).astype(np.float32)
    rows = np.zeros((num_chains, steps, 2 * obs_dim + act_dim + 2), dtype=np.float32)
    o, a = obs_dim, act_dim
    for t in range(steps):
        actions = policy(torch.from_numpy(obs)).numpy()
        rows[:, t, :o] = obs
        rows[:, t, o : o + a] = actions
        for b, env in enumerate(envs):
            next_obs, reward, terminated, truncated, _ = env.step(scaler.to_env(actions[b]))
            rows[b, t, o + a] = reward
            rows[b, t, o + a + 1] = terminated
            rows[b, t, o + a + 2 :] = next_obs
            obs[b] = env.reset()[0] if terminated or truncated else next_obs
    for env in envs:
        env.close()
    return torch.from_numpy(rows)


def episode_returns(env_id: str, policy: Policy, seeds: list[int], scaler: ActionScaler) -> np.ndarray:
    """Undiscounted return of one episode per seed, all episodes stepped in lock step.

    Args:
        env_id: Gymnasium id.
        policy: Batched policy (usually the deterministic one).
        seeds: One environment seed per episode.
        scaler: Action rescaling to the environment's box.
    """
    envs = [make_env(env_id) for _ in seeds]
    obs = np.stack([env.reset(seed=s)[0] for env, s in zip(envs, seeds)]).astype(np.float32)
    returns = np.zeros(len(seeds))
    running = np.ones(len(seeds), dtype=bool)
    while running.any():
        actions = policy(torch.from_numpy(obs)).numpy()
        for b in np.flatnonzero(running):
            next_obs, reward, terminated, truncated, _ = envs[b].step(scaler.to_env(actions[b]))
            returns[b] += reward
            obs[b] = next_obs
            running[b] = not (terminated or truncated)
    for env in envs:
        env.close()
    return returns


def collect_episodes(
    env_id: str,
    policy: Policy,
    seeds: list[int],
    obs_dim: int,
    act_dim: int,
    scaler: ActionScaler,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One complete episode per seed (reset to termination or truncation), all stepped in lock step.

    Each episode starts from its own ``env.reset(seed=...)`` and the policy's noise is drawn afresh, so
    for a fixed policy the episodes are independent: the independent blocks of the certificates.

    Args:
        env_id: Gymnasium id.
        policy: Batched policy, observations (B, obs_dim) -> actions in [-1, 1] (B, act_dim).
        seeds: One environment seed per episode.
        obs_dim: Observation size.
        act_dim: Action size.
        scaler: Action rescaling to the environment's box.

    Returns:
        Rows ``[obs, act, reward, terminated, next_obs]`` of all episodes one after another, shape (N, row),
        and the episode lengths (T,), which sum to N.
    """
    envs = [make_env(env_id) for _ in seeds]
    obs = np.stack([env.reset(seed=s)[0] for env, s in zip(envs, seeds)]).astype(np.float32)
    o, a = obs_dim, act_dim
    episodes: list[list[np.ndarray]] = [[] for _ in seeds]
    running = np.ones(len(seeds), dtype=bool)
    while running.any():
        live = np.flatnonzero(running)
        actions = policy(torch.from_numpy(obs[live])).numpy()
        for row_index, b in enumerate(live):
            next_obs, reward, terminated, truncated, _ = envs[b].step(scaler.to_env(actions[row_index]))
            row = np.empty(2 * o + a + 2, dtype=np.float32)
            row[:o], row[o : o + a], row[o + a], row[o + a + 1], row[o + a + 2 :] = (
                obs[b], actions[row_index], reward, terminated, next_obs
            )  # fmt: skip
            episodes[b].append(row)
            obs[b] = next_obs
            running[b] = not (terminated or truncated)
    for env in envs:
        env.close()
    lengths = torch.tensor([len(rows) for rows in episodes])
    return torch.from_numpy(np.concatenate([np.stack(rows) for rows in episodes])), lengths
