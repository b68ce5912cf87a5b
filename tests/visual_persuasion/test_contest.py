"""The contest rules: order consistency, majority, score, tie-break, and bad answers."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.visual_persuasion.contest import contest
from zoo.visual_persuasion.judge import ConstantJudge, Judge

A = np.zeros((8, 8, 3), dtype=np.uint8)
B = np.full((8, 8, 3), 200, dtype=np.uint8)


class ScriptedJudge(Judge):
    """Prompt p answers ``script[p](first_is_a)``."""

    def __init__(self, script):
        self.script = script
        self.num_prompts = len(script)

    def answer(self, first, second, prompt, nonce=0):
        return self.script[prompt](bool(first.max() == 0))


def prefers_a(first_is_a):
    return "first" if first_is_a else "second"


def prefers_b(first_is_a):
    return "second" if first_is_a else "first"


def always_first(first_is_a):
    return "first"


def test_majority_of_consistent_judges_wins_with_its_vote_share():
    result = contest(ScriptedJudge([prefers_a, prefers_a, prefers_b]), A, B, np.random.default_rng(0))
    assert (result.winner, result.score, result.consistent_judges, result.tie_break) == (0, 2 / 3, 3, False)
    assert result.votes == [0, 0, 1]
    assert result.score_of(1) == pytest.approx(1 / 3)


def test_an_order_inconsistent_judge_is_never_counted():
    # prompt 0 always says "first" (pure position bias): it must not vote; the two consistent judges prefer b
    result = contest(ScriptedJudge([always_first, prefers_b, prefers_b]), A, B, np.random.default_rng(0))
    assert result.votes == [None, 1, 1] and result.consistent_judges == 2
    assert (result.winner, result.score) == (1, 1.0)  # 2 of 2 consistent votes, not 4 of 6 answers
    counted_all = contest(ScriptedJudge([always_first, prefers_b, prefers_b]), A, B, np.random.default_rng(0),
                          require_consistency=False)  # fmt: skip
    assert counted_all.score == pytest.approx(5 / 6)  # the ablation counts every answer: 1 + 4 of 6 for b


def test_even_split_and_no_consistent_judge_are_random_tie_breaks():
    split = [contest(ScriptedJudge([prefers_a, prefers_b]), A, B, np.random.default_rng(s)) for s in range(40)]
    assert all(r.tie_break and r.score == 0.5 for r in split)
    assert 0 < sum(r.winner for r in split) < 40


def test_pure_position_bias_judge_has_no_consistent_judge_and_ties_at_random():
    judge = ConstantJudge(position_bias=2.0, temperature=0.2)
    rng = np.random.default_rng(0)
    images = [np.full((8, 8, 3), v, dtype=np.uint8) for v in range(0, 250, 5)]
    results = [contest(judge, a, b, rng) for a, b in zip(images[:-1], images[1:], strict=True)]
    assert all(r.consistent_judges == 0 and r.tie_break and r.score == 0.5 for r in results)
    winners = np.array([r.winner for r in results])
    assert 0.25 < winners.mean() < 0.75  # a fair coin over 49 contests


@pytest.mark.parametrize("bad", ["First", "a", "", None, 1])
def test_a_judge_answer_other_than_first_or_second_is_rejected(bad):
    with pytest.raises(ValueError, match="'first' or 'second'"):
        contest(ScriptedJudge([lambda first_is_a: bad]), A, B, np.random.default_rng(0))
