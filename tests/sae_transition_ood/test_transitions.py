"""The depth-wise Markov model: counts, smoothing, NLL score and the surprising-transition report."""

import numpy as np
import pytest

from zoo.sae_transition_ood.transitions import (
    surprising_transitions,
    text_scores,
    token_transition_nll,
    token_unigram_nll,
    transition_counts,
    transition_nll_table,
    unigram_counts,
    unigram_nll_table,
)


def test_counts_by_hand():
    # two tokens, 3 layers, K = 2, F = 4
    indices = np.array([[[0, 1], [2, 3], [0, 2]], [[0, 3], [2, 1], [1, 1]]])
    counts = transition_counts(indices, 4)
    expected = np.zeros((2, 4, 4))
    for token in indices:
        for layer in range(2):
            for i in token[layer]:
                for j in token[layer + 1]:
                    expected[layer, i, j] += 1
    np.testing.assert_array_equal(counts, expected)
    assert counts[0, 0, 2] == 2  # feature 0 -> 2 in both tokens


def test_nll_by_hand():
    counts = np.zeros((1, 3, 3))
    counts[0, 0] = [3, 1, 0]
    table = transition_nll_table(counts, alpha=0.5)
    # P(j | 0) = (C + 0.5) / (4 + 1.5)
    np.testing.assert_allclose(np.exp(-table[0, 0]), [3.5 / 5.5, 1.5 / 5.5, 0.5 / 5.5], rtol=1e-6)
    np.testing.assert_allclose(np.exp(-table[0, 1]), [1 / 3] * 3, rtol=1e-6)  # unseen row: uniform
    token = np.array([[[0], [1]]])
    assert token_transition_nll(token, table)[0] == pytest.approx(-np.log(1.5 / 5.5), rel=1e-6)


def test_markov_estimator_recovers_known_matrix():
    rng = np.random.default_rng(0)
    features, samples = 8, 100_000
    truth = rng.dirichlet(np.ones(features), size=features)
    start = rng.integers(0, features, samples)
    nxt = (truth[start].cumsum(1) > rng.random((samples, 1))).argmax(1)
    counts = transition_counts(np.stack([start, nxt], 1)[:, :, None], features)
    estimate = np.exp(-transition_nll_table(counts, alpha=1e-3)[0].astype(np.float64))
    kl = (truth * np.log(truth / estimate)).sum(1).mean()
    assert kl < 0.01
    assert np.allclose(estimate.sum(1), 1.0, atol=1e-5)


def test_score_is_invariant_to_token_order():
    rng = np.random.default_rng(1)
    counts = transition_counts(rng.integers(0, 16, (500, 4, 3)), 16)
    table = transition_nll_table(counts, 0.1)
    text = rng.integers(0, 16, (30, 4, 3))
    offsets = np.array([0, 30])
    forward = text_scores(token_transition_nll(text, table), offsets)
    shuffled = text_scores(token_transition_nll(text[rng.permutation(30)], table), offsets)
    assert forward[0] == pytest.approx(shuffled[0], rel=1e-12)


def test_smoothing_gives_finite_scores_for_unseen_pairs():
    counts = transition_counts(np.array([[[0], [0]]]), 5)
    table = transition_nll_table(counts, 0.01)
    unseen = np.array([[[3], [4]], [[0], [4]]])
    scores = token_transition_nll(unseen, table)
    assert np.isfinite(scores).all() and (scores > 0).all()
    assert scores[1] > token_transition_nll(np.array([[[0], [0]]]), table)[0]  # seen pair is less surprising


@pytest.mark.parametrize("alpha", [0.0, -1.0, float("nan")])
def test_alpha_must_be_positive(alpha):
    with pytest.raises(ValueError, match="alpha"):
        transition_nll_table(np.zeros((1, 2, 2)), alpha)


def test_unigram_by_hand():
    indices = np.array([[[0, 1]], [[0, 2]]])
    counts = unigram_counts(indices, 3)
    np.testing.assert_array_equal(counts, [[2, 1, 1]])
    table = unigram_nll_table(counts, 1.0)
    np.testing.assert_allclose(np.exp(-table[0]), [3 / 7, 2 / 7, 2 / 7], rtol=1e-6)
    assert token_unigram_nll(np.array([[[1, 2]]]), table)[0] == pytest.approx(-np.log(2 / 7), rel=1e-6)


def test_surprising_transitions_are_the_largest():
    counts = transition_counts(np.array([[[0], [1], [2]]] * 10), 4)
    table = transition_nll_table(counts, 0.1)
    text = np.array([[[0], [1], [2]], [[0], [3], [2]]])
    found = surprising_transitions(text, table, top=2)
    assert len(found) == 2 and found[0]["nll"] >= found[1]["nll"]
    assert found[0]["token"] == 1 and found[0]["layer"] == 0 and (found[0]["from"], found[0]["to"]) == (0, 3)


def test_bad_indices_raise():
    with pytest.raises(ValueError, match="layers"):
        token_transition_nll(np.zeros((2, 3, 1), dtype=int), np.zeros((1, 4, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="integer"):
        transition_counts(np.zeros((2, 2, 1)), 4)
