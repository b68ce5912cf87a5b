"""Reference critics and certificates with a prior chosen on validation episodes.

Every certificate here is the card's block bound (episodes as independent blocks, C = 1, n = T episodes,
a 20-point lambda grid, delta = 0.05) on the loss l = min(1, delta_TD^2 / M), M = (r_max - r_min)^2, of a
critic that is *linear in its trained parameters* w under a Gaussian posterior rho = N(mu, diag s^2):

    delta_TD(z) = psi(z) . w - y(z),   so E_rho l(z) is closed-form (zoo.pbsac.bound.expected_clipped_square).

* ``constant_design``: the constant critic Q = c bootstrapping on itself, delta = c (1 - gamma (1 - d)) - r.
  Its least-squares c is mean(r) / (1 - gamma) when no episode terminates.
* ``bellman_design``: a linear critic Q_w = [phi(s, a), 1] . w on fixed features (one head per critic of a
  twin), bootstrapping on itself with a' ~ pi: psi = [phi(s, a), 1] - gamma (1 - d) mean_a' [phi(s', a'), 1],
  y = r (the Bellman residual of linear TD).
* ``agent_design``: an agent's own last layer against its frozen target, psi = [phi(s, a), 1],
  y = r + gamma (1 - d) [min_j Q_targ_j(s', a') - alpha log pi(a'|s')] (the loss of zoo.pbsac.certificate).

The prior pi = N(m, s_pi^2 I) never sees the certificate episodes: its mean m is given (0 for a data-free
prior, or a least-squares fit on validation episodes) and its width s_pi is chosen from a grid on validation
episodes (:func:`choose_width`), so the certificate pays no union over widths.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

from zoo.pbsac.bound import complexity_surrogate, expected_clipped_square, pac_bayes_bound
from zoo.pbsac.certificate import episode_means

#: Prior widths tried on validation episodes (a data-free grid: absolute for N(0, s^2), relative otherwise).
WIDTH_GRID = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)


@dataclass(frozen=True)
class LinearCertificate:
    """A block-bound certificate of a linear critic and its parts.

    Args:
        value: The bound on E_rho of the per-step loss.
        empirical_risk: E_rho of the mean per-episode loss on the certificate episodes.
        complexity: value - empirical_risk.
        complexity_floor: The complexity at KL = 0 (ln(G / delta) over T blocks; C = 1: no mixing-time factor).
        kl: KL(rho || pi) in nats.
        prior_width: s_pi, chosen on validation episodes.
        episodes: T.
    """

    value: float
    empirical_risk: float
    complexity: float
    complexity_floor: float
    kl: float
    prior_width: float
    episodes: int

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


class LinearLoss:
    """Per-transition E_rho min(1, (psi . w - y)^2 / M) for a design psi (E, N, p) and targets y (N,) or (E, N).

    A flat posterior (mean, std) has E * p entries, critic by critic; the loss is averaged over the E critics.
    """

    def __init__(self, design: torch.Tensor, target: torch.Tensor, scale: float) -> None:
        if design.dim() != 3:
            raise ValueError(f"the design must be (critics, transitions, parameters), got shape {tuple(design.shape)}")
        if not scale > 0:
            raise ValueError(f"the loss scale M must be > 0, got {scale}")
        self.design = design.double()
        self.target = target.double().expand(design.shape[:2])
        self.scale = float(scale)
        self.critics, _, self.size = design.shape

    def __call__(self, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
        shape = (self.critics, self.size, 1)
        q_mean = torch.bmm(self.design, mean.double().view(shape)).squeeze(-1)
        q_var = torch.bmm(self.design.square(), std.double().square().view(shape)).squeeze(-1)
        return expected_clipped_square(q_mean - self.target, q_var, self.scale).mean(0)

    def least_squares(self, ridge: float = 1e-6) -> torch.Tensor:
        """The flat w minimising sum (psi . w - y)^2 per critic (unclipped; a small ridge keeps it defined)."""
        eye = torch.eye(self.size, dtype=self.design.dtype)
        gram = self.design.transpose(1, 2) @ self.design + ridge * len(self.target[0]) * eye
        rhs = self.design.transpose(1, 2) @ self.target.unsqueeze(-1)
        return torch.linalg.solve(gram, rhs).flatten()


def gaussian_kl(mean, std, prior_mean, prior_std: float) -> torch.Tensor:
    """KL(N(mean, diag std^2) || N(prior_mean, prior_std^2 I)), summed."""
    ratio = (std / prior_std).square()
    return 0.5 * (ratio + ((mean - prior_mean) / prior_std).square() - 1.0 - torch.log(ratio)).sum()


def fit_and_bound(
    loss: LinearLoss,
    lengths: torch.Tensor,
    prior_mean: torch.Tensor,
    prior_width: float,
    start: torch.Tensor | None = None,
    *,
    delta: float = 0.05,
    grid_size: int = 20,
    steps: int = 200,
    lr: float = 0.05,
) -> tuple[LinearCertificate, tuple[torch.Tensor, torch.Tensor]]:
    """Fit rho on the episodes to minimise the bound's smooth form, then bound it (one prior: delta as given).

    rho starts at mean ``start`` (default: the unclipped least squares on these episodes) with std 0.1 s_pi,
    parameterised in the prior's units; any rho is allowed since the bound holds for all rho at once.
    """
    prior_mean = prior_mean.double()
    start = (loss.least_squares() if start is None else start).double()
    z = ((start - prior_mean) / prior_width).clone().requires_grad_(True)
    v = torch.full_like(prior_mean, math.log(0.1), requires_grad=True)
    optimizer = torch.optim.Adam([z, v], lr=lr)
    episodes = len(lengths)
    for _ in range(steps):
        mean, std = prior_mean + prior_width * z, prior_width * torch.exp(v)
        kl = gaussian_kl(mean, std, prior_mean, prior_width)
        objective = episode_means(loss(mean, std), lengths).mean() + complexity_surrogate(
            kl, episodes, 1.0, delta, grid_size
        )
        optimizer.zero_grad()
        objective.backward()
        optimizer.step()
    with torch.no_grad():
        mean, std = prior_mean + prior_width * z, prior_width * torch.exp(v)
        risk = min(1.0, float(episode_means(loss(mean, std), lengths).mean()))
        kl = float(gaussian_kl(mean, std, prior_mean, prior_width))
    bound = pac_bayes_bound(risk, max(0.0, kl), episodes, 1.0, delta, grid_size)
    floor = pac_bayes_bound(risk, 0.0, episodes, 1.0, delta, grid_size).complexity
    certificate = LinearCertificate(
        value=bound.value, empirical_risk=risk, complexity=bound.complexity, complexity_floor=floor,
        kl=max(0.0, kl), prior_width=float(prior_width), episodes=episodes,
    )  # fmt: skip
    return certificate, (mean.detach(), std.detach())


def choose_width(
    loss: LinearLoss,
    lengths: torch.Tensor,
    prior_mean: torch.Tensor,
    grid: Sequence[float],
    start: torch.Tensor | None = None,
    **kwargs,
) -> tuple[float, list[float]]:
    """The prior width of ``grid`` whose fitted bound is smallest on validation episodes, and every width's bound."""
    values = [fit_and_bound(loss, lengths, prior_mean, w, start, **kwargs)[0].value for w in grid]
    return float(grid[min(range(len(grid)), key=values.__getitem__)]), values


