"""PB-SAC as a LightningModule that owns its environment loop.

Implements **PAC-Bayesian Reinforcement Learning Trains Generalizable Policies**
(A. Zitouni, M. Hennequin, J. Agoun, R. Horache, N. Kabachi, O. Rivasplata; arXiv 2510.10544): a
PAC-Bayes bound for RL that accounts for Markov dependence through the chain's mixing time,
non-vacuous certificates for off-policy critics, and PB-SAC, SAC that optimises the bound and uses it
to guide exploration. The zoo's spec (02-pbsac.md) had the abstract only, so the bound and the
algorithm here are **reconstructed**, following that spec and the zoo issue. Note: a third-party
summary of the paper's v1 states that its Theorem 3.2 bounds the *policy's* loss (negative discounted
return of T trajectories) with a complexity term sqrt(R_max^2 tau_min (1 - gamma^2H) / (2T (1 - gamma^2))
(KL + ln(2/delta))); it is reconstructed here with the episodes as independent blocks (the return bound of
zoo.pbsac.certificate), beside the critic's TD-loss certificate. Choices and deviations:

* Bound (zoo.pbsac.bound): Paulin's Markov McDiarmid (C = 9 t_mix) + Donsker-Varadhan + a union bound
  over a grid of G = 20 lambdas, delta = 0.05. Grid scaled with C (lambda_j = sqrt(8n/C) 10^(3j/19)),
  not the spec's fixed [sqrt(n)/10, 100 sqrt(n)]. The i.i.d. bound (C = 1) is reported beside it.
* Certificates (zoo.pbsac.certificate, issue 17) come from a certificate phase at the end of training: the
  policy, hidden layers and targets freeze; the prior is the last-layer posterior at the freeze (learned on
  the data before it, which the bound excludes); T episodes of the frozen policy train the posterior away
  from it (KL > 0) and the bound is evaluated on them with each episode an independent block (no mixing
  time needed). Loss l = min(1, (Q(s,a) - y)^2 / M), y with 4 next-action samples, M = (r_max - r_min)^2
  from the task's reward bounds; averaged over the twin critics. The certified posterior is the agent's.
* Training (not certificates) keeps two heuristics: the objective's normaliser is the 99th percentile of
  the initial critic's squared TD errors on the warm-up data, and its t_mix the integrated autocorrelation
  time of the loss series (Sokal window, c = 5; zoo.pbsac.mixing).
* Posterior on the critics' **last layer only** (2 x 129 weights; the spec's option), hidden layers are
  point estimates. Q is then exactly Gaussian under rho, so E_rho of the TD loss, the posterior spread and
  the certificate's E_rho L_hat are closed-form instead of the spec's one-sample reparameterisation and
  K = 4 sample statistics (same quantities, no Monte-Carlo noise).
* Critic objective: E_rho (Q - y)^2 / M + sqrt(9 t_mix (KL(rho || pi_k) + ln(G/delta)) / (2 n_k)), recursive
  prior pi_k = N(last-layer means at the last refresh, 0.1^2), refreshed every 5k steps; n_k = max(batch,
  updates since the refresh). t_mix here is re-estimated at each refresh on the last 5k buffer transitions.
  The unclipped normalised square replaces the clipped loss so that large errors keep a gradient; it
  upper-bounds the clipped loss, so the objective upper-bounds the bound's smooth form.
* Exploration: the actor maximises min_j (mean_j + kappa std_j) - alpha log pi, kappa = 0.5 annealed
  linearly to 0 over ``kappa_anneal_steps``.
* Certificate priors: the posterior at the freeze with its standard deviations scaled by a fixed grid,
  N(mu_f, diag (c sigma_f)^2) for c in ``certificate_prior_widths`` (1, 0.3, 0.1, 0.03), union-bounded
  (ln 4 nats in the bound), not the spec's N(mu, 0.1^2) (KL ~ 1000 nats for sigma = 1e-3 posteriors). A
  posterior is fitted against each prior in that prior's units; the smallest bound is the certificate.
* Certificates at the end of training (optionally also every ``certificate_every`` steps, on a copy of the
  posterior), each checked against held-out episodes (seeds 2e6 + i). They run on a forked random
  generator, so they do not change the training trajectory.
* Everything else is SAC as in Stable-Baselines3: clipped double Q, automatic temperature with target
  entropy -|A|, gamma 0.99, tau 0.005, Adam 3e-4, batch 128, 2 x 128 MLPs, 1 update per step after
  1k uniform random steps. ``bayesian=False, bound_weight=0, kappa=0`` is that SAC (the baseline), run
  through the same code.
* Speed: environment steps run in chunks inside one ``training_step`` (one Lightning call per chunk), the
  raw torch optimisers are stepped directly (Lightning's wrappers add per-call overhead on these tiny
  networks; Lightning's step counter is advanced once per chunk instead), and the fit runs with one
  intra-op thread by default (two threads are slower for 2 x 128 MLPs at batch 128).
"""

