"""NegLabel/CSP mining: the lexname filter, the percentile rule, contamination, and WordNet's install hint."""

from types import SimpleNamespace

import numpy as np
import pytest

from zoo._errors import ZooError
from zoo.renyi_neglabel_ood.mining import (
    EXCLUDED_LEXNAMES,
    candidate_scores,
    contaminate,
    filter_lexnames,
    mine_negatives,
)


def _synset(lexname):
    return SimpleNamespace(lexname=lambda: lexname)


def test_filter_drops_the_excluded_lexnames():
    lexnames = ["noun.artifact", "noun.person", "noun.quantity", "noun.group", "noun.animal", "adj.pert", "adj.all"]
    kept = [s.lexname() for s in filter_lexnames([_synset(n) for n in lexnames])]
    assert kept == ["noun.artifact", "noun.animal", "adj.all"]
    assert set(EXCLUDED_LEXNAMES) == {"noun.person", "noun.quantity", "noun.group", "adj.pert"}


@pytest.mark.slow
def test_wordnet_candidates_hold_no_excluded_lexname():
    from zoo.renyi_neglabel_ood.sources import load_wordnet, wordnet_candidates

    nouns, adjectives = wordnet_candidates(n_nouns=300, n_adjs=100, seed=3)
    wn = load_wordnet()
    for words, pos in ((nouns, "n"), (adjectives, "a")):
        for word in words:
            first = [
                s for s in wn.synsets(word.replace(" ", "_"), pos) if s.lemmas()[0].name() == word.replace(" ", "_")
            ]
            assert any(s.lexname() not in EXCLUDED_LEXNAMES for s in first), word


def test_candidate_scores_follow_the_95th_percentile_and_the_synonym_rule():
    id_labels = np.eye(4)[:3]  # three ID labels along the first three axes
    candidates = np.array([[1.0, 0, 0, 0], [0, 0, 0, 1.0], [0.6, 0.8, 0, 0]])
    scores = candidate_scores(candidates, id_labels)
    assert scores[0] == 1.0  # an ID synonym (max similarity > 0.95)
    assert scores[1] == pytest.approx(0.0)
    assert scores[2] == pytest.approx(np.percentile([0.6, 0.8, 0.0], 95))
    assert mine_negatives(candidates, id_labels, 1 / 3).tolist() == [1]


def test_contamination_replaces_the_stated_share():
    bank, pool = np.zeros((100, 3)), np.ones((7, 3))
    out, rows = contaminate(bank, pool, 0.1, np.random.default_rng(0))
    assert len(rows) == 10 and (out[rows] == 1).all() and out.sum() == 30
    with pytest.raises(ZooError, match="fraction"):
        mine_negatives(pool, pool, 0.0)
    with pytest.raises(ZooError, match="no candidate"):
        mine_negatives(pool[:0], pool, 0.5)


def test_missing_wordnet_says_how_to_install_it(monkeypatch, tmp_path):
    import zoo.common.wordnet as common_wordnet
    from zoo.renyi_neglabel_ood import sources

    monkeypatch.setattr(common_wordnet, "DEBIAN_WORDNET", tmp_path / "absent")
    monkeypatch.setattr(common_wordnet.prepare, "__defaults__", (tmp_path / "absent", None))
    common_wordnet.wordnet.cache_clear()
    try:
        with pytest.raises(ZooError, match="wordnet-base") as error:
            sources.load_wordnet()
        assert "lexnames" in str(error.value)
    finally:
        common_wordnet.wordnet.cache_clear()
