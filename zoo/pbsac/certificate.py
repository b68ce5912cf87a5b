"""Risk certificates for an off-policy critic: fresh rollout, mixing-time estimate, Markov-aware bound.

At a checkpoint the policy and the target critics are frozen, so the normalised clipped TD loss
``l(z) = min(1, (Q(s, a) - y(z))^2 / M)`` is a fixed function of a transition z. A fresh trajectory of
the frozen policy (independent chains, resets included) gives n transitions; the certificate bounds
the posterior risk ``E_rho E[l]`` of the critics' last-layer posterior rho:

* prior pi = the checkpoint's own posterior. It was trained on the replay buffer only, so it does not
  depend on the fresh rollout (a data-dependent prior in the PAC-Bayes sense); KL(rho || pi) = 0 for the
  checkpoint posterior itself. Optionally rho is then tuned on the rollout to minimise the bound, paying KL;
* t_mix = max(1, tau_int of the loss series), pooled over the chains (zoo.pbsac.mixing);
* the bound of zoo.pbsac.bound with C = 9 t_mix, and the i.i.d. bound (C = 1) beside it.

The check: the same loss measured on fresh independent rollouts (new seeds) estimates the true risk;
the certificate "covers" if it is at least that.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from zoo.pbsac.bound import (
    complexity_surrogate,
    expected_clipped_square,
    gaussian_kl,
    iid_pac_bayes_bound,
    markov_pac_bayes_bound,
)
from zoo.pbsac.mixing import MixingTimeEstimator, estimate_mixing_time
from zoo.pbsac.rollout import ActionScaler, collect_chains


@dataclass(frozen=True)
class Certificate:
    """One certificate and its check.

    Args:
        value: The Markov-aware bound on the posterior risk of the normalised TD loss.
        iid_value: The i.i.d. bound (C = 1) on the same sample, for comparison.
        empirical_risk: E_rho L_hat_n on the certificate rollout.
        kl: KL(rho || pi) in nats.
        n: Transitions in the certificate rollout.
        t_mix: The mixing-time estimate used (C = 9 t_mix).
        delta: Confidence parameter.
        fresh_loss: E_rho of the loss on fresh independent rollouts (NaN if not checked).
        covered: Whether value >= fresh_loss.
        iid_covered: Whether iid_value >= fresh_loss.
    """

    value: float
    iid_value: float
    empirical_risk: float
    kl: float
    n: int
    t_mix: float
    delta: float
    fresh_loss: float = float("nan")
    covered: bool = False
    iid_covered: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


class FrozenTDLoss:
    """The loss l(z) of a frozen agent on a fixed set of transitions, as a function of the last-layer posterior.

    Targets (averaged over ``target_samples`` next actions) and hidden features are computed once, so
    evaluating a posterior (mean, std) costs one batched product.

    Args:
        agent: A :class:`zoo.pbsac.sac.SACAgent` with a Bayesian critic.
        transitions: Rows (N, row) in the replay layout.
        slices: Column layout of the rows.
        target_samples: Next-action samples averaged in the TD target.
    """

    def __init__(self, agent, transitions: torch.Tensor, slices: dict, target_samples: int = 4) -> None:
        with torch.no_grad():
            self.target = agent.td_target(
                transitions[:, slices["reward"]],
                transitions[:, slices["terminated"]],
                transitions[:, slices["next_obs"]],
                target_samples,
            )
            self.features = agent.critic.features(transitions[:, slices["obs"]], transitions[:, slices["act"]])
        self.scale = agent.loss_scale.detach()
        self.ensemble, _, self.hidden = self.features.shape

    def __call__(self, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
        """Per-transition E_rho l(z), averaged over the critics, for a flat posterior (weights, then biases)."""
        e, h = self.ensemble, self.hidden
        weight_mean, bias_mean = mean[: e * h].view(e, h, 1), mean[e * h :].view(e, 1, 1)
        weight_std, bias_std = std[: e * h].view(e, h, 1), std[e * h :].view(e, 1, 1)
        q_mean = torch.baddbmm(bias_mean, self.features, weight_mean).squeeze(-1)
        q_var = torch.bmm(self.features.square(), weight_std.square()).squeeze(-1) + bias_std.square().view(e, 1)
        return expected_clipped_square(q_mean - self.target, q_var, self.scale).mean(0)


def tune_posterior(
    loss: FrozenTDLoss,
    prior_mean: torch.Tensor,
    prior_std: torch.Tensor,
    n: int,
    concentration: float,
    delta: float,
    grid_size: int,
    steps: int,
    lr: float = 1e-3,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Adam on (mean, softplus^-1 std) of rho to minimise ``E_rho L_hat + sqrt(C (KL + ln(G/delta)) / (2n))``.

    Valid because the PAC-Bayes bound holds for all posteriors at once; starts at rho = pi.
    """
    mean = prior_mean.clone().requires_grad_(True)
    raw_std = torch.log(torch.expm1(prior_std)).clone().requires_grad_(True)
    optimizer = torch.optim.Adam([mean, raw_std], lr=lr)
    for _ in range(steps):
        std = torch.nn.functional.softplus(raw_std)
        kl = gaussian_kl(mean, std, prior_mean, prior_std)
        objective = loss(mean, std).mean() + complexity_surrogate(kl, n, concentration, delta, grid_size)
        optimizer.zero_grad()
        objective.backward()
        optimizer.step()
    return mean.detach(), torch.nn.functional.softplus(raw_std).detach()