from __future__ import annotations

import math

import lightning.pytorch as pl
import numpy as np
import torch

from zoo._distributed import refuse_distributed
from zoo._inference import PretrainedMixin
from zoo.pbsac import INPUT_FORMAT
from zoo.pbsac.certificate import PRIOR_WIDTHS, Certificate, certify, check_prior_widths
from zoo.pbsac.certificate import reward_range as reward_range_of
from zoo.pbsac.mixing import estimate_mixing_time
from zoo.pbsac.rollout import ActionScaler, env_dims, episode_returns, make_env
from zoo.pbsac.sac import ReplayBuffer, SACAgent, SACConfig

#: Seeds of the evaluation episodes: the same initial states for every agent and arm.
EVAL_SEED_BASE = 1_000_000


class PBSACModule(PretrainedMixin, pl.LightningModule):
    """PB-SAC (or, with ``bayesian=False``, SAC) on a gymnasium continuous-control task.

    The module owns the environment, the replay buffer and the rollout: every training batch is a number
    of environment steps to run (see :class:`zoo.pbsac.data.PBSACDataModule`), each followed by one
    gradient update once ``learning_starts`` random steps are in the buffer. Certificates are computed
    every ``certificate_every`` steps and at the end of training.

    Args:
        env_id: Gymnasium environment id (Box observations and actions).
        hidden: Width of the two hidden layers of actor and critics.
        gamma: Discount.
        tau: Polyak coefficient of the target critics.
        lr: Adam learning rate.
        batch_size: Replay batch size.
        buffer_size: Replay capacity.
        learning_starts: Uniform random steps before the first update.
        init_alpha: Initial entropy temperature.
        target_entropy: Entropy target (None: -action_dim).
        bayesian: Gaussian last-layer posterior on the critics (PB-SAC); False is SAC.
        sigma_init: Initial posterior standard deviation.
        prior_std: Standard deviation of the recursive training prior.
        bound_weight: Weight of the bound's complexity term in the critic objective.
        prior_refresh: Steps between refreshes of the recursive prior (and of the t_mix estimate).
        kappa: Initial optimism of the actor's value.
        kappa_anneal_steps: Steps over which kappa decays linearly to 0.
        delta: Confidence parameter of the bound.
        grid_size: Number of lambda values of the bound.
        certificate_every: Steps between intermediate certificates (0: only the final one). An intermediate
            certificate runs the certificate phase on a copy of the posterior; training goes on unchanged.
        certificate_episodes: T, the episodes of each certificate phase (0: no certificate; needs ``bayesian``).
        certificate_posterior_steps: Adam steps fitting the posterior on the certificate episodes (0: KL = 0).
        check_episodes: Held-out episodes measuring the risks that the certificate must cover (0: no check).
        certificate_prior_widths: Grid of prior widths c_k of the certificate (prior k: the posterior at the
            freeze with its standard deviations times c_k), union-bounded (None: 1, 0.3, 0.1, 0.03).
        reward_range: Reward bounds [r_min, r_max] for M and the return bound (None: the known bounds of
            ``env_id``, see :data:`zoo.pbsac.certificate.REWARD_RANGES`).
        eval_episodes: Deterministic episodes per validation run.
        num_threads: torch intra-op threads during fit (None: leave as is).
    """

    DEFAULT_PRETRAINED_CFG = {"input_format": INPUT_FORMAT}

    def __init__(
        self,
        env_id: str = "Pendulum-v1",
        hidden: int = 128,
        gamma: float = 0.99,
        tau: float = 0.005,
        lr: float = 3e-4,
        batch_size: int = 128,
        buffer_size: int = 100_000,
        learning_starts: int = 1000,
        init_alpha: float = 1.0,
        target_entropy: float | None = None,
        bayesian: bool = True,
        sigma_init: float = 1e-3,
        prior_std: float = 0.1,
        bound_weight: float = 1.0,
        prior_refresh: int = 5000,
        kappa: float = 0.5,
        kappa_anneal_steps: int = 15_000,
        delta: float = 0.05,
        grid_size: int = 20,
        certificate_every: int = 0,
        certificate_episodes: int = 200,
        certificate_posterior_steps: int = 100,
        check_episodes: int = 100,
        certificate_prior_widths: list[float] | None = None,
        reward_range: list[float] | None = None,
        eval_episodes: int = 10,
        num_threads: int | None = 1,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        if learning_starts < 1 or batch_size < 1 or buffer_size < learning_starts:
            raise ValueError(
                f"need learning_starts >= 1, batch_size >= 1 and buffer_size >= learning_starts; got "
                f"{learning_starts}, {batch_size}, {buffer_size}"
            )
        if (certificate_every or certificate_episodes) and not bayesian:
            raise ValueError(
                "certificates need the critic posterior: set certificate_episodes=0 and certificate_every=0 "
                "when bayesian=false"
            )
        self.automatic_optimization = False
        env = make_env(env_id)
        self.obs_dim, self.act_dim, low, high = env_dims(env)
        self.max_episode_steps = env.spec.max_episode_steps if env.spec and env.spec.max_episode_steps else 1000
        env.close()
        self.scaler = ActionScaler(low, high)
        self.rewards = reward_range_of(env_id, reward_range) if certificate_episodes else None
        self.prior_widths = check_prior_widths(
            PRIOR_WIDTHS if certificate_prior_widths is None else certificate_prior_widths
        )
        config = SACConfig(
            hidden=hidden, gamma=gamma, tau=tau, lr=lr, batch_size=batch_size, init_alpha=init_alpha,
            target_entropy=target_entropy, bayesian=bayesian, sigma_init=sigma_init, prior_std=prior_std,
            bound_weight=bound_weight, prior_refresh=prior_refresh, kappa=kappa, delta=delta, grid_size=grid_size,
        )  # fmt: skip
        self.agent = SACAgent(self.obs_dim, self.act_dim, config)
        self.register_buffer("env_steps", torch.tensor(0, dtype=torch.long))
        self.example_input_array = torch.zeros(1, self.obs_dim)
        self.certificates: list[dict] = []
        self.episode_returns: list[float] = []
        self._env = None

    # ------------------------------------------------------------------ inference

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic action in the environment's units for observations (B, obs_dim)."""
        action = self.agent.actor(obs)
        centre = torch.as_tensor(self.scaler.centre, device=action.device)
        return centre + torch.as_tensor(self.scaler.half_range, device=action.device) * action

    def evaluate_returns(self, seeds: list[int]) -> np.ndarray:
        """Returns of deterministic episodes, one per environment seed."""
        return episode_returns(self.hparams.env_id, self.agent.act, seeds, self.scaler)

    # ------------------------------------------------------------------ fit

    def configure_optimizers(self):
        return list(self.agent.make_optimizers())

    def setup(self, stage: str) -> None:
        reason = "each process would step its own environment into its own replay buffer and the critics would diverge"
        refuse_distributed(self, reason, stage)

    def on_fit_start(self) -> None:
        h = self.hparams
        self._saved_threads = torch.get_num_threads()
        if h.num_threads:
            torch.set_num_threads(h.num_threads)
        # One seed source: seed_everything fixes the torch generator, which draws the environment seed.
        self._seed = int(torch.randint(2**31 - 1, ()).item())
        self._rng = np.random.default_rng(self._seed)
        self._env = make_env(h.env_id)
        self._obs = self._env.reset(seed=self._seed)[0].astype(np.float32)
        self._episode_return = 0.0
        self.buffer = ReplayBuffer(h.buffer_size, self.obs_dim, self.act_dim)
        self._raw_optimizers = tuple(opt.optimizer for opt in self.optimizers())
        self.certificates = []  # a history read back from a folder belongs to the fit that wrote it

    def on_fit_end(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
        torch.set_num_threads(self._saved_threads)

    def on_train_end(self) -> None:
        done = bool(self.certificates) and self.certificates[-1].get("final", False)
        if self.hparams.certificate_episodes and int(self.env_steps) >= self.hparams.learning_starts and not done:
            self._certify(log=False, final=True)

    def kappa_now(self) -> float:
        """The annealed optimism coefficient at the current step."""
        h = self.hparams
        if not h.bayesian or h.kappa <= 0:
            return 0.0
        return h.kappa * max(0.0, 1.0 - int(self.env_steps) / max(1, h.kappa_anneal_steps))

    def training_step(self, batch, batch_idx: int) -> None:
        h = self.hparams
        env, buffer, slices, agent = self._env, self.buffer, self.buffer.slices, self.agent
        obs, episode_return = self._obs, self._episode_return
        finished: list[float] = []
        stats = {}
        steps = int(self.env_steps)
        updates = 0
        for _ in range(int(batch)):
            if steps < h.learning_starts:
                action = self._rng.uniform(-1.0, 1.0, self.act_dim).astype(np.float32)
            else:
                action = agent.explore(torch.from_numpy(obs)).numpy()
            next_obs, reward, terminated, truncated, _ = env.step(self.scaler.to_env(action))
            buffer.add(obs, action, reward, terminated, next_obs)
            episode_return += reward
            if terminated or truncated:
                finished.append(episode_return)
                episode_return = 0.0
                next_obs = env.reset()[0]
            obs = next_obs.astype(np.float32, copy=False)
            steps += 1
            if steps == h.learning_starts:
                self._warm_up()
            if steps > h.learning_starts:  # as in SB3: total_steps - learning_starts updates
                if agent.prior_age >= h.prior_refresh:
                    self._refresh_prior()
                stats = agent.update(buffer.sample(h.batch_size), slices, self._raw_optimizers, self.kappa_now())
                updates += 1
            if h.certificate_every and steps >= h.learning_starts and steps % h.certificate_every == 0:
                self.env_steps.fill_(steps)
                self._certify(log=True, final=False)
        self._obs, self._episode_return = obs, episode_return
        self.env_steps.fill_(steps)
        self._count_optimizer_steps(updates)
        self.episode_returns += finished
        self.log("env_steps", float(steps), prog_bar=True, batch_size=1)
        if finished:
            self.log("train/return", float(np.mean(finished)), prog_bar=True, batch_size=1)
        for key, value in stats.items():
            self.log(f"train/{key}", value, batch_size=1)
        if h.bayesian:
            self.log("train/kappa", self.kappa_now(), batch_size=1)
            self.log("train/t_mix", float(agent.t_mix), batch_size=1)

    def _count_optimizer_steps(self, updates: int) -> None:
        """Advance Lightning's step counter by the updates of this chunk (one per update, not per optimiser).

        The raw optimisers bypass Lightning's wrappers, which would count each of the three steps; the
        counter drives ``trainer.global_step`` (logging x-axis, ``max_steps``, the exported step count).
        """
        try:
            progress = self.trainer.fit_loop.epoch_loop.manual_optimization.optim_step_progress
        except AttributeError:  # another Lightning layout: the count is cosmetic, training is unaffected
            return
        progress.total.ready += updates
        progress.total.completed += updates

    @torch.no_grad()
    def _warm_up(self) -> None:
        """Freeze the loss normaliser M: the 99th percentile of the initial critic's squared TD errors."""
        rows = self.buffer.recent(self.hparams.learning_starts)
        s = self.buffer.slices
        target = self.agent.td_target(rows[:, s["reward"]], rows[:, s["terminated"]], rows[:, s["next_obs"]], samples=4)
        q_mean, _ = self.agent.critic(rows[:, s["obs"]], rows[:, s["act"]])
        scale = torch.quantile((q_mean - target).square().flatten(), 0.99)
        self.agent.loss_scale.fill_(max(float(scale), 1e-6))
        self._refresh_prior()

    @torch.no_grad()
    def _refresh_prior(self) -> None:
        """New recursive prior; re-estimate t_mix on the most recent stretch of the trajectory."""
        recent = self.buffer.recent(self.hparams.prior_refresh)
        losses = self.agent.normalised_td_losses(recent, self.buffer.slices)
        self.agent.t_mix.fill_(estimate_mixing_time(losses.numpy()))
        self.agent.refresh_prior()

    def _certify(self, log: bool, final: bool) -> Certificate:
        """The certificate phase at the current step; the final one keeps its fitted posterior in the agent."""
        h = self.hparams
        step = int(self.env_steps)
        with torch.random.fork_rng():  # certificates must not change the training trajectory
            torch.manual_seed(self._seed + step)
            certificate, (mean, std) = certify(
                self.agent, h.env_id, self.scaler, self.buffer.slices, self.rewards, self.max_episode_steps,
                episodes=h.certificate_episodes, seed=(self._seed + 7919 * step) % 2**31, delta=h.delta,
                grid_size=h.grid_size, posterior_steps=h.certificate_posterior_steps, check_episodes=h.check_episodes,
                prior_widths=self.prior_widths,
            )  # fmt: skip
        if final:  # the end of training: the certified posterior is the agent's
            self.agent.critic.set_head_posterior(mean, std)
        record = {"step": step, "final": final, **certificate.as_dict()}
        record = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in record.items()}
        record = {k: list(v) if isinstance(v, tuple) else v for k, v in record.items()}
        self.certificates.append(record)
        if log:  # self.log is not allowed in on_train_end
            for key in ("value", "iid_value", "empirical_risk", "kl", "fresh_loss", "return_bound"):
                if record[key] is not None:
                    self.log(f"certificate/{key}", float(record[key]), batch_size=1)
        return certificate

    # ------------------------------------------------------------------ validation

    def validation_step(self, batch, batch_idx: int) -> None:
        seeds = [EVAL_SEED_BASE + i for i in range(self.hparams.eval_episodes)]
        self.log("val/return", float(self.evaluate_returns(seeds).mean()), prog_bar=True, batch_size=1)

    # ------------------------------------------------------------------ export

    def import_files(self, folder) -> None:
        """Read the certificate history back from config.json's metadata (what :meth:`export_metadata` wrote)."""
        from zoo._serialization import read_config

        self.certificates = list(read_config(folder).get("metadata", {}).get("certificates", []))

    def export_metadata(self) -> dict:
        """The last certificate (value, n, t_mix, delta, check) and the whole certificate history."""
        meta: dict = {"env_steps": int(self.env_steps), "loss_scale": float(self.agent.loss_scale)}
        if self.certificates:
            meta["certificate"] = self.certificates[-1]
            meta["certificates"] = self.certificates
        if self.episode_returns:
            meta["last_10_episode_returns"] = [round(r, 2) for r in self.episode_returns[-10:]]
        return meta
