"""Edit optimisers against a judge: CVPO, VFD, random search and the finite-difference oracle.

Every optimiser works on one item and is written as a generator: it yields the images it is about to judge, the
driver :func:`run_lockstep` encodes the images of all items in one batch (``judge.prefetch``) and resumes them.
So the per-item code reads as the paper's loop while the backbone sees batches of 32-100 images.

Parameters live in unit coordinates (each edit parameter scaled to [0, 1] by its bounds); every rendered edit
passes the editor's plausibility prior (bounds and the SSIM floor), anchored at its parent edit.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field

import numpy as np

from zoo.visual_persuasion.attributes import ATTRIBUTES, image_key, measure
from zoo.visual_persuasion.contest import ContestResult, contest
from zoo.visual_persuasion.editor import ATTRIBUTE_PARAMETERS, IDENTITY_UNIT, PARAMETERS, Editor, from_unit, to_unit
from zoo.visual_persuasion.judge import Judge

#: Indices of the parameters that move each attribute (the proposer's map from feedback to edits).
_ATTRIBUTE_INDEX = [[PARAMETERS.index(p) for p in ATTRIBUTE_PARAMETERS[a]] for a in ATTRIBUTES]


@dataclass
class Rendered:
    """One plausible edit of an item: its parameters, image, SSIM to the original and measured attributes."""

    theta: np.ndarray
    image: np.ndarray
    ssim: float
    attributes: np.ndarray  # raw measurements, 6 logged + the hidden detail (analysis reads the first 6)

    @property
    def unit(self) -> np.ndarray:
        return to_unit(self.theta)


@dataclass
class Observation:
    """One logged judge call: the attribute difference (first - second, z-scored), the choice and its pair."""

    delta: np.ndarray
    chose_first: bool
    pair: bytes
    key: tuple


@dataclass
class ItemContext:
    """What an optimiser run on one item needs and records.

    Args:
        original: The item, uint8 ``(H, W, 3)``.
        editor: The editor.
        judge: The (cached) judge.
        rng: This run's generator.
        attribute_mean: Mean of the 7 raw measurements on the heads' training edits (z-scores of the feedback).
        attribute_std: Their standard deviation.
    """

    original: np.ndarray
    editor: Editor
    judge: Judge
    rng: np.random.Generator
    attribute_mean: np.ndarray
    attribute_std: np.ndarray
    calls: int = 0
    rendered: int = 0
    log: dict = field(default_factory=dict)

    def render(self, unit: np.ndarray, anchor: np.ndarray | None = None, project: bool = True) -> Rendered:
        """The plausible edit nearest ``unit`` toward ``anchor`` (absolute parameters); bounds by clipping."""
        theta = from_unit(np.clip(unit, 0.0, 1.0))
        if project:
            theta, image, score = self.editor.plausible(self.original, theta, anchor)
        else:
            from zoo.visual_persuasion.editor import ssim

            image = self.editor.edit(self.original, theta)
            score = ssim(self.original, image)
        self.rendered += 1
        return Rendered(theta, image, score, measure(image, self.original))

    def z(self, rendered: Rendered) -> np.ndarray:
        """The six logged attributes of an edit, z-scored."""
        return ((rendered.attributes - self.attribute_mean) / self.attribute_std)[:6]

    def contest(self, a: Rendered, b: Rendered, require_consistency: bool = True) -> ContestResult:
        """A contest between two edits, counted in ``calls`` and logged for the revealed-preference analysis."""
        result = contest(self.judge, a.image, b.image, self.rng, require_consistency)
        self.calls += len(result.calls)
        key_a, key_b = image_key(a.image), image_key(b.image)
        pair = min(key_a, key_b) + max(key_a, key_b)
        for a_first, prompt, chose_first in result.calls:
            first, second = (a, b) if a_first else (b, a)
            key = (key_a, key_b, prompt) if a_first else (key_b, key_a, prompt)
            if key not in self.log:  # an identical request gets the identical (cached) answer: log it once
                self.log[key] = Observation(self.z(first) - self.z(second), chose_first, pair, key)
        return result


@dataclass
class LearnedDirection:
    """What a proposer learns from the contest outcomes: a running estimate of the direction (unit parameter
    coordinates) the judges prefer, the stand-in for the LLM proposer's win/loss edit history.

    Every decided contest adds ``(2 score - 1) (x_winner - x_loser) / |x_winner - x_loser|`` (the winner's vote
    share; a tie-break, score 0.5, adds nothing) to the estimate, after the older evidence is multiplied by
    ``decay``. This is the comparison-based gradient estimate: for a utility ``u(x) ~ g . x`` and perturbations
    around the current edits, its expectation points along ``g``.

    Args:
        decay: Weight kept by the older evidence at each update (1: a plain sum).
    """

    decay: float = 0.9
    vector: np.ndarray = field(default_factory=lambda: np.zeros(len(PARAMETERS)))
    updates: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.decay <= 1.0:
            raise ValueError(f"decay must be in [0, 1], got {self.decay}")

    def update(self, winner: np.ndarray, loser: np.ndarray, score: float) -> None:
        """Learn from one contest: ``winner`` beat ``loser`` (unit coordinates) with vote share ``score``."""
        difference = np.asarray(winner, dtype=np.float64) - np.asarray(loser, dtype=np.float64)
        norm = np.linalg.norm(difference)
        if norm < 1e-9:
            return
        self.vector = self.decay * self.vector + (2.0 * score - 1.0) * difference / norm
        self.updates += 1

    def direction(self) -> np.ndarray | None:
        """The estimate scaled so its largest coordinate is 1, or None while nothing is learned."""
        largest = np.abs(self.vector).max()
        return None if largest < 1e-12 else self.vector / largest


@dataclass
class Proposer:
    """The offline stand-in for the LLM proposer.

    Sign proposer (``learn=False``, the spec's): ``theta' = base + step * direction * m + N(0, noise^2)`` in unit
    coordinates, where ``m`` is a random subset of ``mask_size`` attributes' parameters. With feedback, the subset
    favours the attributes that differed most between winner and loser (the judges' reasons, offline) and the
    direction is ``sign(target - base)``; the random proposer (an ablation) draws the subset uniformly and the
    direction at random.

    Learning proposer (``learn=True``, the paper's proposer reads the win/loss history): once ``learned`` holds an
    estimate, ``theta' = base + step * d + N(0, noise^2)`` with ``d`` the :class:`LearnedDirection` (largest
    coordinate 1) and no mask; before that, the sign proposer.

    Args:
        step: Step size ``eta`` (unit coordinates).
        noise: Standard deviation of the Gaussian perturbation (unit coordinates).
        mask_size: Attributes whose parameters move per proposal (sign proposer).
        use_feedback: False ignores the feedback and what was learned (``cvpo_random_proposer``).
        learn: Move along the direction learned from the contest outcomes.
    """

    step: float = 0.15
    noise: float = 0.05
    mask_size: int = 2
    use_feedback: bool = True
    learn: bool = False

    def propose(
        self,
        base: np.ndarray,
        rng: np.random.Generator,
        direction: np.ndarray | None = None,
        feedback: np.ndarray | None = None,
        learned: LearnedDirection | None = None,
    ) -> np.ndarray:
        """A new unit parameter vector.

        Args:
            base: The edit being improved (unit coordinates).
            rng: Generator.
            direction: Per-parameter sign to move in (0: unknown, drawn at random).
            feedback: Per-attribute |difference| between winner and loser (z-scores), or None (zero-shot).
            learned: The direction learned from the contest outcomes so far (``learn`` proposers).
        """
        estimate = learned.direction() if (learned is not None and self.learn and self.use_feedback) else None
        if estimate is not None:
            proposal = base + self.step * estimate + rng.normal(0.0, self.noise, size=len(PARAMETERS))
            return np.clip(proposal, 0.0, 1.0)
        size = min(self.mask_size, len(ATTRIBUTES))
        if self.use_feedback and feedback is not None and np.sum(np.abs(feedback)) > 0:
            weights = np.abs(feedback) + 0.1 * np.abs(feedback).mean()
            chosen = rng.choice(len(ATTRIBUTES), size=size, replace=False, p=weights / weights.sum())
        else:
            chosen = rng.choice(len(ATTRIBUTES), size=size, replace=False)
        mask = np.zeros(len(PARAMETERS))
        for attribute in chosen:
            mask[_ATTRIBUTE_INDEX[attribute]] = 1.0
        signs = rng.choice([-1.0, 1.0], size=len(PARAMETERS))
        if self.use_feedback and direction is not None:
            signs = np.where(np.sign(direction) != 0, np.sign(direction), signs)
        proposal = base + self.step * signs * mask + rng.normal(0.0, self.noise, size=len(PARAMETERS))
        return np.clip(proposal, 0.0, 1.0)


@dataclass
class Outcome:
    """What an optimiser returns for one item.

    Attributes:
        best: The optimised edit.
        calls: Judge calls requested.
        rendered: Edits rendered.
        rounds: Rounds (CVPO), iterations (VFD), contests (random search) or steps (oracle).
        trace: Per round, the pair's parameters before the round and the contest's winner and score (CVPO).
    """

    best: Rendered
    calls: int
    rendered: int
    rounds: int
    trace: list = field(default_factory=list)


Step = Generator[list, None, Outcome]


def _check_rounds(num_candidates: int, min_rounds: int, max_rounds: int) -> None:
    if num_candidates < 1:
        raise ValueError(f"num_candidates must be >= 1, got {num_candidates}")
    if min_rounds < 1 or max_rounds < min_rounds:
        raise ValueError(f"need 1 <= min_rounds <= max_rounds, got min_rounds={min_rounds}, max_rounds={max_rounds}")


def cvpo(
    ctx: ItemContext,
    proposer: Proposer,
    num_candidates: int = 3,
    min_rounds: int = 10,
    max_rounds: int = 30,
    equilibrium: float = 0.51,
    require_consistency: bool = True,
    decay: float = 0.9,
    winner_as_base: bool = False,
) -> Step:
    """Competitive Visual Prompt Optimisation on one item.

    Two zero-shot edits compete; each round the loser is replaced by the best of ``num_candidates`` proposals
    (each played against the winner), even if all of them lost. The run stops at an equilibrium (the round's
    winner scores below ``equilibrium``) once ``min_rounds`` rounds are done, or after ``max_rounds``. Every
    contest's outcome is fed to a :class:`LearnedDirection`, which a learning proposer moves along.

    Args:
        ctx: The item.
        proposer: Proposes the loser's new edits from (loser, winner, feedback).
        num_candidates: Proposals per round.
        min_rounds: Rounds before the equilibrium may stop the run.
        max_rounds: Most rounds.
        equilibrium: The winner's score below which the run stops.
        require_consistency: Count only order-consistent judges (False: the ``cvpo_no_consistency`` ablation).
        decay: The learned direction's decay (see :class:`LearnedDirection`).
        winner_as_base: Propose the loser's new edits from the winner's parameters (the paper's
            ``use_last_winner_as_base``) instead of the loser's; the editor still anchors at the loser.
    """
    _check_rounds(num_candidates, min_rounds, max_rounds)
    learned = LearnedDirection(decay)
    pair = [ctx.render(proposer.propose(IDENTITY_UNIT, ctx.rng)) for _ in range(2)]
    yield [edit.image for edit in pair]
    trace = []
    for round_index in range(1, max_rounds + 1):
        result = ctx.contest(pair[0], pair[1], require_consistency)
        winner, loser = pair[result.winner], pair[1 - result.winner]
        learned.update(winner.unit, loser.unit, result.score)
        trace.append({"thetas": [pair[0].theta.copy(), pair[1].theta.copy()], "winner": result.winner,
                      "score": result.score, "round": round_index})  # fmt: skip
        if (round_index >= min_rounds and result.score < equilibrium) or round_index == max_rounds:
            break
        feedback = np.abs(ctx.z(winner) - ctx.z(loser))
        direction = winner.unit - loser.unit
        direction[np.abs(direction) < 1e-9] = 0.0
        base = winner.unit if winner_as_base else loser.unit
        candidates = [
            ctx.render(proposer.propose(base, ctx.rng, direction, feedback, learned), anchor=loser.theta)
            for _ in range(num_candidates)
        ]
        yield [edit.image for edit in candidates]
        results = [ctx.contest(winner, edit, require_consistency) for edit in candidates]
        for edit, outcome in zip(candidates, results, strict=True):
            if outcome.winner == 1:
                learned.update(edit.unit, winner.unit, outcome.score)
            else:
                learned.update(winner.unit, edit.unit, outcome.score)
        scores = [outcome.score_of(1) for outcome in results]
        pair[1 - result.winner] = candidates[int(np.argmax(scores))]
    return Outcome(winner, ctx.calls, ctx.rendered, round_index, trace)


def vfd(
    ctx: ItemContext,
    proposer: Proposer,
    num_candidates: int = 3,
    max_iterations: int = 30,
    patience: int = 10,
) -> Step:
    """Visual feedback descent on one image: candidates from the accumulated (candidate, outcome) history each
    play the current best; the best-scoring winner replaces it. Stops after ``patience`` iterations without a
    win, or ``max_iterations``.

    Args:
        ctx: The item.
        proposer: Proposes from the current best, the accumulated direction and feedback.
        num_candidates: Candidates per iteration.
        max_iterations: Most iterations.
        patience: Iterations without improvement before stopping.
    """
    _check_rounds(num_candidates, 1, max_iterations)
    if patience < 1:
        raise ValueError(f"patience must be >= 1, got {patience}")
    best = ctx.render(IDENTITY_UNIT)
    yield [best.image]
    direction = np.zeros(len(PARAMETERS))
    feedback = np.zeros(len(ATTRIBUTES))
    stale = 0
    for iteration in range(1, max_iterations + 1):  # noqa: B007 (returned)
        candidates = [
            ctx.render(proposer.propose(best.unit, ctx.rng, direction, feedback if feedback.any() else None),
                       anchor=best.theta)
            for _ in range(num_candidates)
        ]  # fmt: skip
        yield [edit.image for edit in candidates]
        results = [ctx.contest(best, edit) for edit in candidates]
        for edit, result in zip(candidates, results, strict=True):
            sign = 1.0 if result.winner == 1 else -1.0  # the rationale: this change helped or hurt
            direction += sign * (edit.unit - best.unit)
            feedback += np.abs(ctx.z(edit) - ctx.z(best))
        winners = [(r.score_of(1), i) for i, r in enumerate(results) if r.winner == 1]
        if winners:
            best, stale = candidates[max(winners)[1]], 0
            direction *= 0.5  # older evidence was about the previous base
        else:
            stale += 1
            if stale >= patience:
                break
    return Outcome(best, ctx.calls, ctx.rendered, iteration)


def random_search(ctx: ItemContext, sampling_range: float, budget_calls: int, batch: int = 8) -> Step:
    """Uniform random edits around the identity (``+- sampling_range`` in unit coordinates, then the plausibility
    prior); each plays the current best (the original at first) until ``budget_calls`` judge calls are spent.

    Args:
        ctx: The item.
        sampling_range: Half-width of the sampling box in unit coordinates.
        budget_calls: Judge calls to spend (a contest costs ``2 * num_prompts``).
        batch: Candidates rendered per yield (encoding batch; no effect on the result).
    """
    if sampling_range <= 0:
        raise ValueError(f"sampling_range must be > 0, got {sampling_range}")
    per_contest = 2 * ctx.judge.num_prompts
    best = ctx.render(IDENTITY_UNIT)
    yield [best.image]
    contests = max(0, int(round(budget_calls / per_contest)))
    done = 0
    while done < contests:
        size = min(batch, contests - done)
        candidates = [
            ctx.render(IDENTITY_UNIT + ctx.rng.uniform(-sampling_range, sampling_range, len(PARAMETERS)))
            for _ in range(size)
        ]
        yield [edit.image for edit in candidates]
        for edit in candidates:
            if ctx.contest(best, edit).winner == 1:
                best = edit
        done += size
    return Outcome(best, ctx.calls, ctx.rendered, done)


def oracle_gradient(
    ctx: ItemContext, utility, learning_rate: float = 0.1, steps: int = 12, difference: float = 0.05
) -> Step:
    """Finite-difference gradient ascent on the judges' mean utility (an upper bound: it reads the utility).

    Each step probes every parameter (forward difference, backward at the upper bound) on raw edits, moves
    ``learning_rate`` along the normalised gradient and renders the plausible edit toward it. One utility read
    counts as one judge call.

    Args:
        ctx: The item.
        utility: ``images -> (N,)`` mean utility over the optimisation judges.
        learning_rate: Step length in unit coordinates.
        steps: Gradient steps.
        difference: Finite-difference step in unit coordinates.
    """
    current = ctx.render(IDENTITY_UNIT)
    yield [current.image]
    best, best_value = current, float(utility([current.image])[0])
    ctx.calls += 1
    for step_index in range(1, steps + 1):  # noqa: B007 (returned)
        probes, signs = [], []
        for i in range(len(PARAMETERS)):
            offset = np.zeros(len(PARAMETERS))
            sign = 1.0 if current.unit[i] + difference <= 1.0 else -1.0
            offset[i] = sign * difference
            probes.append(ctx.render(current.unit + offset, project=False))
            signs.append(sign)
        yield [probe.image for probe in probes]
        values = utility([current.image] + [probe.image for probe in probes])
        ctx.calls += len(probes)
        gradient = np.array([(values[i + 1] - values[0]) * signs[i] / difference for i in range(len(PARAMETERS))])
        norm = np.linalg.norm(gradient)
        if norm == 0:
            break
        current = ctx.render(current.unit + learning_rate * gradient / norm, anchor=current.theta)
        yield [current.image]
        value = float(utility([current.image])[0])
        ctx.calls += 1
        if value > best_value:
            best, best_value = current, value
    return Outcome(best, ctx.calls, ctx.rendered, step_index)


def best_of_n(ctx: ItemContext, utility, n: int = 64) -> Step:
    """The best of ``n`` random plausible edits by the judges' true mean utility (a ceiling: it reads the utility).

    Each edit draws every parameter uniformly in its bounds and then meets the SSIM floor (the editor's
    ``random_plausible``); the original is not a candidate. One utility read counts as one judge call.

    Args:
        ctx: The item.
        utility: ``images -> (N,)`` mean utility over the optimisation judges.
        n: Random plausible edits.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    candidates = [ctx.render(ctx.rng.uniform(0.0, 1.0, len(PARAMETERS))) for _ in range(n)]
    yield [edit.image for edit in candidates]
    values = np.asarray(utility([edit.image for edit in candidates]))
    ctx.calls += n
    return Outcome(candidates[int(np.argmax(values))], ctx.calls, ctx.rendered, n)


def run_lockstep(steps: Sequence[Step], judge: Judge) -> list[Outcome]:
    """Run per-item optimisers side by side, encoding each round's new images of all items in one batch."""
    outcomes: list[Outcome | None] = [None] * len(steps)
    waiting: dict[int, list] = {}
    for index, step in enumerate(steps):
        try:
            waiting[index] = next(step)
        except StopIteration as stop:
            outcomes[index] = stop.value
    while waiting:
        judge.prefetch([image for images in waiting.values() for image in images])
        resumed = {}
        for index, _ in waiting.items():
            try:
                resumed[index] = steps[index].send(None)
            except StopIteration as stop:
                outcomes[index] = stop.value
        waiting = resumed
    return outcomes  # type: ignore[return-value]
