"""SAC and PB-SAC in plain torch: the agent, its update step and the replay buffer.

PB-SAC (reconstructed, see zoo.pbsac.module for the full list of choices) differs from SAC in three
places, all switched by :class:`SACConfig`:

* the twin critics' last layer is a Gaussian posterior rho (``bayesian=True``);
* the critic objective is the bound's smooth form,
  ``E_rho TD^2 / M + sqrt(C (KL(rho || pi_k) + ln(G/delta)) / (2 n_k))``, with the recursive prior
  pi_k = N(snapshot of the last-layer means, prior_std^2) refreshed every few thousand steps and n_k
  the transitions collected since (``bound_weight > 0``);
* the actor maximises the optimistic value ``min_j (mean_j + kappa std_j) - alpha log pi``, where
  std_j is the posterior spread of critic j (``kappa > 0``, annealed by the caller).

With ``bayesian=False`` the same code is standard SAC (clipped double Q, automatic temperature,
Polyak targets), which is how the baseline runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from zoo.pbsac.bound import PAULIN_CONSTANT, complexity_surrogate, gaussian_kl
from zoo.pbsac.networks import TanhGaussianActor, TwinCritic


@dataclass
class SACConfig:
    """Hyper-parameters of (PB-)SAC.

    Args:
        hidden: Width of the two hidden layers of actor and critics.
        gamma: Discount.
        tau: Polyak coefficient of the target critics.
        lr: Adam learning rate of actor, critics and temperature.
        batch_size: Replay batch size.
        init_alpha: Initial entropy temperature.
        target_entropy: Entropy target of the temperature (None: -act_dim).
        bayesian: Gaussian last-layer posterior on the critics (PB-SAC) instead of point estimates (SAC).
        sigma_init: Initial posterior standard deviation.
        prior_std: Standard deviation sigma_0 of the recursive prior pi_k.
        bound_weight: Weight of the complexity term in the critic objective (0: posterior without the bound).
        prior_refresh: Environment steps between refreshes of the recursive prior.
        kappa: Initial optimism coefficient of the actor (the caller anneals it).
        delta: Confidence parameter of the bound.
        grid_size: Size G of the lambda grid (enters as ln(G / delta)).
    """

    hidden: int = 128
    gamma: float = 0.99
    tau: float = 0.005
    lr: float = 3e-4
    batch_size: int = 128
    init_alpha: float = 1.0
    target_entropy: float | None = None
    bayesian: bool = True
    sigma_init: float = 1e-3
    prior_std: float = 0.1
    bound_weight: float = 1.0
    prior_refresh: int = 5000
    kappa: float = 0.5
    delta: float = 0.05
    grid_size: int = 20


class ReplayBuffer:
    """A ring buffer of transitions stored as rows ``[obs, act, reward, terminated, next_obs]`` of one tensor.

    One row per transition makes a sampled batch a single gather, and ``obs`` next to ``act`` makes the
    critic input a view. Rows are written through a numpy view of the same memory (cheap per step).

    Args:
        capacity: Maximum number of transitions (oldest are overwritten).
        obs_dim: Observation size.
        act_dim: Action size.
    """

    def __init__(self, capacity: int, obs_dim: int, act_dim: int) -> None:
        if capacity < 1:
            raise ValueError(f"replay capacity must be >= 1, got {capacity}")
        self.capacity, self.obs_dim, self.act_dim = capacity, obs_dim, act_dim
        self.storage = torch.zeros(capacity, 2 * obs_dim + act_dim + 2)
        self._rows = self.storage.numpy()
        self.size = 0
        self.position = 0
        o, a = obs_dim, act_dim
        self.slices = {
            "obs": slice(0, o),
            "obs_act": slice(0, o + a),
            "act": slice(o, o + a),
            "reward": o + a,
            "terminated": o + a + 1,
            "next_obs": slice(o + a + 2, 2 * o + a + 2),
        }

    def add(self, obs: np.ndarray, act: np.ndarray, reward: float, terminated: bool, next_obs: np.ndarray) -> None:
        """Append one transition (actions in the policy's [-1, 1] space)."""
        row = self._rows[self.position]
        o, a = self.obs_dim, self.act_dim
        row[:o] = obs
        row[o : o + a] = act
        row[o + a] = reward
        row[o + a + 1] = terminated
        row[o + a + 2 :] = next_obs
        self.position = (self.position + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch_size: int) -> torch.Tensor:
        """``batch_size`` rows drawn uniformly with replacement (torch's global generator)."""
        return self.storage[torch.randint(self.size, (batch_size,))]

    def recent(self, count: int) -> torch.Tensor:
        """The last ``count`` transitions in the order they were collected (a trajectory segment)."""
        count = min(count, self.size)
        index = (torch.arange(self.position - count, self.position)) % self.capacity
        return self.storage[index]


class SACAgent(nn.Module):
    """Actor, twin critics (optionally with a last-layer posterior), target critics and temperature.

    Args:
        obs_dim: Observation size.
        act_dim: Action size (actions live in [-1, 1]; the environment wrapper rescales).
        config: Hyper-parameters.
    """

    def __init__(self, obs_dim: int, act_dim: int, config: SACConfig) -> None:
        super().__init__()
        self.config = config
        self.obs_dim, self.act_dim = obs_dim, act_dim
        self.actor = TanhGaussianActor(obs_dim, act_dim, config.hidden)
        self.critic = TwinCritic(
            obs_dim, act_dim, config.hidden, bayesian=config.bayesian, sigma_init=config.sigma_init
        )
        self.target = TwinCritic(obs_dim, act_dim, config.hidden, bayesian=False)
        self.target.load_state_dict({k: v for k, v in self.critic.state_dict().items() if "rho" not in k})
        self.target.requires_grad_(False)
        self.log_alpha = nn.Parameter(torch.tensor(math.log(config.init_alpha)))
        self.target_entropy = -float(act_dim) if config.target_entropy is None else config.target_entropy
        # Training state that a reloaded agent needs: the loss normaliser M, the mixing-time estimate used
        # in the complexity term, and the recursive prior (last-layer means at the last refresh).
        self.register_buffer("loss_scale", torch.tensor(1.0))
        self.register_buffer("t_mix", torch.tensor(1.0))
        head_size = 2 * (config.hidden + 1) if config.bayesian else 0
        self.register_buffer("prior_mean", torch.zeros(head_size))
        self.register_buffer("prior_age", torch.tensor(0, dtype=torch.long))
        self._polyak_pairs: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None

    # ------------------------------------------------------------------ acting

    @torch.no_grad()
    def explore(self, obs: torch.Tensor) -> torch.Tensor:
        """A stochastic action in [-1, 1] for a batch of observations (no log-density: cheaper per step)."""
        mean, log_std = self.actor.distribution(obs)
        return torch.tanh(mean + log_std.exp() * torch.randn_like(mean))

    @torch.no_grad()
    def act(self, obs: torch.Tensor) -> torch.Tensor:
        """The deterministic (evaluation) action tanh(mean) in [-1, 1]."""
        return self.actor(obs)

    # ------------------------------------------------------------------ losses

    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.detach().exp()

    @torch.no_grad()
    def td_target(
        self, reward: torch.Tensor, terminated: torch.Tensor, next_obs: torch.Tensor, samples: int = 1
    ) -> torch.Tensor:
        """``r + gamma (1 - d) [min_j Q_targ_j(s', a') - alpha log pi(a'|s')]``, averaged over ``samples`` a' ~ pi."""
        if samples > 1:
            next_obs = next_obs.repeat(samples, 1)
        next_act, next_log_prob = self.actor.sample(next_obs)
        next_q = self.target(next_obs, next_act)[0].min(0).values - self.alpha * next_log_prob
        if samples > 1:
            next_q = next_q.view(samples, -1).mean(0)
        return reward + self.config.gamma * (1.0 - terminated) * next_q

    def posterior_kl(self) -> torch.Tensor:
        """KL(rho || pi_k) of the critics' last layer against the recursive prior N(prior_mean, prior_std^2)."""
        mean, std = self.critic.head_posterior()
        return gaussian_kl(mean, std, self.prior_mean, self.config.prior_std)

    def complexity(self, n: int) -> torch.Tensor:
        """The bound's smooth complexity term with C = 9 t_mix and the current KL (differentiable)."""
        concentration = PAULIN_CONSTANT * self.t_mix
        return complexity_surrogate(self.posterior_kl(), n, concentration, self.config.delta, self.config.grid_size)

    def normalised_td_losses(self, transitions: torch.Tensor, slices: dict, samples: int = 4) -> torch.Tensor:
        """Per-transition loss ``E_rho min(1, (Q(s,a) - y)^2 / M)`` averaged over the critics, shape (N,)."""
        from zoo.pbsac.bound import expected_clipped_square

        with torch.no_grad():
            target = self.td_target(
                transitions[:, slices["reward"]],
                transitions[:, slices["terminated"]],
                transitions[:, slices["next_obs"]],
                samples,
            )
            mean, var = self.critic.head_moments(
                self.critic.features(transitions[:, slices["obs"]], transitions[:, slices["act"]])
            )
            var = torch.zeros_like(mean) if var is None else var
            return expected_clipped_square(mean - target, var, self.loss_scale).mean(0)

    # ------------------------------------------------------------------ update

    def make_optimizers(self) -> tuple[torch.optim.Optimizer, torch.optim.Optimizer, torch.optim.Optimizer]:
        """Adam for actor, critics and temperature (fused kernels when the device supports them)."""
        fused = {"fused": True} if self.log_alpha.device.type in ("cpu", "cuda") else {}
        lr = self.config.lr
        return (
            torch.optim.Adam(self.actor.parameters(), lr=lr, **fused),
            torch.optim.Adam(self.critic.parameters(), lr=lr, **fused),
            torch.optim.Adam([self.log_alpha], lr=lr, **fused),
        )

    def _polyak(self) -> None:
        if self._polyak_pairs is None:
            self._polyak_pairs = (list(self.target.parameters()), [p.detach() for p in self.critic.mean_parameters()])
        torch._foreach_lerp_(self._polyak_pairs[0], self._polyak_pairs[1], self.config.tau)

    def update(
        self,
        batch: torch.Tensor,
        slices: dict,
        optimizers: tuple[torch.optim.Optimizer, torch.optim.Optimizer, torch.optim.Optimizer],
        kappa: float = 0.0,
    ) -> dict[str, torch.Tensor]:
        """One gradient step of temperature, critics and actor on a replay batch (SB3's order).

        Args:
            batch: Replay rows (B, row) as stored by :class:`ReplayBuffer`.
            slices: The buffer's column layout.
            optimizers: (actor, critic, temperature) optimisers, e.g. from :meth:`make_optimizers`.
            kappa: Optimism coefficient of the actor's value (PB-SAC).

        Returns:
            Detached scalars for logging.
        """
        actor_opt, critic_opt, alpha_opt = optimizers
        cfg = self.config
        obs = batch[:, slices["obs"]]

        action, log_prob = self.actor.sample(obs)
        alpha_loss = -(self.log_alpha * (log_prob.detach() + self.target_entropy)).mean()
        alpha_opt.zero_grad()
        alpha_loss.backward()
        alpha_opt.step()
        alpha = self.alpha

        target = self.td_target(
            batch[:, slices["reward"]], batch[:, slices["terminated"]], batch[:, slices["next_obs"]]
        )
        features = self.critic.features(obs, batch[:, slices["act"]])
        q_mean, q_var = self.critic.head_moments(features)
        squared_error = (q_mean - target).square()
        if q_var is not None:
            squared_error = squared_error + q_var  # E_rho (Q - y)^2 = (mean - y)^2 + var, exactly
        critic_loss = squared_error.mean() / self.loss_scale
        complexity = None
        if cfg.bayesian and cfg.bound_weight > 0:
            complexity = self.complexity(max(int(self.prior_age), cfg.batch_size))
            critic_loss = critic_loss + cfg.bound_weight * complexity
        critic_opt.zero_grad()
        critic_loss.backward()
        critic_opt.step()

        pi_mean, pi_var = self.critic(obs, action, detach=True)
        if pi_var is not None and kappa > 0:
            pi_mean = pi_mean + kappa * pi_var.sqrt()
        actor_loss = (alpha * log_prob - pi_mean.min(0).values).mean()
        actor_opt.zero_grad()
        actor_loss.backward()
        actor_opt.step()

        self._polyak()
        self.prior_age += 1
        out = {"critic_loss": critic_loss.detach(), "actor_loss": actor_loss.detach(), "alpha": alpha}
        if complexity is not None:
            out["complexity"] = complexity.detach()
        return out

    @torch.no_grad()
    def refresh_prior(self) -> None:
        """pi_k <- N(current last-layer means, prior_std^2); restart the count n_k of transitions since."""
        if self.config.bayesian:
            self.prior_mean.copy_(self.critic.head_posterior()[0])
        self.prior_age.zero_()