def certify(
    agent,
    env_id: str,
    scaler: ActionScaler,
    slices: dict,
    *,
    steps: int = 30_000,
    chains: int = 10,
    delta: float = 0.05,
    grid_size: int = 20,
    target_samples: int = 4,
    posterior_steps: int = 0,
    fresh_rollouts: int = 20,
    fresh_steps: int = 200,
    seed: int = 0,
    mixing_time: MixingTimeEstimator = estimate_mixing_time,
) -> Certificate:
    """Certify the agent's critic posterior on a fresh rollout of its frozen policy, then check the certificate.

    Args:
        agent: A :class:`zoo.pbsac.sac.SACAgent` with ``config.bayesian``.
        env_id: Gymnasium id.
        scaler: Action rescaling to the environment's box.
        slices: Column layout of the replay rows.
        steps: Certificate rollout size n (split over ``chains`` independent chains).
        chains: Independent chains of the certificate rollout.
        delta: Confidence parameter.
        grid_size: Number of lambda values.
        target_samples: Next-action samples in the TD target.
        posterior_steps: Adam steps tuning rho on the rollout (0: certify the checkpoint posterior).
        fresh_rollouts: Independent rollouts for the check (0: no check).
        fresh_steps: Transitions per check rollout.
        seed: Seed of the rollouts (certificate chains use seed + b, the check seed + 10^6 + b).
        mixing_time: Estimator of t_mix from the (chains, T) loss series.
    """
    if not agent.config.bayesian:
        raise ValueError("certificates need the PB-SAC critic posterior; build the agent with bayesian=True")
    if steps < chains or chains < 1:
        raise ValueError(f"need at least one transition per chain; got steps={steps}, chains={chains}")
    per_chain = steps // chains
    n = per_chain * chains
    dims = (agent.obs_dim, agent.act_dim, scaler)
    rows = collect_chains(env_id, agent.explore, chains, per_chain, seed, *dims).reshape(n, -1)
    loss = FrozenTDLoss(agent, rows, slices, target_samples)
    prior_mean, prior_std = (p.detach() for p in agent.critic.head_posterior())
    with torch.no_grad():
        t_mix = mixing_time(loss(prior_mean, prior_std).view(chains, per_chain).numpy())
    mean, std = prior_mean, prior_std
    if posterior_steps > 0:
        mean, std = tune_posterior(loss, prior_mean, prior_std, n, 9.0 * t_mix, delta, grid_size, posterior_steps)
    with torch.no_grad():
        losses = loss(mean, std)
        t_mix = max(t_mix, mixing_time(losses.view(chains, per_chain).numpy()))
        kl = float(gaussian_kl(mean, std, prior_mean, prior_std))
    empirical = float(losses.mean())
    markov = markov_pac_bayes_bound(empirical, kl, n, t_mix, delta, grid_size)
    iid = iid_pac_bayes_bound(empirical, kl, n, delta, grid_size)
    certificate = Certificate(markov.value, iid.value, empirical, kl, n, t_mix, delta)
    if fresh_rollouts > 0:
        fresh = collect_chains(env_id, agent.explore, fresh_rollouts, fresh_steps, seed + 10**6, *dims)
        with torch.no_grad():
            fresh_loss = float(
                FrozenTDLoss(agent, fresh.reshape(-1, fresh.shape[-1]), slices, target_samples)(mean, std).mean()
            )
        certificate = Certificate(
            markov.value, iid.value, empirical, kl, n, t_mix, delta, fresh_loss,
            covered=markov.value >= fresh_loss, iid_covered=iid.value >= fresh_loss,
        )  # fmt: skip
    return certificate
