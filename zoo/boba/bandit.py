"""The campaign in plain numpy: initial design, arm rewards, UCB1 / Thompson / random / greedy arm selection,
acquisition, the counting oracle and the per-round bookkeeping of :class:`Campaign`.

The surrogate enters only as a ``predict(indices) -> (mean, std)`` callable, so the same code runs BOBA, the
full-library MolPAL-style baseline and random screening. See :mod:`zoo.boba.module` for the reconstruction choices.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from zoo._errors import ZooError
from zoo.boba.library import check_partition

STRATEGIES = ("boba", "full_greedy", "random")
ARM_RULES = ("ucb", "ts", "random", "greedy")
REWARDS = ("topk", "best")


class CountingOracle:
    """Oracle scores revealed one molecule at a time; every call is counted and a repeat call is refused.

    Args:
        scores: The oracle's value for every molecule of the library (computed once and cached).
    """

    def __init__(self, scores: np.ndarray):
        self._scores = np.asarray(scores, dtype=np.float64)
        self.calls = 0
        self._seen = np.zeros(len(self._scores), bool)

    def reveal(self, indices: np.ndarray) -> np.ndarray:
        """Count ``indices`` as oracle calls (int64), refusing a molecule asked for before or twice at once."""
        indices = np.asarray(indices, dtype=np.int64)
        if len(np.unique(indices)) != len(indices) or self._seen[indices].any():
            raise ZooError("the oracle was asked for a molecule twice; a campaign evaluates each molecule once")
        self._seen[indices] = True
        self.calls += len(indices)
        return indices

    def __call__(self, indices: np.ndarray) -> np.ndarray:
        return self._scores[self.reveal(indices)]


@dataclass(frozen=True)
class CampaignConfig:
    """The campaign's knobs (the module's init arguments of the same names).

    Args:
        strategy: ``boba`` (arms, then the surrogate on the chosen arms), ``full_greedy`` (the surrogate on every
            unlabelled molecule, MolPAL-style) or ``random`` (random screening, no surrogate).
        arm_rule: BOBA's arm selection: ``ucb`` (UCB1), ``ts`` (Gaussian Thompson sampling), ``random``,
            ``greedy`` (UCB1 with c = 0).
        exploration: c of UCB1 (``U_a = mean_a + c sqrt(2 ln N / n_a)``); the posterior scale of ``ts``.
        arm_fraction: m, the fraction of the arms scored per round (at least one arm).
        reward: ``topk`` (fraction of the arm's labelled molecules in the running global top-k) or ``best`` (the
            arm's best score, min-max normalised over the labels).
        topk_fraction: k of the ``topk`` reward as a fraction of the library (capped at half the labels).
        acquisition_beta: The in-arm acquisition ``mean + beta * std`` (0 is greedy).
        rounds: R.
        batch_fraction: B as a fraction of the library.
        initial_fraction: The random initial design as a fraction of the library.
    """

    strategy: str = "boba"
    arm_rule: str = "ucb"
    exploration: float = 0.5
    arm_fraction: float = 0.1
    reward: str = "topk"
    topk_fraction: float = 0.01
    acquisition_beta: float = 1.0
    rounds: int = 6
    batch_fraction: float = 0.01
    initial_fraction: float = 0.01

    def __post_init__(self):
        for name, value, valid in (
            ("strategy", self.strategy, STRATEGIES),
            ("arm_rule", self.arm_rule, ARM_RULES),
            ("reward", self.reward, REWARDS),
        ):
            if value not in valid:
                raise ZooError(f"{name} must be one of {', '.join(valid)}, got {value!r}")
        if self.exploration < 0 or self.acquisition_beta < 0:
            raise ZooError("exploration and acquisition_beta must be >= 0")
        for name in ("arm_fraction", "batch_fraction", "initial_fraction", "topk_fraction"):
            if not 0 < getattr(self, name) <= 1:
                raise ZooError(f"{name} must be in (0, 1], got {getattr(self, name)}")
        if self.rounds < 0:
            raise ZooError(f"rounds must be >= 0, got {self.rounds}")


def count_of(fraction: float, size: int) -> int:
    """``round(fraction * size)``, at least 1."""
    return max(1, int(round(fraction * size)))


def initial_design(arm_ids: np.ndarray, n_initial: int, rng: np.random.Generator) -> np.ndarray:
    """A random initial design spread across the arms: one molecule per arm when the arms fit, the rest at random."""
    size = len(arm_ids)
    if n_initial > size:
        raise ZooError(f"an initial design of {n_initial} for a library of {size}")
    num_arms = int(arm_ids.max()) + 1
    chosen = np.zeros(size, bool)
    if num_arms <= n_initial:
        order = rng.permutation(size)
        first = order[np.unique(arm_ids[order], return_index=True)[1]]  # one random member per arm
        chosen[first] = True
    rest = np.flatnonzero(~chosen)
    chosen[rng.choice(rest, size=n_initial - int(chosen.sum()), replace=False)] = True
    return rng.permutation(np.flatnonzero(chosen))


def arm_rewards(
    arm_ids: np.ndarray, labelled: np.ndarray, values: np.ndarray, num_arms: int, rule: str, k: int
) -> np.ndarray:
    """Each arm's mean reward in [0, 1] from all labels so far (0 for an arm without labels).

    Args:
        arm_ids: The partition.
        labelled: Indices of the labelled molecules.
        values: Their oracle scores.
        num_arms: P.
        rule: ``topk``: fraction of the arm's labelled molecules that are in the running global top-k, with k
            capped at half the labels; ``best``: the arm's best score, min-max normalised over all labels.
        k: The top-k size (1% of the library).
    """
    arms = arm_ids[labelled]
    counts = np.bincount(arms, minlength=num_arms)
    if rule == "topk":
        k = max(1, min(k, math.ceil(len(values) / 2)))
        threshold = np.sort(values)[::-1][k - 1]
        hits = np.bincount(arms, weights=(values >= threshold).astype(float), minlength=num_arms)
        return np.divide(hits, counts, out=np.zeros(num_arms), where=counts > 0)
    if rule == "best":
        low, high = float(values.min()), float(values.max())
        best = np.full(num_arms, -np.inf)
        np.maximum.at(best, arms, values)
        scaled = (best - low) / (high - low) if high > low else np.ones(num_arms)
        return np.where(counts > 0, scaled, 0.0)
    raise ZooError(f"reward must be one of {', '.join(REWARDS)}, got {rule!r}")


def arm_priority(
    rule: str, means: np.ndarray, pulls: np.ndarray, exploration: float, rng: np.random.Generator
) -> np.ndarray:
    """All arms in the order the rule prefers them; unpulled arms come first (U = inf) for ``ucb``/``greedy``/``ts``.

    ``ucb``: ``U_a = mean_a + c sqrt(2 ln N / n_a)``, N the total pulls; ``greedy``: the same with c = 0;
    ``ts``: ``theta_a ~ N(mean_a, c^2 / n_a)``; ``random``: a random order. Ties are broken at random.
    """
    pulls = np.asarray(pulls, np.float64)
    total = max(pulls.sum(), 1.0)
    safe = np.maximum(pulls, 1.0)
    if rule == "ucb":
        score = means + exploration * np.sqrt(2 * math.log(total) / safe)
    elif rule == "greedy":
        score = means.astype(np.float64).copy()
    elif rule == "ts":
        score = means + exploration * rng.standard_normal(len(means)) / np.sqrt(safe)
    elif rule == "random":
        return rng.permutation(len(means))
    else:
        raise ZooError(f"arm_rule must be one of {', '.join(ARM_RULES)}, got {rule!r}")
    score = np.where(pulls == 0, np.inf, score)
    return np.lexsort((rng.random(len(means)), -score))


def acquire(mean: np.ndarray, std: np.ndarray, beta: float, batch: int) -> np.ndarray:
    """Positions of the ``batch`` best candidates by ``mean + beta * std`` (ties by position)."""
    if batch > len(mean):
        raise ZooError(
            f"a batch of {batch} is larger than the unlabelled pool of {len(mean)} candidates; shrink the batch "
            "or score more arms"
        )
    return np.argsort(-(np.asarray(mean) + beta * np.asarray(std)), kind="stable")[:batch]


Predict = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


class Campaign:
    """One screening campaign over a partitioned library.

    Args:
        arm_ids: The partition (arm id per molecule).
        oracle: The counting oracle.
        config: The campaign's knobs.
        seed: Seed of the initial design and of every random choice.
    """

    def __init__(self, arm_ids: np.ndarray, oracle: CountingOracle, config: CampaignConfig, seed: int = 0):
        self.arm_ids = check_partition(arm_ids, len(arm_ids))
        self.size = len(arm_ids)
        self.num_arms = int(self.arm_ids.max()) + 1
        self.oracle, self.config = oracle, config
        self.rng = np.random.default_rng([seed, 2606])
        self.batch = count_of(config.batch_fraction, self.size)
        self.topk = count_of(config.topk_fraction, self.size)
        self.labelled_mask = np.zeros(self.size, bool)
        self.labelled = np.zeros(0, np.int64)
        self.values = np.zeros(0, np.float64)
        self.pulls = np.zeros(self.num_arms, np.int64)
        self.means = np.zeros(self.num_arms, np.float64)
        self.inferences = 0
        self.inference_seconds = 0.0
        self.rounds_done = 0
        self.log: list[dict] = []

    # -------------------------------------------------------------------------------------------------- state

    @property
    def oracle_calls(self) -> int:
        return self.oracle.calls

    def _label(self, indices: np.ndarray) -> np.ndarray:
        values = self.oracle(indices)
        self.labelled_mask[indices] = True
        self.labelled = np.concatenate([self.labelled, indices])
        self.values = np.concatenate([self.values, values])
        return values

    def _update_arms(self) -> None:
        self.means = arm_rewards(
            self.arm_ids, self.labelled, self.values, self.num_arms, self.config.reward, self.topk
        )  # fmt: skip

    def initialise(self) -> None:
        """Label the random initial design; every arm it touches counts as pulled once."""
        if self.labelled.size:
            raise ZooError("the campaign is already initialised")
        design = initial_design(self.arm_ids, count_of(self.config.initial_fraction, self.size), self.rng)
        self._label(design)
        self.pulls[np.unique(self.arm_ids[design])] += 1
        self._update_arms()
        self.log.append(self._entry(0, arms=[], scored=0, batch=design))

    def unlabelled_per_arm(self) -> np.ndarray:
        return np.bincount(self.arm_ids[~self.labelled_mask], minlength=self.num_arms)

    # ------------------------------------------------------------------------------------------------- rounds

    def choose_arms(self) -> np.ndarray:
        """The first ``m`` available arms in the rule's order, extended until their unlabelled pool holds a batch."""
        free = self.unlabelled_per_arm()
        order = arm_priority(self.config.arm_rule, self.means, self.pulls, self.config.exploration, self.rng)
        order = order[free[order] > 0]
        m = count_of(self.config.arm_fraction, self.num_arms)
        cumulative = np.cumsum(free[order])
        enough = int(np.searchsorted(cumulative, self.batch)) + 1  # arms needed for one batch
        return order[: max(m, enough)]

    def round(self, predict: Predict | None) -> dict:
        """One round: (arms ->) surrogate inference -> acquisition -> oracle -> arm rewards."""
        cfg = self.config
        if self.batch > self.size - self.labelled.size:
            raise ZooError(
                f"a batch of {self.batch} is larger than the unlabelled pool of {self.size - self.labelled.size}"
            )
        arms: np.ndarray = np.zeros(0, np.int64)
        if cfg.strategy == "random":
            batch = self.rng.choice(np.flatnonzero(~self.labelled_mask), size=self.batch, replace=False)
            scored = 0
        else:
            if predict is None:
                raise ZooError(f"strategy {cfg.strategy!r} needs a surrogate")
            if cfg.strategy == "boba":
                arms = self.choose_arms()
                candidates = np.flatnonzero(~self.labelled_mask & np.isin(self.arm_ids, arms))
            else:
                candidates = np.flatnonzero(~self.labelled_mask)
            started = time.perf_counter()
            mean, std = predict(candidates)
            self.inference_seconds += time.perf_counter() - started
            scored = len(candidates)
            self.inferences += scored
            batch = candidates[acquire(mean, std, cfg.acquisition_beta, self.batch)]
        self._label(batch)
        if len(arms):
            self.pulls[arms] += 1
        self._update_arms()
        self.rounds_done += 1
        entry = self._entry(self.rounds_done, arms=arms.tolist(), scored=scored, batch=batch)
        self.log.append(entry)
        return entry

    def _entry(self, round_index: int, arms: list, scored: int, batch: np.ndarray) -> dict:
        values = self.values[-len(batch) :]
        return {
            "round": round_index,
            "arms": [int(a) for a in arms],
            "scored": int(scored),
            "inferences_total": int(self.inferences),
            "oracle_calls_total": int(self.oracle.calls),
            "batch_best": round(float(values.max()), 6),
            "batch_mean": round(float(values.mean()), 6),
            "best_so_far": round(float(self.values.max()), 6),
        }

    def full_library_inferences(self) -> int:
        """What full-library inference would have cost over the rounds done: the unlabelled pool of each round."""
        n0 = count_of(self.config.initial_fraction, self.size)
        return int(sum(self.size - n0 - r * self.batch for r in range(self.rounds_done)))

    def summary(self) -> dict:
        return {
            "config": asdict(self.config),
            "size": self.size,
            "num_arms": self.num_arms,
            "batch": self.batch,
            "oracle_calls": int(self.oracle.calls),
            "surrogate_inferences": int(self.inferences),
            "inference_seconds": round(self.inference_seconds, 3),
            "labelled": [int(i) for i in self.labelled],
            "rounds": self.log,
        }
