"""Bound validity on a synthetic AR(1) chain whose mixing is known (no RL involved).

A one-step predictor ``x_{t+1} ~ w x_t`` with loss ``min(1, (x_{t+1} - w x_t)^2)`` is certified on
``n`` consecutive transitions of a stationary AR(1) chain; the true risk is exact, because under the
stationary law the residual is Gaussian. Repeating this many times measures how often each bound
covers the truth: the Markov-aware bound should cover in at least 1 - delta of the repeats for every
phi, while the i.i.d. bound under-covers once the chain mixes slowly (phi close to 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from zoo.pbsac.bound import expected_clipped_square, gaussian_kl, iid_pac_bayes_bound, markov_pac_bayes_bound
from zoo.pbsac.mixing import ar1_autocorrelation_time, ar1_chains, estimate_mixing_time


@dataclass(frozen=True)
class CoverageResult:
    """Coverage of the true risk over repeated chains.

    Args:
        phi: AR(1) coefficient.
        n: Transitions per chain.
        repeats: Number of independent chains.
        posterior: ``"fixed"`` (w = phi / 2, KL = 0) or ``"fit"`` (Gaussian around least squares).
        t_mix: ``"true"`` (tau_int of the chain, (1 + phi) / (1 - phi)) or ``"estimated"`` (per chain).
        markov_coverage: Fraction of repeats where the Markov-aware bound >= true risk.
        iid_coverage: Same for the i.i.d. bound.
        markov_mean: Mean certificate of the Markov-aware bound.
        iid_mean: Mean certificate of the i.i.d. bound.
        true_risk_mean: Mean of the true posterior risk over repeats.
        empirical_std: Standard deviation of the empirical risk over repeats.
    """

    phi: float
    n: int
    repeats: int
    posterior: str
    t_mix: str
    markov_coverage: float
    iid_coverage: float
    markov_mean: float
    iid_mean: float
    true_risk_mean: float
    empirical_std: float


def stationary_risk(w: np.ndarray | float, phi: float) -> np.ndarray:
    """Exact risk ``E min(1, (x' - w x)^2)`` under the stationary AR(1) law.

    The residual x' - w x is N(0, (phi - w)^2 + 1 - phi^2) there, so the risk is closed-form.
    """
    var = torch.as_tensor((phi - np.asarray(w, dtype=np.float64)) ** 2 + 1.0 - phi**2)
    return expected_clipped_square(torch.zeros_like(var), var, 1.0).numpy()


def ar1_coverage(
    phi: float,
    n: int,
    repeats: int = 200,
    posterior: str = "fixed",
    t_mix: str = "true",
    delta: float = 0.05,
    posterior_std: float = 0.05,
    prior_std: float = 1.0,
    seed: int = 0,
) -> CoverageResult:
    """Certify the AR(1) one-step predictor on ``repeats`` independent chains and count coverage.

    Args:
        phi: AR(1) coefficient in (-1, 1).
        n: Transitions per chain.
        repeats: Number of chains.
        posterior: ``"fixed"``: the point hypothesis w = phi / 2 (prior = posterior, KL = 0), isolating the
            concentration term. ``"fit"``: rho = N(w_ls, posterior_std^2) around the chain's least-squares
            coefficient, with the data-free prior N(0, prior_std^2).
        t_mix: ``"true"`` uses (1 + phi) / (1 - phi); ``"estimated"`` the tau_int of each chain's loss series.
        delta: Confidence parameter.
        posterior_std: Standard deviation of the fitted posterior.
        prior_std: Standard deviation of the data-free prior.
        seed: Seed of the chains.
    """
    if posterior not in ("fixed", "fit") or t_mix not in ("true", "estimated"):
        raise ValueError(
            f"posterior must be 'fixed' or 'fit' and t_mix 'true' or 'estimated'; got {posterior!r}, {t_mix!r}"
        )
    x = ar1_chains(phi, n + 1, repeats, seed=seed)
    inputs, targets = torch.from_numpy(x[:, :-1]), torch.from_numpy(x[:, 1:])
    if posterior == "fixed":
        w_mean = np.full(repeats, 0.5 * phi)
        w_std = np.zeros(repeats)
        kls = np.zeros(repeats)
    else:
        w_mean = (inputs * targets).sum(1).numpy() / (inputs**2).sum(1).numpy()
        w_std = np.full(repeats, posterior_std)
        kls = np.array(
            [
                float(gaussian_kl(torch.tensor([m]), torch.tensor([posterior_std]), torch.zeros(1), prior_std))
                for m in w_mean
            ]
        )
    # Under rho the residual x' - w x is N(x' - mean_w x, std_w^2 x^2): E_rho of the loss is exact.
    residual_mean = targets - torch.from_numpy(w_mean)[:, None] * inputs
    residual_var = (torch.from_numpy(w_std)[:, None] * inputs) ** 2
    losses = expected_clipped_square(residual_mean, residual_var, 1.0).numpy()
    empirical = losses.mean(1)
    # True E_rho L: Gauss-Hermite quadrature of the exact stationary risk over w ~ rho.
    nodes, weights = np.polynomial.hermite_e.hermegauss(41)
    weights = weights / weights.sum()
    true_risk = (stationary_risk(w_mean[:, None] + w_std[:, None] * nodes[None], phi) * weights).sum(1)
    markov, iid = [], []
    for i in range(repeats):
        tau = ar1_autocorrelation_time(phi) if t_mix == "true" else estimate_mixing_time(losses[i])
        markov.append(markov_pac_bayes_bound(empirical[i], kls[i], n, tau, delta).value)
        iid.append(iid_pac_bayes_bound(empirical[i], kls[i], n, delta).value)
    markov, iid = np.array(markov), np.array(iid)
    return CoverageResult(
        phi=phi,
        n=n,
        repeats=repeats,
        posterior=posterior,
        t_mix=t_mix,
        markov_coverage=float((markov >= true_risk).mean()),
        iid_coverage=float((iid >= true_risk).mean()),
        markov_mean=float(markov.mean()),
        iid_mean=float(iid.mean()),
        true_risk_mean=float(true_risk.mean()),
        empirical_std=float(empirical.std()),
    )
