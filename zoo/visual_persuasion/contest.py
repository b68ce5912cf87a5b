"""The contest of CVPO: 3 judge prompts x 2 presentation orders, order consistency, majority, tie-break.

A judge (prompt) counts only if it picks the same image in both orders. The winner is the majority of the
consistent votes and its score is (votes for it) / (consistent judges). No consistent judge, or an even split,
is a random tie-break with score 0.5. ``require_consistency=False`` is the ablation that counts all 2P answers as
votes regardless of order (an even split again a tie-break).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from zoo.visual_persuasion.judge import ANSWERS, Judge


@dataclass
class ContestResult:
    """One contest between images ``a`` (index 0) and ``b`` (index 1).

    Attributes:
        winner: 0 if ``a`` won, 1 if ``b`` won.
        score: The winner's share of the counted votes (0.5 on a tie-break).
        consistent_judges: Judges whose choice agreed across both orders.
        votes: Per judge, the image it chose consistently (0 or 1), or None if it was inconsistent.
        tie_break: Whether the winner was drawn at random.
        calls: Every call as ``(a_first, prompt, chose_first)``: for revealed-preference logging.
    """

    winner: int
    score: float
    consistent_judges: int
    votes: list[int | None]
    tie_break: bool
    calls: list[tuple[bool, int, bool]] = field(default_factory=list)

    def score_of(self, index: int) -> float:
        """The score from the point of view of image ``index`` (its vote share)."""
        return self.score if index == self.winner else 1.0 - self.score


def _parse(answer) -> bool:
    if answer not in ANSWERS:
        raise ValueError(f"a judge must answer 'first' or 'second', got {answer!r}")
    return answer == "first"


def contest(
    judge: Judge,
    a: np.ndarray,
    b: np.ndarray,
    rng: np.random.Generator,
    require_consistency: bool = True,
    nonce: int = 0,
) -> ContestResult:
    """Run one contest between ``a`` and ``b``: every judge prompt in both orders.

    Args:
        judge: Answers ``"first"`` / ``"second"``.
        a: First image of the pair (shown first in the first order).
        b: Second image.
        rng: Draws tie-breaks.
        require_consistency: Count a judge only if it is order-consistent (the paper); False counts every answer.
        nonce: Passed to the judge (repeated trials of the same pair).
    """
    votes: list[int | None] = []
    calls = []
    raw_votes = []
    for prompt in range(judge.num_prompts):
        ab_first = _parse(judge.answer(a, b, prompt, nonce))  # a shown first
        ba_first = _parse(judge.answer(b, a, prompt, nonce))  # b shown first
        calls += [(True, prompt, ab_first), (False, prompt, ba_first)]
        choice_ab = 0 if ab_first else 1
        choice_ba = 1 if ba_first else 0
        raw_votes += [choice_ab, choice_ba]
        votes.append(choice_ab if choice_ab == choice_ba else None)
    counted = [v for v in votes if v is not None] if require_consistency else raw_votes
    consistent = sum(v is not None for v in votes)
    for_b = sum(counted)
    for_a = len(counted) - for_b
    if not counted or for_a == for_b:
        return ContestResult(int(rng.integers(2)), 0.5, consistent, votes, True, calls)
    winner = 0 if for_a > for_b else 1
    return ContestResult(winner, max(for_a, for_b) / len(counted), consistent, votes, False, calls)
