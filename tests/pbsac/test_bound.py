"""The Markov-aware PAC-Bayes bound, its parts, and its validity on a synthetic AR(1) chain."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from zoo.pbsac.bound import (
    complexity_surrogate,
    expected_clipped_square,
    gaussian_kl,
    iid_pac_bayes_bound,
    lambda_grid,
    markov_pac_bayes_bound,
    pac_bayes_bound,
    union_prior_bound,
)
from zoo.pbsac.synthetic import ar1_coverage, stationary_risk


def test_gaussian_kl_matches_monte_carlo():
    generator = torch.Generator().manual_seed(0)
    mean_q, std_q = torch.tensor([0.3, -1.0, 2.0]), torch.tensor([0.5, 1.5, 0.2])
    mean_p, std_p = torch.tensor([0.0, -0.5, 1.0]), torch.tensor([1.0, 1.0, 0.4])
    samples = mean_q + std_q * torch.randn(400_000, 3, generator=generator, dtype=torch.float64).float()
    log_q = torch.distributions.Normal(mean_q, std_q).log_prob(samples).sum(-1)
    log_p = torch.distributions.Normal(mean_p, std_p).log_prob(samples).sum(-1)
    monte_carlo = float((log_q - log_p).mean())
    assert float(gaussian_kl(mean_q, std_q, mean_p, std_p)) == pytest.approx(monte_carlo, abs=0.02)
    assert float(gaussian_kl(mean_q, std_q, mean_q, std_q)) == pytest.approx(0.0, abs=1e-6)


def test_expected_clipped_square_matches_monte_carlo_and_stays_in_unit_interval():
    generator = torch.Generator().manual_seed(1)
    mean = torch.tensor([0.0, 0.5, 1.5, -3.0, 0.2, 40.0], dtype=torch.float64)
    var = torch.tensor([0.3, 1.0, 0.01, 2.0, 0.0, 1e-4], dtype=torch.float64)
    draws = mean + var.sqrt() * torch.randn(500_000, 6, generator=generator, dtype=torch.float64)
    monte_carlo = (draws.square() / 2.0).clamp(max=1.0).mean(0)
    closed = expected_clipped_square(mean, var, 2.0)
    assert torch.allclose(closed, monte_carlo, atol=3e-3)
    assert float(closed[4]) == pytest.approx(0.2**2 / 2.0)  # var = 0: min(1, mean^2 / M)
    extreme = expected_clipped_square(torch.randn(1000) * 100, torch.rand(1000) * 1e4, 0.5)
    assert bool(((extreme >= 0) & (extreme <= 1)).all())


def test_grid_bound_by_hand():
    n, kl, risk, concentration, delta, grid = 1000, 3.0, 0.2, 45.0, 0.05, 20
    lams = math.sqrt(8 * n / concentration) * 10 ** np.linspace(0, 3, grid)
    by_hand = risk + min((kl + math.log(grid / delta)) / lam + lam * concentration / (8 * n) for lam in lams)
    result = pac_bayes_bound(risk, kl, n, concentration, delta, grid)
    assert result.value == pytest.approx(by_hand, rel=1e-12)
    assert min(abs(result.lam - lam) for lam in lams) < 1e-9 * result.lam
    # The grid never beats the continuous optimum and, with this spacing, stays within 2% of it.
    optimum = float(complexity_surrogate(torch.tensor(kl), n, concentration, delta, grid))
    assert optimum <= result.complexity <= 1.02 * optimum
    assert torch.allclose(lambda_grid(n, concentration, grid), torch.tensor(lams, dtype=torch.float64))


def test_markov_bound_is_iid_bound_with_effective_sample_size():
    markov = markov_pac_bayes_bound(0.1, 5.0, 20_000, t_mix=4.0)
    assert markov.concentration == 36.0
    iid_at_effective_n = iid_pac_bayes_bound(0.1, 5.0, 20_000 // 36)
    assert markov.complexity == pytest.approx(iid_at_effective_n.complexity, rel=1e-3)
    assert iid_pac_bayes_bound(0.1, 5.0, 20_000).value < markov.value


def test_bound_decreases_in_n_and_increases_in_kl_and_t_mix():
    values = [markov_pac_bayes_bound(0.1, 10.0, n, 5.0).value for n in (100, 1000, 10_000, 100_000, 1_000_000)]
    assert all(a > b for a, b in zip(values, values[1:]))
    assert markov_pac_bayes_bound(0.1, 100.0, 1000, 5.0).value > markov_pac_bayes_bound(0.1, 10.0, 1000, 5.0).value
    assert markov_pac_bayes_bound(0.1, 10.0, 1000, 50.0).value > markov_pac_bayes_bound(0.1, 10.0, 1000, 5.0).value


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"empirical_risk": 1.5}, "loss in \\[0, 1\\]"),
        ({"kl": -1.0}, "KL must be"),
        ({"n": 0}, "n must be"),
        ({"delta": 1.0}, "delta must"),
        ({"t_mix": 0.5}, "t_mix must be >= 1"),
    ],
)
def test_bad_inputs_raise_clear_errors(kwargs, message):
    args = {"empirical_risk": 0.1, "kl": 1.0, "n": 100, "t_mix": 2.0, "delta": 0.05, **kwargs}
    with pytest.raises(ValueError, match=message):
        markov_pac_bayes_bound(**args)


def test_stationary_risk_matches_simulation():
    rng = np.random.default_rng(0)
    phi, w = 0.9, 0.45
    x = rng.standard_normal(400_000)
    x_next = phi * x + math.sqrt(1 - phi**2) * rng.standard_normal(400_000)
    simulated = np.minimum(1.0, (x_next - w * x) ** 2).mean()
    assert float(stationary_risk(w, phi)) == pytest.approx(simulated, abs=3e-3)


# The acceptance test: 200 repeats, delta = 0.05; the Markov bound covers the true risk in >= 95%
# of them for every phi, and the i.i.d. bound under-covers once the chain mixes slowly.
@pytest.mark.parametrize("phi, n", [(0.0, 2000), (0.9, 2000), (0.99, 20_000)])
@pytest.mark.parametrize("posterior", ["fixed", "fit"])
def test_markov_bound_covers_ar1_true_risk(phi, n, posterior):
    result = ar1_coverage(phi, n, repeats=200, posterior=posterior, t_mix="true", seed=1)
    assert result.markov_coverage >= 0.95, result


def test_iid_bound_under_covers_slowly_mixing_chain():
    result = ar1_coverage(0.99, 20_000, repeats=200, posterior="fixed", t_mix="true", seed=2)
    assert result.markov_coverage >= 0.95, result
    assert result.iid_coverage < 0.90, result
    # Fast mixing: both cover, the i.i.d. bound is then the tighter one.
    fast = ar1_coverage(0.0, 2000, repeats=200, posterior="fixed", t_mix="true", seed=2)
    assert fast.iid_coverage >= 0.95 and fast.iid_mean < fast.markov_mean, fast


def test_markov_bound_with_estimated_mixing_time_covers():
    """What the RL certificates do: t_mix estimated from the loss series itself, per chain."""
    result = ar1_coverage(0.99, 20_000, repeats=200, posterior="fixed", t_mix="estimated", seed=3)
    assert result.markov_coverage >= 0.95, result
    assert result.markov_mean < 1.0, result  # and still informative


def test_gaussian_kl_matches_torch_distributions():
    generator = torch.Generator().manual_seed(4)
    mean_q, mean_p = torch.randn(258, generator=generator), torch.randn(258, generator=generator)
    std_q, std_p = torch.rand(258, generator=generator) + 0.01, torch.rand(258, generator=generator) + 0.01
    reference = torch.distributions.kl_divergence(
        torch.distributions.Normal(mean_q, std_q), torch.distributions.Normal(mean_p, std_p)
    ).sum()
    assert float(gaussian_kl(mean_q, std_q, mean_p, std_p)) == pytest.approx(float(reference), rel=1e-5)
    from zoo.pbsac.certificate import _kl  # the certificate's float64 KL

    assert _kl(mean_q, std_q, mean_p, std_p) == pytest.approx(float(reference), rel=1e-5)


def test_block_bound_equals_hand_computation_on_ar1_chains():
    """The certificate's bound (episodes as independent blocks) on T independent AR(1) chains, by hand."""
    from zoo.pbsac.certificate import episode_means
    from zoo.pbsac.mixing import ar1_chains

    lengths = torch.tensor([120, 80, 100, 100, 60] * 8)  # T = 40 blocks of varying length
    x = [ar1_chains(0.9, int(h) + 1, 1, seed=i)[0] for i, h in enumerate(lengths)]
    losses = np.concatenate([np.minimum(1.0, (c[1:] - 0.45 * c[:-1]) ** 2) for c in x])
    kl, delta, grid = 2.5, 0.05, 20
    blocks = episode_means(torch.from_numpy(losses), lengths)
    bound = pac_bayes_bound(float(blocks.mean()), kl, len(lengths), 1.0, delta, grid)
    starts = np.concatenate([[0], np.cumsum(lengths.numpy())[:-1]])
    by_hand_risk = np.mean([losses[s : s + h].mean() for s, h in zip(starts, lengths.numpy())])
    lams = [math.sqrt(8 * 40) * 10 ** (3 * j / 19) for j in range(grid)]
    by_hand = by_hand_risk + min((kl + math.log(grid / delta)) / lam + lam / (8 * 40) for lam in lams)
    assert bound.value == pytest.approx(by_hand, rel=1e-10)
    # Per-transition i.i.d. bound on the same losses: n = 4000 instead of 40, a tenth of the margin.
    iid = iid_pac_bayes_bound(float(losses.mean()), kl, len(losses), delta, grid)
    assert iid.complexity < 0.11 * bound.complexity


