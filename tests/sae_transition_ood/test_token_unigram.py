"""``reference_token_unigram``'s math against hand-computed values, its input errors, and the per-pair claim."""

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest

from zoo.sae_transition_ood.token_unigram import text_scores, unigram_nll

METRICS = Path(__file__).parents[2] / "hub_cards" / "sae_transition_ood.docstrings" / "metrics.json"


def test_lidstone_unigram_by_hand():
    # counts [1, 2, 0] over N = 3 pieces, vocabulary 3, alpha 1: p = [2/6, 3/6, 1/6]
    table = unigram_nll([[0, 1], [1]], vocab=3, alpha=1.0)
    np.testing.assert_allclose(table, [math.log(3), math.log(2), math.log(6)])
    scores = text_scores([[0, 2], [1, 1, 1]], table)
    np.testing.assert_allclose(scores, [(math.log(3) + math.log(6)) / 2, math.log(2)])


def test_small_alpha_makes_unseen_pieces_dominate():
    table = unigram_nll([[0, 0, 1]], vocab=4, alpha=1e-6)
    # p(unseen) = 1e-6 / (3 + 4e-6)
    assert table[3] == pytest.approx(-math.log(1e-6 / (3 + 4e-6)))
    seen, unseen = text_scores([[0, 1], [0, 3]], table)
    assert unseen > seen + 5  # (0.41 + 14.9) / 2 against (0.41 + 1.10) / 2


@pytest.mark.parametrize(
    ("train", "alpha", "message"),
    [([[0, 1]], 0.0, "alpha"), ([[0, 5]], 1.0, "token ids"), ([[-1]], 1.0, "token ids")],
)
def test_bad_input(train, alpha, message):
    with pytest.raises(ValueError, match=message):
        unigram_nll(train, vocab=3, alpha=alpha)


def test_empty_text_is_an_error():
    with pytest.raises(ValueError, match="at least one token"):
        text_scores([[0], []], np.zeros(3))


def test_no_pair_claim_fails_on_one_pair_and_holds_above():
    from zoo.sae_transition_ood.evaluate import PAIRS, claims

    result = json.loads(METRICS.read_text())
    lifted = copy.deepcopy(result)
    for i, o in PAIRS:
        lifted["arms"]["transition"][f"auroc_{i}_vs_{o}"] = 0.9
    holds = {c.id: c.holds for c in claims(lifted)}
    assert holds["transition_no_pair_below_055"]
    lifted["arms"]["transition"]["auroc_wikipedia_vs_lee"] = 0.54
    claim = {c.id: c for c in claims(lifted)}["transition_no_pair_below_055"]
    assert not claim.holds and "wikipedia vs lee" in claim.text
    assert "transition_beats_reference_token_unigram_auroc_mean" in holds
