"""The paper's claims on SOCRATES-mini (slow: builds the dataset if it is not cached, then the full protocol)."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_aporia_claims_on_socrates_mini():
    from zoo.aporia.evaluate import evaluate

    result = evaluate("aporia.socrates_mini")
    arms = result["arms"]
    assert set(arms) >= {"aporia_lp", "centroid", "logreg", "knn"}
    for arm in ("aporia_lp", "centroid", "logreg", "knn"):
        assert {"f1_at_10_labels", "f1_at_20_labels", "f1_at_40_labels", "tightness_gap", "tightness_p_value"} <= set(
            arms[arm]
        )
    assert arms["aporia_lp"]["f1_at_40_labels"] >= 0.90  # few-label detection
    assert arms["aporia_lp"]["tightness_gap"] > 0 and arms["aporia_lp"]["tightness_p_value"] < 0.01  # geometry
    assert arms["aporia_lp"]["tightness_frac_pairs"] >= 0.70