def test_block_bound_covers_ar1_risk_where_the_iid_bound_does_not():
    """Blocks of a slowly mixing AR(1) chain: the block bound covers the exact risk, the i.i.d. one under-covers."""
    from zoo.pbsac.mixing import ar1_chains

    phi, blocks, length, repeats = 0.99, 40, 500, 200
    truth = float(stationary_risk(0.5 * phi, phi))
    covered, iid_covered = 0, 0
    for r in range(repeats):
        x = ar1_chains(phi, length + 1, blocks, seed=1000 + r)
        losses = np.minimum(1.0, (x[:, 1:] - 0.5 * phi * x[:, :-1]) ** 2)
        covered += pac_bayes_bound(float(losses.mean(1).mean()), 0.0, blocks, 1.0).value >= truth
        iid_covered += iid_pac_bayes_bound(float(losses.mean()), 0.0, losses.size).value >= truth
    assert covered / repeats >= 0.95 and iid_covered / repeats < 0.9, (covered, iid_covered)


def test_union_over_prior_widths_equals_hand_computation():
    """The certificate over a grid of K prior widths: min_k of the grid bound with ln(G K / delta), by hand."""
    risks, kls, n, delta, grid = [0.078, 0.031, 0.015, 0.012], [0.46, 0.8, 1.9, 0.3], 200, 0.05, 20
    lams = [math.sqrt(8 * n) * 10 ** (3 * j / 19) for j in range(grid)]
    per_prior = [
        r + min((k + math.log(grid * 4 / delta)) / lam + lam / (8 * n) for lam in lams) for r, k in zip(risks, kls)
    ]
    best, index, results = union_prior_bound(risks, kls, n, 1.0, delta, grid)
    assert best.value == pytest.approx(min(per_prior), rel=1e-12) and index == int(np.argmin(per_prior)) == 3
    assert [r.value for r in results] == pytest.approx(per_prior, rel=1e-12)
    assert best.delta == pytest.approx(delta / 4)
    # Never below the best single-prior bound without the ln K correction, never above it plus ln K / lambda_min.
    single = min(pac_bayes_bound(r, k, n, 1.0, delta, grid).value for r, k in zip(risks, kls))
    assert single < best.value <= single + math.log(4) / lams[0]
    # One prior: exactly the single-prior bound.
    assert union_prior_bound(risks[:1], kls[:1], n, 1.0, delta, grid)[0] == pac_bayes_bound(risks[0], kls[0], n, 1.0)


@pytest.mark.parametrize("seed", range(20))
def test_union_bound_is_never_below_best_single_prior_bound(seed):
    generator = np.random.default_rng(seed)
    k = int(generator.integers(1, 8))
    risks, kls = generator.uniform(0, 1, k).tolist(), generator.exponential(5.0, k).tolist()
    n = int(generator.integers(10, 5000))
    best, index, results = union_prior_bound(risks, kls, n, 1.0)
    singles = [pac_bayes_bound(r, kl, n, 1.0) for r, kl in zip(risks, kls)]
    assert best.value >= min(s.value for s in singles) - 1e-12
    assert best.value == min(r.value for r in results) and results[index] is best
    assert all(r.value >= s.value - 1e-12 for r, s in zip(results, singles))  # prior by prior, too


def test_union_bound_rejects_mismatched_inputs():
    with pytest.raises(ValueError, match="one KL per empirical risk"):
        union_prior_bound([0.1, 0.2], [0.0], 100, 1.0)
    with pytest.raises(ValueError, match="at least one prior"):
        union_prior_bound([], [], 100, 1.0)
