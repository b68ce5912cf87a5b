"""The binary-tree mechanism: exact prefix sums without noise, noise scale and unbiasedness, nodes drawn once."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.resettable_sketch.tree import BinaryTreeCounter, allocate_tree, levels_for


def _tree(eps, levels=10, sensitivity=2.0, seed=0, initial=0.0):
    rng = np.random.default_rng(seed)
    tree = BinaryTreeCounter(allocate_tree(), eps)
    tree.start(initial, levels, sensitivity, rng)
    return tree, rng


def test_levels_cover_the_horizon():
    assert levels_for(1) == 1 and levels_for(3) == 2 and levels_for(4) == 3
    assert levels_for(65535) == 16 and levels_for(65536) == 17


@pytest.mark.parametrize("chunks", [[1] * 50, [7, 1, 16, 3, 23], [50], [2, 31, 17]])
def test_prefix_sums_are_exact_without_noise(chunks):
    increments = np.random.default_rng(1).normal(size=sum(chunks)).round(3)
    tree, rng = _tree(eps=None, levels=6, initial=5.0)
    start = 0
    for size in chunks:
        part = increments[start : start + size]
        if size == 1:
            tree.add_one(float(part[0]), rng)
        else:
            tree.add(part, rng)
        start += size
        assert tree.value() == pytest.approx(5.0 + increments[:start].sum(), abs=1e-9)


def test_noise_scale_and_unbiasedness():
    """Prefix noise at time t has mean 0 and variance popcount(t) * 2 b**2 with b = levels * sens / eps."""
    levels, sensitivity, eps, trials = 8, 3.6, 1.0, 3000
    t = 0b1011011  # 91: five nodes in the prefix
    values = []
    for seed in range(trials):
        tree, rng = _tree(eps, levels, sensitivity, seed)
        tree.state["tree_init"][...] = 0.0  # look at the tree nodes alone
        tree.add(np.full(t, 1.0), rng)
        values.append(tree.value() - t)
    b = levels * sensitivity / eps
    assert tree.noise_scale == pytest.approx(b)
    values = np.asarray(values)
    expected_var = bin(t).count("1") * 2 * b**2
    assert np.var(values) == pytest.approx(expected_var, rel=0.1)
    assert abs(values.mean()) < 4 * np.sqrt(expected_var / trials)


def test_per_step_path_has_the_same_noise_scale():
    levels, trials, t = 6, 3000, 0b101101
    values = []
    for seed in range(trials):
        tree, rng = _tree(1.0, levels, 2.0, seed)
        tree.state["tree_init"][...] = 0.0
        for _ in range(t):
            tree.add_one(0.0, rng)
        values.append(tree.value())
    assert np.var(values) == pytest.approx(bin(t).count("1") * 2 * (levels * 2.0) ** 2, rel=0.1)


def test_every_node_is_drawn_once_and_reused():
    tree, rng = _tree(1.0, levels=5)
    for _ in range(4):
        tree.add_one(0.0, rng)
    at_four = tree.value()  # init + the level-2 node [1, 4]
    assert tree.value() == at_four  # reading does not redraw
    tree.add_one(0.0, rng)
    leaf_five = tree.state["tree_noisy"][0]
    assert tree.value() == pytest.approx(at_four + leaf_five)  # the level-2 node is reused at t = 5
    tree.add_one(0.0, rng)  # t = 6 = [1, 4] + [5, 6]
    assert tree.value() == pytest.approx(at_four + tree.state["tree_noisy"][1])


def test_initial_value_is_published_once_with_laplace_noise():
    draws = []
    for seed in range(4000):
        tree, _ = _tree(2.0, levels=3, sensitivity=2.0, seed=seed, initial=100.0)
        draws.append(tree.value())
    assert np.mean(draws) == pytest.approx(100.0, abs=0.15)
    assert np.var(draws) == pytest.approx(2 * (2.0 / 2.0) ** 2, rel=0.1)


def test_bad_inputs():
    tree, rng = _tree(1.0, levels=3)
    with pytest.raises(ValueError, match="room for 7 steps"):
        tree.add(np.zeros(8), rng)
    with pytest.raises(ValueError, match="levels must be"):
        tree.start(0.0, 0, 2.0, rng)
