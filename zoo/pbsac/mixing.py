"""Mixing-time estimates from a trajectory, for the Markov-aware PAC-Bayes bound.

The bound in :mod:`zoo.pbsac.bound` needs the mixing time ``t_mix`` of the chain that produced the
sample. It cannot be computed from data; what can be estimated is the **integrated autocorrelation
time** of an observable (here the loss sequence), which for a reversible chain is a lower-order proxy
of the relaxation time. The estimate is a heuristic: a certificate that uses it is conditional on
``t_mix <= t_hat``. Any callable ``estimator(series) -> float`` with the signature of
:func:`estimate_mixing_time` can be passed where a better bound on ``t_mix`` is available.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: Signature of a mixing-time estimator: a loss series (T,) or independent chains (B, T) -> t_mix >= 1.
MixingTimeEstimator = Callable[[np.ndarray], float]


def autocovariance(chains: np.ndarray) -> np.ndarray:
    """Autocovariance function of one or several equally long chains, averaged over the chains.

    Every chain is centred at the pooled mean (not its own), which keeps slow between-chain
    fluctuations in the estimate and errs on the side of a longer autocorrelation time. The lag-k
    term is normalised by T (the biased, positive semi-definite estimator that Sokal uses).

    Args:
        chains: Array (T,) or (B, T): B independent chains of length T.

    Returns:
        Array (T,) of autocovariances at lags 0..T-1.
    """
    x = np.atleast_2d(np.asarray(chains, dtype=np.float64))
    if x.ndim != 2 or x.shape[1] < 2:
        raise ValueError(f"need chains of shape (T,) or (B, T) with T >= 2, got shape {np.shape(chains)}")
    length = x.shape[1]
    x = x - x.mean()
    size = 1 << (2 * length - 1).bit_length()  # zero-padding to >= 2T avoids circular wrap-around
    spectrum = np.fft.rfft(x, n=size, axis=1)
    acov = np.fft.irfft(spectrum * np.conj(spectrum), n=size, axis=1)[:, :length]
    return acov.mean(axis=0) / length


def integrated_autocorrelation_time(chains: np.ndarray, window_factor: float = 5.0) -> float:
    """Integrated autocorrelation time ``tau_int = 1 + 2 * sum_k rho_k`` with Sokal's automatic window.

    The sum runs to the smallest lag M with ``M >= window_factor * tau_int(M)``; that truncation trades
    the bias of a short window against the variance of a long one (Sokal 1997, "Monte Carlo methods in
    statistical mechanics"). For i.i.d. data tau_int = 1; for an AR(1) chain with coefficient phi it is
    (1 + phi) / (1 - phi).

    Args:
        chains: A series (T,) or B independent chains (B, T) of the same observable.
        window_factor: Sokal's c (5 is standard; larger is safer for slowly decaying correlations).

    Returns:
        tau_int (at least 0; 1 for a constant series, which carries no correlation to measure).
    """
    if window_factor <= 0:
        raise ValueError(f"window_factor must be positive, got {window_factor}")
    acov = autocovariance(chains)
    if acov[0] <= 0:
        return 1.0
    rho = acov / acov[0]
    taus = 2.0 * np.cumsum(rho) - 1.0  # taus[M] = 1 + 2 * sum_{k=1}^{M} rho_k
    lags = np.arange(len(taus))
    inside = lags >= window_factor * taus
    window = int(np.argmax(inside)) if inside.any() else len(taus) - 1
    return float(max(taus[window], 0.0))


def estimate_mixing_time(chains: np.ndarray, window_factor: float = 5.0) -> float:
    """The mixing-time proxy used by the certificates: ``max(1, tau_int)`` of the loss series.

    Args:
        chains: Loss series (T,) or independent chains (B, T) in trajectory order.
        window_factor: Sokal's window factor, see :func:`integrated_autocorrelation_time`.
    """
    return max(1.0, integrated_autocorrelation_time(chains, window_factor))


def ar1_autocorrelation_time(phi: float) -> float:
    """Exact tau_int of a stationary AR(1) chain ``x_{t+1} = phi x_t + noise``: (1 + phi) / (1 - phi)."""
    if not -1.0 < phi < 1.0:
        raise ValueError(f"an AR(1) chain is stationary only for |phi| < 1, got phi={phi}")
    return (1.0 + phi) / (1.0 - phi)


def ar1_chains(phi: float, length: int, num_chains: int = 1, seed: int | np.random.Generator = 0) -> np.ndarray:
    """Stationary AR(1) chains ``x_{t+1} = phi x_t + sqrt(1 - phi^2) eps_t`` with unit marginal variance.

    Args:
        phi: Autoregressive coefficient, |phi| < 1.
        length: Steps per chain.
        num_chains: Independent chains.
        seed: Seed or numpy Generator.

    Returns:
        Array (num_chains, length), each chain started from the stationary N(0, 1).
    """
    from scipy.signal import lfilter

    ar1_autocorrelation_time(phi)  # validates phi
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((num_chains, length)) * np.sqrt(1.0 - phi**2)
    noise[:, 0] = rng.standard_normal(num_chains)  # x_0 ~ N(0, 1): stationary from the start
    return lfilter([1.0], [1.0, -phi], noise, axis=1)
