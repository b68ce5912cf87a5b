"""``transition_lr_other_id``: the likelihood ratio against a background transition model (issue 66)."""

import numpy as np
import pytest
import torch

from zoo.sae_transition_ood import arms as A
from zoo.sae_transition_ood.features import Features
from zoo.sae_transition_ood.sae import SAEStack
from zoo.sae_transition_ood.transitions import text_scores, token_transition_nll, transition_counts
from zoo.sae_transition_ood.transitions import transition_nll_table as table_of
from zoo.sae_transition_ood.tune import background_groups

LAYERS, WIDTH, F, K_SAE = 3, 8, 16, 4


def _features(texts_per_group: int = 6, tokens_per_text: int = 5) -> Features:
    rng = np.random.default_rng(0)
    names = ["a/train", "b/train", "a/test", "b/test"]
    n_texts = texts_per_group * len(names)
    offsets = np.arange(n_texts + 1) * tokens_per_text
    tokens = rng.normal(size=(offsets[-1], LAYERS, WIDTH)).astype(np.float16)
    tokens[offsets[texts_per_group] : offsets[2 * texts_per_group]] += 2.0  # "b" texts sit elsewhere
    groups = {name: (i * texts_per_group, (i + 1) * texts_per_group) for i, name in enumerate(names)}
    pooled = np.zeros((n_texts, LAYERS, WIDTH), np.float16)
    return Features(tokens, offsets, pooled, pooled, groups, np.array(["x"] * n_texts))


def _scorer(background=(("b", "train"),)) -> A.SAEScorer:
    torch.manual_seed(0)
    stack = SAEStack(LAYERS, WIDTH, F, K_SAE, tied=True).eval()
    return A.SAEScorer(_features(), stack, "a", [("a", "test"), ("b", "test")], K_SAE, 4, background)


def test_ratio_by_hand():
    scorer = _scorer()
    top, alpha, weight = 2, 0.5, 0.5
    got = scorer.transition_ratio(top, alpha, weight)
    id_table = table_of(transition_counts(scorer.indices[("a", "train")][:, :, :top], F), alpha)
    bg_table = table_of(transition_counts(scorer.indices[("b", "train")][:, :, :top], F), alpha)
    for group in scorer.groups:
        indices = scorer.indices[group][:, :, :top]
        nll = token_transition_nll(indices, id_table) - weight * token_transition_nll(indices, bg_table)
        np.testing.assert_allclose(got[group], text_scores(nll, scorer.offsets[group]), rtol=1e-6)


def test_weight_zero_is_the_method_and_own_background_cancels():
    scorer = _scorer()
    plain = scorer.transition(2, 0.1)
    ratio = scorer.transition_ratio(2, 0.1, 0.0)
    for group in scorer.groups:
        np.testing.assert_allclose(ratio[group], plain[group], rtol=1e-6)
    same = _scorer(background=(("a", "train"),)).transition_ratio(2, 0.1, 1.0)  # the ID model against itself
    for group in scorer.groups:
        np.testing.assert_allclose(same[group], 0.0, atol=1e-5)
        assert not np.allclose(plain[group], 0.0)


def test_bad_input():
    with pytest.raises(ValueError, match="background"):
        _scorer(background=()).transition_ratio(2, 0.1, 0.5)
    with pytest.raises(ValueError, match="weight"):
        _scorer().transition_ratio(2, 0.1, -1.0)


def test_background_is_the_other_id_train_splits():
    assert background_groups("docstrings") == [("countries", "train"), ("wikipedia", "train")]
    assert all(split == "train" for _, split in background_groups("wikipedia"))
