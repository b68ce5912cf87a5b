"""Networks of (PB-)SAC: a tanh-Gaussian actor and twin critics with an optional Gaussian last layer.

The twin critics run as one ensemble (batched matrix products over a leading ensemble axis), so both
critics cost one set of kernel launches. In PB-SAC the critics' **last layer** carries the posterior
rho = N(mu, diag sigma^2), sigma = softplus(rho_param); the hidden layers are point estimates. Because
Q is linear in the last layer, Q(s, a) under rho is exactly Gaussian with mean phi . mu + b_mu and
variance phi^2 . sigma_w^2 + sigma_b^2 (phi = the hidden features), so posterior expectations of the
TD loss, the posterior spread used for exploration and the certificate are all closed-form.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


class EnsembleLinear(nn.Module):
    """``E`` independent linear layers applied in parallel: (E, B, in) or (B, in) -> (E, B, out).

    Args:
        ensemble: Number of members E.
        in_features: Input size.
        out_features: Output size.
    """

    def __init__(self, ensemble: int, in_features: int, out_features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(ensemble, in_features, out_features))
        self.bias = nn.Parameter(torch.empty(ensemble, 1, out_features))
        bound = 1.0 / math.sqrt(in_features)  # nn.Linear's default initialisation, per member
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor, detach: bool = False) -> torch.Tensor:
        weight, bias = (self.weight.detach(), self.bias.detach()) if detach else (self.weight, self.bias)
        if x.dim() == 2:
            x = x.expand(weight.shape[0], *x.shape)
        return torch.baddbmm(bias, x, weight)


class TwinCritic(nn.Module):
    """Twin Q-networks (2 x hidden MLPs as one ensemble) with a deterministic or Gaussian last layer.

    Args:
        obs_dim: Observation size.
        act_dim: Action size.
        hidden: Width of the two hidden layers.
        ensemble: Number of critics (2 for clipped double Q).
        bayesian: Give the last layer a Gaussian posterior (PB-SAC); otherwise a point estimate (SAC).
        sigma_init: Initial posterior standard deviation of the last-layer weights.
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden: int = 128,
        ensemble: int = 2,
        bayesian: bool = False,
        sigma_init: float = 1e-3,
    ) -> None:
        super().__init__()
        self.bayesian = bayesian
        self.layer1 = EnsembleLinear(ensemble, obs_dim + act_dim, hidden)
        self.layer2 = EnsembleLinear(ensemble, hidden, hidden)
        self.head = EnsembleLinear(ensemble, hidden, 1)  # the posterior means mu when bayesian
        if bayesian:
            rho = math.log(math.expm1(sigma_init))  # inverse softplus
            self.head_rho_weight = nn.Parameter(torch.full((ensemble, hidden, 1), rho))
            self.head_rho_bias = nn.Parameter(torch.full((ensemble, 1, 1), rho))

    def features(self, obs: torch.Tensor, act: torch.Tensor, detach: bool = False) -> torch.Tensor:
        """Hidden features phi(s, a), shape (E, B, hidden)."""
        x = torch.cat((obs, act), dim=-1)
        x = F.relu(self.layer1(x, detach))
        return F.relu(self.layer2(x, detach))

    def head_std(self, detach: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Posterior standard deviations (weight (E, hidden, 1), bias (E, 1, 1)) of the last layer."""
        rho_w, rho_b = self.head_rho_weight, self.head_rho_bias
        if detach:
            rho_w, rho_b = rho_w.detach(), rho_b.detach()
        return F.softplus(rho_w), F.softplus(rho_b)

    def head_moments(self, features: torch.Tensor, detach: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Mean and variance of Q under the last-layer posterior given features: (E, B) each.

        The variance is None for a deterministic critic.
        """
        mean = self.head(features, detach).squeeze(-1)
        if not self.bayesian:
            return mean, None
        std_w, std_b = self.head_std(detach)
        var = torch.bmm(features.square(), std_w.square()).squeeze(-1) + std_b.square().squeeze(-1)
        return mean, var

    def forward(
        self, obs: torch.Tensor, act: torch.Tensor, detach: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Q under the posterior: mean (E, B) and variance (E, B) or None.

        Args:
            obs: Observations (B, obs_dim).
            act: Actions in [-1, 1] (B, act_dim).
            detach: Use detached parameters (for the actor's loss, which must not train the critic).
        """
        return self.head_moments(self.features(obs, act, detach), detach)

    def mean_parameters(self) -> list[nn.Parameter]:
        """The parameters a target network tracks: hidden layers and last-layer means."""
        return [p for name, p in self.named_parameters() if "rho" not in name]

    def head_posterior(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Last-layer posterior as flat vectors (mean, std) over all critics, weights then bias."""
        mean = torch.cat((self.head.weight.flatten(), self.head.bias.flatten()))
        std_w, std_b = self.head_std()
        return mean, torch.cat((std_w.flatten(), std_b.flatten()))

    @torch.no_grad()
    def set_head_posterior(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        """Overwrite the last-layer posterior from flat vectors in the layout of :meth:`head_posterior`."""
        split = self.head.weight.numel()
        self.head.weight.copy_(mean[:split].view_as(self.head.weight))
        self.head.bias.copy_(mean[split:].view_as(self.head.bias))
        raw = torch.log(torch.expm1(std.clamp_min(1e-12)))  # inverse softplus
        self.head_rho_weight.copy_(raw[:split].view_as(self.head_rho_weight))
        self.head_rho_bias.copy_(raw[split:].view_as(self.head_rho_bias))


class TanhGaussianActor(nn.Module):
    """The SAC policy: a Gaussian in pre-activation space squashed by tanh into [-1, 1]^act_dim.

    Args:
        obs_dim: Observation size.
        act_dim: Action size.
        hidden: Width of the two hidden layers.
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: int = 128) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.mean_log_std = nn.Linear(hidden, 2 * act_dim)

    def distribution(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and log-std of the pre-tanh Gaussian."""
        mean, log_std = self.mean_log_std(self.body(obs)).chunk(2, dim=-1)
        return mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """The deterministic action tanh(mean), in [-1, 1]."""
        return torch.tanh(self.distribution(obs)[0])

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised action in [-1, 1] and its log-density, shapes (B, act_dim) and (B,)."""
        mean, log_std = self.distribution(obs)
        noise = torch.randn_like(mean)
        pre_tanh = mean + log_std.exp() * noise
        # log N(u; mean, std) - log|d tanh(u)/du|, with log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)).
        log_prob = -0.5 * noise.square() - log_std - 0.5 * math.log(2.0 * math.pi)
        log_prob = log_prob - 2.0 * (math.log(2.0) - pre_tanh - F.softplus(-2.0 * pre_tanh))
        return torch.tanh(pre_tanh), log_prob.sum(-1)
