"""Risk certificates of a trained (PB-)SAC agent: a certificate phase, episodes as independent blocks.

The certificate phase ends training. At the freeze the actor, the critics' hidden layers and the target
critics are fixed, so the normalised clipped TD loss

    l(z) = min(1, (Q_w(s, a) - y(z))^2 / M),   M = (r_max - r_min)^2

is a fixed function of a transition z and of the critics' last-layer weights w. M comes from the reward
bounds of the task (a TD error as large as the whole one-step reward range counts as a full error), not
from a network. Then:

* priors pi_k = N(mu_f, diag (c_k sigma_f)^2), k = 1..K: the last-layer posterior at the freeze, its
  standard deviations scaled by a fixed grid of widths c_k (recipes: 1, 0.3, 0.1, 0.03). mu_f and sigma_f
  were learned on the first part of the data (the whole SAC phase of training); the priors are fixed before
  the certificate episodes and never fitted on them. The training posterior is wide (sigma_f ~ 0.03 on
  Pendulum, set by the training bound's recursive prior), which costs ~0.06 of expected loss; a narrower
  prior lets the certified posterior be nearly the point estimate without paying hundreds of nats of KL;
* T episodes of the frozen exploration policy are collected (each from its own reset seed: independent
  blocks) and the posterior rho is trained on them, minimising the bound's smooth form. rho moves away from
  pi, so KL(rho || pi) > 0 and is paid in the bound. These episodes are the posterior's training data and
  the bound is evaluated on them, with the first part of the data (which made pi) excluded;
* a posterior is fitted against every prior and bounded at confidence delta / K (a union bound over the
  K priors: ln K nats inside every term); the certificate is the smallest of the K bounds, and the agent
  keeps that posterior. With K = 1 (prior_widths = (1,)) this is the single-prior bound;
* the bound treats each episode as one observation: X_i = the episode's mean loss, in [0, 1], and the T
  episodes are independent given the frozen policy, so Hoeffding's lemma holds with n = T, C = 1 (no
  mixing-time estimate is needed). The certified risk is E_rho E[X], the expected per-step loss of an
  episode. The i.i.d. bound (every one of the N transitions treated as independent, n = N) is reported
  beside it; it is not valid for the dependent transitions of an episode.
* the return bound (the paper's Theorem 3.2, reconstructed): the policy's normalised loss per episode
  (G_hi - G) / (G_hi - G_lo), G the discounted return and [G_lo, G_hi] its range from the reward bounds and
  gamma, bounded over the same T independent episodes. The policy is frozen before the episodes, so its
  KL is 0. Theorem 3.2 (as summarised from the paper) has sqrt(tau (1 - gamma^2H) / (1 - gamma^2)) R_max where
  the block argument has the whole range R (1 - gamma^H) / (1 - gamma): looser, but it needs no mixing constant.

The check: fresh episodes from held-out seeds estimate the same risks; a certificate "covers" if it is at
least that estimate (the risk bound) or at most it (the return lower bound).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

from zoo.pbsac.bound import (
    complexity_surrogate,
    expected_clipped_square,
    iid_pac_bayes_bound,
    pac_bayes_bound,
    union_prior_bound,
)
from zoo.pbsac.rollout import ActionScaler, collect_episodes

#: Reward bounds (r_min, r_max) of the tasks the zoo trains on, read off their gymnasium definitions.
#: Pendulum: -(theta^2 + 0.1 theta_dot^2 + 0.001 u^2) with |theta| <= pi, |theta_dot| <= 8, |u| <= 2.
#: MountainCarContinuous: -0.1 a^2 per step (|a| <= 1), +100 on reaching the goal. InvertedPendulum: +1 alive.
REWARD_RANGES: dict[str, tuple[float, float]] = {
    "Pendulum-v1": (-(math.pi**2 + 0.1 * 8.0**2 + 0.001 * 2.0**2), 0.0),
    "MountainCarContinuous-v0": (-0.1, 100.0),
    "InvertedPendulum-v5": (0.0, 1.0),
}

#: Rows per chunk when the TD targets of a certificate sample are computed.
CHUNK = 16_384

#: Seeds of the held-out check episodes (the evaluation episodes use 1e6 + i, training a random 31-bit seed).
CHECK_SEED_BASE = 2_000_000


#: Prior widths of the certificate (multiples of the freeze posterior's standard deviations), union-bounded.
PRIOR_WIDTHS = (1.0, 0.3, 0.1, 0.03)


def check_prior_widths(widths: Sequence[float]) -> tuple[float, ...]:
    """The grid of prior widths as a tuple; a one-line error if it is empty, repeats a value or has one <= 0."""
    values = tuple(float(w) for w in widths)
    if not values or len(set(values)) != len(values) or not all(math.isfinite(w) and w > 0 for w in values):
        raise ValueError(f"prior_widths must be distinct positive numbers, at least one; got {list(values)}")
    return values


def reward_range(env_id: str, given: tuple[float, float] | list[float] | None = None) -> tuple[float, float]:
    """``given`` as (r_min, r_max), or the known bounds of ``env_id``; a one-line error if neither exists."""
    if given is not None:
        low, high = (float(v) for v in given)
    elif env_id in REWARD_RANGES:
        low, high = REWARD_RANGES[env_id]
    else:
        raise ValueError(
            f"certificates need bounded rewards: give reward_range=[r_min, r_max] for {env_id!r} (known: "
            f"{', '.join(REWARD_RANGES)})"
        )
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"reward_range must be finite with r_min < r_max, got [{low}, {high}]")
    return low, high


def loss_scale(rewards: tuple[float, float]) -> float:
    """M = (r_max - r_min)^2: the squared one-step reward range."""
    return (rewards[1] - rewards[0]) ** 2


def return_range(rewards: tuple[float, float], gamma: float, horizon: int) -> tuple[float, float]:
    """[G_lo, G_hi] of a discounted return over at most ``horizon`` steps (zero reward after termination)."""
    total = (1.0 - gamma**horizon) / (1.0 - gamma) if gamma < 1 else float(horizon)
    return min(0.0, rewards[0]) * total, max(0.0, rewards[1]) * total


@dataclass(frozen=True)
class Certificate:
    """One certificate of the TD loss and of the return, and their checks on held-out episodes.

    Args:
        value: Bound on E_rho of the per-step TD loss (episodes as independent blocks).
        iid_value: The i.i.d. bound on the same sample (every transition treated as independent: invalid here).
        empirical_risk: E_rho of the mean per-episode loss on the certificate episodes.
        prior_risk: The same for the prior (the posterior at the freeze): how much rho learned.
        kl: KL(rho || pi) in nats.
        episodes: T, the number of independent episodes.
        n: Transitions in all.
        delta: Confidence parameter.
        scale: M, the loss normaliser.
        return_mean: Mean discounted return of the certificate episodes.
        return_bound: Lower bound on the policy's expected discounted return (Theorem 3.2, reconstructed).
        policy_certificate: The same as a bound on the normalised policy loss in [0, 1].
        fresh_loss: E_rho of the per-step loss on held-out episodes (NaN if not checked).
        fresh_loss_iid: E_rho of the loss per transition on the held-out episodes.
        fresh_return: Mean discounted return of the held-out episodes.
        covered: value >= fresh_loss.
        iid_covered: iid_value >= fresh_loss_iid.
        return_covered: return_bound <= fresh_return.
        prior_width: c_k of the prior whose bound is the certificate (its prior is N(mu_f, (c_k sigma_f)^2)).
        prior_widths: The grid of widths, fixed before the episodes (union bound: delta / K each).
        width_values: The bound of each width's fitted posterior, at delta / K; ``value`` is their minimum.
    """

    value: float
    iid_value: float
    empirical_risk: float
    prior_risk: float
    kl: float
    episodes: int
    n: int
    delta: float
    scale: float
    return_mean: float
    return_bound: float
    policy_certificate: float
    fresh_loss: float = float("nan")
    fresh_loss_iid: float = float("nan")
    fresh_return: float = float("nan")
    covered: bool = False
    iid_covered: bool = False
    return_covered: bool = False
    prior_width: float = 1.0
    prior_widths: tuple[float, ...] = (1.0,)
    width_values: tuple[float, ...] = ()

    def as_dict(self) -> dict:
        return asdict(self)


class FrozenTDLoss:
    """The loss l(z) of a frozen agent on fixed transitions, as a function of the last-layer posterior.

    Targets (averaged over ``target_samples`` next actions) and hidden features are computed once, so
    evaluating a posterior (mean, std) costs one batched product.

    Args:
        agent: A :class:`zoo.pbsac.sac.SACAgent` with a Bayesian critic.
        transitions: Rows (N, row) in the replay layout.
        slices: Column layout of the rows.
        scale: The normaliser M.
        target_samples: Next-action samples averaged in the TD target.
    """

    def __init__(self, agent, transitions: torch.Tensor, slices: dict, scale: float, target_samples: int = 4) -> None:
        targets, features = [], []
        with torch.no_grad():
            for rows in transitions.split(CHUNK):  # bounded memory: 4 next-action samples per row
                targets.append(
                    agent.td_target(
                        rows[:, slices["reward"]],
                        rows[:, slices["terminated"]],
                        rows[:, slices["next_obs"]],
                        target_samples,
                    )  # fmt: skip
                )
                features.append(agent.critic.features(rows[:, slices["obs"]], rows[:, slices["act"]]))
        self.target, self.features = torch.cat(targets), torch.cat(features, dim=1)
        self.scale = float(scale)
        self.ensemble, _, self.hidden = self.features.shape

    def __call__(self, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
        """Per-transition E_rho l(z), averaged over the critics, for a flat posterior (weights, then biases)."""
        e, h = self.ensemble, self.hidden
        weight_mean, bias_mean = mean[: e * h].view(e, h, 1), mean[e * h :].view(e, 1, 1)
        weight_std, bias_std = std[: e * h].view(e, h, 1), std[e * h :].view(e, 1, 1)
        q_mean = torch.baddbmm(bias_mean, self.features, weight_mean).squeeze(-1)
        q_var = torch.bmm(self.features.square(), weight_std.square()).squeeze(-1) + bias_std.square().view(e, 1)
        return expected_clipped_square(q_mean - self.target, q_var, self.scale).mean(0)


def episode_means(values: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` (N,) within each episode, for episodes of ``lengths`` (T,) laid end to end."""
    index = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
    sums = torch.zeros(len(lengths), dtype=values.dtype).index_add_(0, index, values)
    return sums / lengths.to(values.dtype)


