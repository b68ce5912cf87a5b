"""Instances: built as the spec says, reproducible, with headroom."""

import numpy as np
import pytest

from zoo.fair_lin_bandit.instances import (
    BEST_MEAN,
    DATASETS,
    DECOY_DATASETS,
    DECOYS,
    MEAN_FLOOR,
    build_instance,
    decoy_instance,
    export_instances,
)


@pytest.mark.parametrize("name", DATASETS + DECOY_DATASETS)
def test_instance_follows_the_recipe(name):
    instance = build_instance(name, 0)
    assert instance.arms.shape[0] == 200
    np.testing.assert_allclose(np.linalg.norm(instance.arms, axis=1), 1.0)
    assert (instance.theta >= 0).all()
    assert instance.best == pytest.approx(BEST_MEAN)
    np.testing.assert_allclose(instance.mu, np.maximum(instance.arms @ instance.theta, MEAN_FLOOR))
    assert instance.mu.min() >= MEAN_FLOOR
    # headroom: uniform's Nash regret (mu* - mean mu, the expectation is inside the mean) is >= 0.05
    assert instance.best - instance.mu.mean() >= 0.05


def test_seeds_give_different_but_reproducible_arm_samples():
    a, b, again = build_instance("yeast", 0), build_instance("yeast", 1), build_instance("yeast", 0)
    np.testing.assert_array_equal(a.arms, again.arms)
    assert not np.array_equal(a.arms, b.arms)


def test_export_round_trip(tmp_path):
    shapes = export_instances(tmp_path / "instances.npz", seeds=[0])
    loaded = np.load(tmp_path / "instances.npz")
    assert shapes["phishing_0_arms"] == (200, 10)
    np.testing.assert_allclose(loaded["phishing_0_mu"], build_instance("phishing", 0).mu, rtol=1e-6)


@pytest.mark.parametrize("name", DATASETS)
def test_decoy_instance_adds_floor_arms_along_new_directions(name):
    base, decoy = build_instance(name, 4), build_instance(name + "_decoy", 4)
    num_arms, dim = base.arms.shape
    assert decoy.arms.shape == (num_arms, dim + DECOYS) and decoy.name == name + "_decoy"
    np.testing.assert_array_equal(decoy.theta, np.concatenate([base.theta, np.full(DECOYS, MEAN_FLOOR)]))
    replaced = np.flatnonzero(np.abs(decoy.arms[:, dim:]).sum(axis=1) > 0)
    assert len(replaced) == DECOYS
    # each decoy is a new unit vector (nothing else has that coordinate), its mean exactly the floor
    np.testing.assert_array_equal(np.abs(decoy.arms[replaced]).sum(axis=1), 1.0)
    assert sorted(decoy.arms[replaced][:, dim:].argmax(axis=1).tolist()) == list(range(DECOYS))
    np.testing.assert_array_equal(decoy.arms[replaced][:, :dim], 0.0)
    np.testing.assert_allclose(decoy.arms @ decoy.theta, decoy.mu, atol=1e-15)  # exactly linear at the decoys too
    np.testing.assert_array_equal(decoy.mu[replaced], MEAN_FLOOR)
    # every other arm, the best one among them, keeps its features and mean
    others = np.setdiff1d(np.arange(num_arms), replaced)
    np.testing.assert_array_equal(decoy.arms[others, :dim], base.arms[others])
    np.testing.assert_allclose(decoy.mu[others], base.mu[others], rtol=1e-12)
    assert int(np.argmax(base.mu)) in others and decoy.best == base.best


def test_decoy_count_is_checked():
    base = build_instance("phishing", 0, num_arms=5)
    assert decoy_instance(base, decoys=4).arms.shape == (5, 10 + 4)
    for bad in (0, 5):
        with pytest.raises(ValueError, match="decoys must be"):
            decoy_instance(base, decoys=bad)
