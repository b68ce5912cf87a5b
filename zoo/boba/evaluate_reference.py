"""``reference_tanimoto_expand``: a screening campaign without learning, expanding from the labelled hits.

The same random initial design as a BOBA campaign of the same seed (the same generator and draw as
:meth:`~zoo.boba.bandit.Campaign.initialise`) and the same oracle budget; then each round the ``hits`` best
labelled molecules are the queries, every unlabelled molecule is scored by its Tanimoto similarity to them
(``max``: the nearest hit; ``mean``: the mean over the hits) and the best ``B`` are labelled. No surrogate, no
arms: it asks whether BOBA's learned model earns its place over plain similarity search from what was found.
Only the evaluation and the tuning use it (the name keeps it out of the code digest of stored fits).
"""

from __future__ import annotations

import time

import numpy as np

from zoo._errors import ZooError
from zoo.boba.bandit import CampaignConfig, CountingOracle, count_of, initial_design
from zoo.boba.library import tanimoto_packed

AGGREGATES = ("max", "mean")


class HitSimilarity:
    """Tanimoto of every library molecule to each query molecule, computed once per query and kept."""

    def __init__(self, fps: np.ndarray):
        self.fps = np.asarray(fps, np.uint8)
        self._rows: dict[int, np.ndarray] = {}

    def __call__(self, index: int) -> np.ndarray:
        if index not in self._rows:
            self._rows[index] = tanimoto_packed(self.fps[index], self.fps).astype(np.float32)
        return self._rows[index]


def expansion_scores(similarity: HitSimilarity, hits: np.ndarray, candidates: np.ndarray, aggregate: str) -> np.ndarray:
    """Each candidate's similarity to the hits: the largest (``max``) or the mean (``mean``)."""
    if aggregate not in AGGREGATES:
        raise ZooError(f"aggregate must be one of {', '.join(AGGREGATES)}, got {aggregate!r}")
    if len(hits) == 0:
        raise ZooError("the expansion needs at least one labelled hit")
    rows = [similarity(int(h))[candidates] for h in hits]
    return np.max(rows, axis=0) if aggregate == "max" else np.mean(rows, axis=0)


def tanimoto_expand(
    fps: np.ndarray,
    scores: np.ndarray,
    arm_ids: np.ndarray,
    config: CampaignConfig,
    seed: int,
    hits: int = 10,
    aggregate: str = "max",
) -> dict:
    """One no-learning campaign: BOBA's initial design, then ``config.rounds`` rounds of nearest-hit expansion.

    Args:
        fps: Packed fingerprints of the library ``(N, 256)``.
        scores: The oracle's value for every molecule (read only through a counting oracle).
        arm_ids: The partition that spreads the initial design (the acid arms, as BOBA's).
        config: The budget (``rounds``, ``batch_fraction``, ``initial_fraction``); the other knobs are unused.
        seed: The campaign's seed (the same design as BOBA's campaign of this seed).
        hits: How many of the best labelled molecules are the queries each round.
        aggregate: ``max`` (nearest hit) or ``mean`` similarity to the queries.

    Returns:
        ``labelled`` (indices in labelling order), ``oracle_calls``, ``batch``, ``rounds``, ``campaign_seconds``.
    """
    if hits < 1:
        raise ZooError(f"hits must be >= 1, got {hits}")
    if aggregate not in AGGREGATES:
        raise ZooError(f"aggregate must be one of {', '.join(AGGREGATES)}, got {aggregate!r}")
    started = time.perf_counter()
    size = len(scores)
    oracle = CountingOracle(scores)
    rng = np.random.default_rng([seed, 2606])  # Campaign's generator: its first draw is the same design
    labelled = initial_design(np.asarray(arm_ids), count_of(config.initial_fraction, size), rng)
    values = oracle(labelled)
    batch = count_of(config.batch_fraction, size)
    similarity = HitSimilarity(fps)
    mask = np.zeros(size, bool)
    mask[labelled] = True
    for _ in range(config.rounds):
        candidates = np.flatnonzero(~mask)
        if batch > len(candidates):
            raise ZooError(f"a batch of {batch} is larger than the unlabelled pool of {len(candidates)}")
        queries = labelled[np.argsort(-values, kind="stable")[:hits]]
        value = expansion_scores(similarity, queries, candidates, aggregate)
        chosen = candidates[np.lexsort((rng.random(len(candidates)), -value))[:batch]]  # ties at random
        labelled = np.concatenate([labelled, chosen])
        values = np.concatenate([values, oracle(chosen)])
        mask[chosen] = True
    return {
        "labelled": labelled,
        "oracle_calls": oracle.calls,
        "batch": batch,
        "rounds": config.rounds,
        "campaign_seconds": round(time.perf_counter() - started, 3),
    }