def discounted_returns(rewards: torch.Tensor, lengths: torch.Tensor, gamma: float) -> torch.Tensor:
    """sum_t gamma^t r_t within each episode (t restarts at 0 in every episode), shape (T,)."""
    starts = torch.cumsum(lengths, 0) - lengths
    steps = torch.arange(len(rewards)) - torch.repeat_interleave(starts, lengths)
    return episode_means(rewards.double() * gamma ** steps.double(), lengths) * lengths.double()


def fit_posterior(
    loss: FrozenTDLoss,
    lengths: torch.Tensor,
    prior_mean: torch.Tensor,
    prior_std: torch.Tensor,
    delta: float,
    grid_size: int,
    steps: int,
    lr: float = 0.05,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Adam on rho to minimise ``mean_i X_i(rho) + sqrt((KL(rho || pi) + ln(G/delta)) / (2T))``, from rho = pi.

    The bound holds for every rho at once, so rho may be any function of the certificate episodes. rho is
    parameterised in the prior's units (mean = mu_pi + sigma_pi z, std = sigma_pi e^v), which keeps one
    learning rate sensible whatever the prior's scale.
    """
    z = torch.zeros_like(prior_mean, requires_grad=True)
    v = torch.zeros_like(prior_std, requires_grad=True)
    optimizer = torch.optim.Adam([z, v], lr=lr)
    episodes = len(lengths)
    for _ in range(steps):
        kl = 0.5 * (torch.exp(2 * v) + z.square() - 1.0 - 2 * v).sum()
        risk = episode_means(loss(prior_mean + prior_std * z, prior_std * torch.exp(v)), lengths).mean()
        objective = risk + complexity_surrogate(kl, episodes, 1.0, delta, grid_size)
        optimizer.zero_grad()
        objective.backward()
        optimizer.step()
    return (prior_mean + prior_std * z).detach(), (prior_std * torch.exp(v)).detach()


def _kl(mean, std, prior_mean, prior_std) -> float:
    ratio = (std / prior_std).double().square()
    return float(0.5 * (ratio + ((mean - prior_mean) / prior_std).double().square() - 1.0 - torch.log(ratio)).sum())


def certify(
    agent,
    env_id: str,
    scaler: ActionScaler,
    slices: dict,
    rewards: tuple[float, float],
    horizon: int,
    *,
    episodes: int = 200,
    seed: int = 0,
    delta: float = 0.05,
    grid_size: int = 20,
    target_samples: int = 4,
    posterior_steps: int = 100,
    check_episodes: int = 100,
    prior_widths: Sequence[float] = (1.0,),
) -> tuple[Certificate, tuple[torch.Tensor, torch.Tensor]]:
    """Run the certificate phase of a frozen agent: collect T episodes, fit rho from the prior, bound, check.

    Args:
        agent: A :class:`zoo.pbsac.sac.SACAgent` with ``config.bayesian``; its posterior at the call is the prior.
        env_id: Gymnasium id.
        scaler: Action rescaling to the environment's box.
        slices: Column layout of the replay rows.
        rewards: Reward bounds (r_min, r_max).
        horizon: Episode length cap H of the task (for the return range).
        episodes: T, the number of certificate episodes (independent blocks).
        seed: Episode i is reset with seed + i.
        delta: Confidence parameter.
        grid_size: Number of lambda values.
        target_samples: Next-action samples in the TD target.
        posterior_steps: Adam steps fitting rho on the certificate episodes (0: rho = pi, KL = 0).
        check_episodes: Held-out episodes (seeds CHECK_SEED_BASE + i) that measure the true risks (0: none).
        prior_widths: The grid c_1..c_K of prior widths: prior k is N(mu_f, diag (c_k sigma_f)^2), the posterior
            at the freeze with its standard deviations scaled by c_k. A posterior is fitted against each, and
            the certificate is the smallest of the K bounds, each at delta / K (ln K nats inside every term).

    Returns:
        The certificate and the fitted posterior (mean, std) in the layout of ``critic.head_posterior()``.
    """
    if not agent.config.bayesian:
        raise ValueError("certificates need the PB-SAC critic posterior; build the agent with bayesian=True")
    if episodes < 1:
        raise ValueError(f"need at least one certificate episode, got episodes={episodes}")
    widths = check_prior_widths(prior_widths)
    scale, gamma = loss_scale(rewards), agent.config.gamma
    dims = (agent.obs_dim, agent.act_dim, scaler)
    rows, lengths = collect_episodes(env_id, agent.explore, [seed + i for i in range(episodes)], *dims)
    loss = FrozenTDLoss(agent, rows, slices, scale, target_samples)
    freeze_mean, freeze_std = (p.detach().clone() for p in agent.critic.head_posterior())
    share = delta / len(widths)  # union bound over the priors: each holds at delta / K
    fits, risks, kls = [], [], []
    for width in widths:  # prior k: N(mu_f, (c_k sigma_f)^2), all fixed before the certificate episodes
        prior_std = freeze_std * width
        mean, std = freeze_mean, prior_std
        if posterior_steps > 0:
            mean, std = fit_posterior(loss, lengths, freeze_mean, prior_std, share, grid_size, posterior_steps)
        with torch.no_grad():
            losses = loss(mean, std)
        fits.append((mean, std, losses))
        risks.append(min(1.0, float(episode_means(losses, lengths).mean())))
        kls.append(_kl(mean, std, freeze_mean, prior_std))
    markov, best, per_prior = union_prior_bound(risks, kls, episodes, 1.0, delta, grid_size)
    mean, std, losses = fits[best]
    kl, empirical = kls[best], risks[best]
    with torch.no_grad():
        prior_losses = loss(freeze_mean, freeze_std)
    iid = iid_pac_bayes_bound(min(1.0, float(losses.mean())), kl, len(losses), share, grid_size)
    g_lo, g_hi = return_range(rewards, gamma, horizon)
    returns = discounted_returns(rows[:, slices["reward"]], lengths, gamma)
    policy_loss = ((g_hi - returns) / (g_hi - g_lo)).clamp(0.0, 1.0)
    policy = pac_bayes_bound(float(policy_loss.mean()), 0.0, episodes, 1.0, delta, grid_size)  # one prior: KL = 0
    fields = dict(
        value=markov.value, iid_value=iid.value, empirical_risk=empirical,
        prior_risk=float(episode_means(prior_losses, lengths).mean()), kl=kl, episodes=episodes, n=len(losses),
        delta=delta, scale=scale, return_mean=float(returns.mean()),
        return_bound=g_hi - min(1.0, policy.value) * (g_hi - g_lo), policy_certificate=policy.value,
        prior_width=widths[best], prior_widths=widths, width_values=tuple(r.value for r in per_prior),
    )  # fmt: skip
    if check_episodes > 0:
        seeds = [CHECK_SEED_BASE + i for i in range(check_episodes)]
        fresh_rows, fresh_lengths = collect_episodes(env_id, agent.explore, seeds, *dims)
        with torch.no_grad():
            fresh = FrozenTDLoss(agent, fresh_rows, slices, scale, target_samples)(mean, std)
        fresh_return = float(discounted_returns(fresh_rows[:, slices["reward"]], fresh_lengths, gamma).mean())
        fields.update(
            fresh_loss=float(episode_means(fresh, fresh_lengths).mean()), fresh_loss_iid=float(fresh.mean()),
            fresh_return=fresh_return,
        )  # fmt: skip
        fields.update(
            covered=fields["value"] >= fields["fresh_loss"],
            iid_covered=fields["iid_value"] >= fields["fresh_loss_iid"],
            return_covered=fields["return_bound"] <= fresh_return,
        )  # fmt: skip
    return Certificate(**fields), (mean, std)
