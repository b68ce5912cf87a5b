"""The pieces the module, the evaluation and the tuning share: judges from heads, arms on items, head-to-head.

``ARMS`` maps an arm name to its optimiser; :func:`optimise_items` runs one arm on a set of items in lockstep and
returns the outcomes and the logged judge calls; :func:`head_to_head` plays optimised against original edits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zoo.visual_persuasion import optimise
from zoo.visual_persuasion.editor import ParametricEditor
from zoo.visual_persuasion.judge import CachedJudge, UtilityJudge

OPTIMISATION_HEADS = (0, 1, 2)
HELD_OUT_HEAD = 3
ARMS = (
    "original",
    "random_search",
    "vfd",
    "cvpo",
    "oracle_gradient",
    "cvpo_no_consistency",
    "cvpo_random_proposer",
    "reference_best_of_n",
)
ARM_CODES = {arm: i for i, arm in enumerate(ARMS)}


@dataclass
class ArmSettings:
    """The tunable constants of every arm (defaults: the spec's; the evaluation reads the tuned ones).

    Args:
        cvpo_step: CVPO proposer step (unit coordinates).
        cvpo_noise: CVPO proposer noise.
        cvpo_candidates: CVPO candidates per round.
        cvpo_learn: CVPO's proposer moves along the direction learned from the contest outcomes.
        cvpo_decay: Decay of that learned direction.
        cvpo_winner_base: CVPO proposes the loser's new edits from the winner (``use_last_winner_as_base``).
        vfd_step: VFD proposer step.
        vfd_noise: VFD proposer noise.
        vfd_candidates: VFD candidates per iteration.
        random_range: Random search's sampling half-width (unit coordinates).
        oracle_learning_rate: Oracle gradient step length.
        mask_size: Attributes moved per proposal.
        min_rounds: CVPO's minimum rounds.
        max_rounds: CVPO's maximum rounds (and VFD's iterations).
        equilibrium: CVPO's equilibrium score.
        patience: VFD's patience.
        oracle_steps: Oracle gradient steps.
        best_of_n: Random plausible edits of the best-of-N ceiling.
    """

    cvpo_step: float = 0.15
    cvpo_noise: float = 0.15
    cvpo_candidates: int = 3
    cvpo_learn: bool = False
    cvpo_decay: float = 0.9
    cvpo_winner_base: bool = False
    vfd_step: float = 0.15
    vfd_noise: float = 0.15
    vfd_candidates: int = 3
    random_range: float = 0.5
    oracle_learning_rate: float = 0.1
    mask_size: int = 2
    min_rounds: int = 10
    max_rounds: int = 30
    equilibrium: float = 0.51
    patience: int = 10
    oracle_steps: int = 12
    best_of_n: int = 64


def make_judge(weights, bias, seed: int, position_bias=0.1, temperature=0.2, feature_size=64, heads=None):
    """A :class:`UtilityJudge` over the heads ``heads`` (all by default)."""
    weights, bias = np.asarray(weights), np.asarray(bias)
    if heads is not None:
        weights, bias = weights[list(heads)], bias[list(heads)]
    return UtilityJudge(weights, bias, position_bias, temperature, seed, feature_size)


def _steps(arm, contexts, settings: ArmSettings, budgets, utility):
    for index, ctx in enumerate(contexts):
        if arm in ("cvpo", "cvpo_no_consistency", "cvpo_random_proposer"):
            proposer = optimise.Proposer(
                settings.cvpo_step,
                settings.cvpo_noise,
                settings.mask_size,
                use_feedback=arm != "cvpo_random_proposer",
                learn=settings.cvpo_learn,
            )
            yield optimise.cvpo(ctx, proposer, settings.cvpo_candidates, settings.min_rounds, settings.max_rounds,
                                settings.equilibrium, require_consistency=arm != "cvpo_no_consistency",
                                decay=settings.cvpo_decay, winner_as_base=settings.cvpo_winner_base)  # fmt: skip
        elif arm == "vfd":
            proposer = optimise.Proposer(settings.vfd_step, settings.vfd_noise, settings.mask_size)
            yield optimise.vfd(ctx, proposer, settings.vfd_candidates, settings.max_rounds, settings.patience)
        elif arm == "random_search":
            yield optimise.random_search(ctx, settings.random_range, int(budgets[index]))
        elif arm == "oracle_gradient":
            yield optimise.oracle_gradient(ctx, utility, settings.oracle_learning_rate, settings.oracle_steps)
        elif arm == "reference_best_of_n":
            yield optimise.best_of_n(ctx, utility, settings.best_of_n)
        elif arm == "original":
            yield _original(ctx)
        else:
            raise ValueError(f"unknown arm {arm!r}; one of {', '.join(ARMS)}")


def _original(ctx):
    best = ctx.render(optimise.IDENTITY_UNIT)
    yield [best.image]
    return optimise.Outcome(best, 0, 1, 0)


def optimise_items(
    arm: str,
    items: np.ndarray,
    judge: UtilityJudge,
    attribute_mean: np.ndarray,
    attribute_std: np.ndarray,
    settings: ArmSettings,
    seed: int,
    budgets=None,
    editor=None,
) -> tuple[list[optimise.Outcome], list[optimise.Observation], CachedJudge]:
    """Run ``arm`` on every item against ``judge`` (its optimisation heads), in lockstep.

    Args:
        arm: One of :data:`ARMS`.
        items: ``(N, H, W, 3)`` uint8.
        judge: The judge over the optimisation heads.
        attribute_mean: z-score means of the measurements.
        attribute_std: z-score standard deviations.
        settings: The arms' constants.
        seed: Seed of the proposals and tie-breaks (one generator per item).
        budgets: Judge calls per item (random search).
        editor: The editor (the parametric editor with the SSIM floor 0.5 by default).

    Returns:
        ``(outcomes, observations, cached_judge)``.
    """
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; one of {', '.join(ARMS)}")
    if arm == "random_search" and budgets is None:
        raise ValueError("random_search needs a judge-call budget per item")
    editor = editor or ParametricEditor()
    cached = CachedJudge(judge)
    contexts = [
        optimise.ItemContext(
            item, editor, cached, np.random.default_rng([seed, ARM_CODES[arm], index]), attribute_mean, attribute_std
        )  # fmt: skip
        for index, item in enumerate(items)
    ]

    def utility(images):
        return judge.utilities(images).mean(axis=1)

    outcomes = optimise.run_lockstep(list(_steps(arm, contexts, settings, budgets, utility)), cached)
    observations = [obs for ctx in contexts for obs in ctx.log.values()]
    return outcomes, observations, cached


def head_to_head(
    judge: UtilityJudge, items: np.ndarray, optimised: list[np.ndarray], trials: int, seed: int, heads
) -> np.ndarray:
    """Per item, the fraction of stochastic trials in which the optimised image is chosen over the original.

    ``trials`` draws per order per head, both orders, the heads ``heads``; the draws use a generator seeded by
    ``seed`` (trials are independent draws of the judge, not cached answers).

    Returns:
        ``(N,)`` fractions.
    """
    rng = np.random.default_rng([seed, 1416])
    original_u = judge.utilities(list(items), heads=list(heads))
    optimised_u = judge.utilities(list(optimised), heads=list(heads))
    p_opt_first = judge.probability_first(optimised_u, original_u)  # (N, H)
    p_orig_first = judge.probability_first(original_u, optimised_u)
    wins_first = rng.binomial(trials, p_opt_first)  # optimised shown first and chosen
    wins_second = trials - rng.binomial(trials, p_orig_first)  # original shown first, not chosen
    return (wins_first + wins_second).sum(axis=1) / (2.0 * trials * len(heads))


def clustered_ci_low(per_item: np.ndarray, seed: int, resamples: int = 2000, level: float = 0.95) -> float:
    """Lower end of the percentile bootstrap interval of the mean, resampling items (the clusters)."""
    rng = np.random.default_rng([seed, 1417])
    draws = rng.integers(0, len(per_item), size=(resamples, len(per_item)))
    means = np.asarray(per_item)[draws].mean(axis=1)
    return float(np.quantile(means, (1 - level) / 2))
