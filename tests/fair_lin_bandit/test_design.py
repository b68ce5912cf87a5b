"""G-optimal design: the Kiefer-Wolfowitz condition on the evaluation's instances and on subsets."""

import numpy as np
import pytest

from zoo.fair_lin_bandit.design import g_optimal_design, kiefer_wolfowitz_gap
from zoo.fair_lin_bandit.instances import DATASETS, build_instance


@pytest.mark.parametrize("name", DATASETS)
def test_design_satisfies_kiefer_wolfowitz(name):
    arms = build_instance(name, 0).arms
    weights = g_optimal_design(arms)
    assert weights.sum() == pytest.approx(1.0) and (weights >= 0).all()
    inverse = np.linalg.inv((arms * weights[:, None]).T @ arms)
    norms = np.einsum("ki,ij,kj->k", arms, inverse, arms)
    assert norms.max() <= 1.01 * arms.shape[1]
    assert norms.max() >= arms.shape[1] * (1 - 1e-9)  # Kiefer-Wolfowitz: no design goes below d


def test_uniform_design_does_not_satisfy_it():
    arms = build_instance("shuttle", 0).arms
    assert kiefer_wolfowitz_gap(arms, np.full(len(arms), 1 / len(arms))) > 1.01  # so the test above can fail


def test_masked_rank_deficient_active_sets():
    rng = np.random.default_rng(0)
    arms = np.stack([build_instance(name, 1).arms for name in ("phishing", "synthetic")])
    mask = rng.random(arms.shape[:2]) < 0.03  # a few arms: rank below d
    weights = g_optimal_design(arms, mask)
    assert (weights[~mask] == 0).all()
    assert (kiefer_wolfowitz_gap(arms, weights, mask) <= 1.01).all()


def test_orthonormal_arms_get_the_uniform_design():
    weights = g_optimal_design(np.eye(4))
    np.testing.assert_allclose(weights, 0.25, atol=1e-9)