def constant_design(rows: torch.Tensor, slices: dict, gamma: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Design (1, N, 1) and targets (N,) of the self-bootstrapping constant critic: c (1 - gamma (1 - d)) - r."""
    done = rows[:, slices["terminated"]].flatten()
    return (1.0 - gamma * (1.0 - done)).view(1, -1, 1), rows[:, slices["reward"]].flatten()


def _with_bias(features: torch.Tensor) -> torch.Tensor:
    return torch.cat((features, torch.ones_like(features[..., :1])), dim=-1)


@torch.no_grad()
def bellman_design(
    critic, actor, rows: torch.Tensor, slices: dict, gamma: float, samples: int = 4
) -> tuple[torch.Tensor, torch.Tensor]:
    """Design (E, N, hidden + 1) and targets (N,) of linear TD on ``critic``'s hidden features, a' ~ ``actor``."""
    obs, act, next_obs = rows[:, slices["obs"]], rows[:, slices["act"]], rows[:, slices["next_obs"]]
    done = rows[:, slices["terminated"]].flatten()
    here = _with_bias(critic.features(obs, act))
    next_obs = next_obs.repeat(samples, 1)
    next_act, _ = actor.sample(next_obs)
    there = _with_bias(critic.features(next_obs, next_act))
    there = there.view(there.shape[0], samples, -1, there.shape[-1]).mean(1)
    return here - gamma * (1.0 - done).view(1, -1, 1) * there, rows[:, slices["reward"]].flatten()


@torch.no_grad()
def agent_design(agent, rows: torch.Tensor, slices: dict, samples: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """Design (E, N, hidden + 1) and targets (N,) of an agent's last layer against its frozen TD target."""
    target = agent.td_target(
        rows[:, slices["reward"]], rows[:, slices["terminated"]], rows[:, slices["next_obs"]], samples
    ).flatten()
    return _with_bias(agent.critic.features(rows[:, slices["obs"]], rows[:, slices["act"]])), target


def head_as_rows(flat: torch.Tensor, critics: int) -> torch.Tensor:
    """A last layer in ``critic.head_posterior()``'s layout (weights, then biases) as (critic, weights + bias)."""
    weights = flat[:-critics].view(critics, -1)
    return torch.cat((weights, flat[-critics:].view(critics, 1)), dim=1).flatten()


def split_episodes(
    design: torch.Tensor, target: torch.Tensor, lengths: torch.Tensor, first: int
) -> tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(design, target, lengths) of the first ``first`` episodes and of the rest."""
    cut = int(lengths[:first].sum())
    return (design[:, :cut], target[:cut], lengths[:first]), (design[:, cut:], target[cut:], lengths[first:])


def certify_linear(
    validation: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    certificate: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    scale: float,
    *,
    start: torch.Tensor | None = None,
    fitted_prior: bool = True,
    grid: Sequence[float] = WIDTH_GRID,
    delta: float = 0.05,
    steps: int = 200,
) -> dict[str, float]:
    """Certificates of a linear critic, each (design, target, lengths) of validation and certificate episodes.

    * ``free_*``: prior N(0, s^2 I), s from ``grid`` by the smallest fitted bound on the validation episodes.
    * without prefix (``fitted_prior``): prior N(m, s^2 I) with m the least squares on the validation episodes,
      s from ``grid`` by the bound on the second half of them against the first half's least squares (so s is
      chosen for a prior that did not see the episodes it is scored on, as on the certificate episodes).

    ``start`` is where rho starts (default: the least squares on the episodes it is fitted on).
    """
    val_design, val_target, val_lengths = validation
    cert_loss = LinearLoss(certificate[0], certificate[1], scale)
    val_loss = LinearLoss(val_design, val_target, scale)
    zero = torch.zeros(cert_loss.critics * cert_loss.size, dtype=torch.float64)
    options = dict(delta=delta, steps=steps)
    out: dict[str, float] = {}
    width, _ = choose_width(val_loss, val_lengths, zero, grid, start, **options)
    free, _ = fit_and_bound(cert_loss, certificate[2], zero, width, start, **options)
    out |= {f"free_{k}": v for k, v in _metrics(free).items()}
    if fitted_prior:
        if len(val_lengths) < 2:
            raise ValueError("a prior fitted on validation episodes needs at least 2 of them (half to choose s)")
        half, rest = split_episodes(val_design, val_target, val_lengths, len(val_lengths) // 2)
        first_mean = LinearLoss(half[0], half[1], scale).least_squares()
        width, _ = choose_width(LinearLoss(rest[0], rest[1], scale), rest[2], first_mean, grid, None, **options)
        fitted, _ = fit_and_bound(cert_loss, certificate[2], val_loss.least_squares(), width, None, **options)
        out |= _metrics(fitted)
    return out


def _metrics(certificate: LinearCertificate) -> dict[str, float]:
    parts = certificate.as_dict()
    parts["certificate"] = parts.pop("value")
    parts.pop("episodes")
    return parts
