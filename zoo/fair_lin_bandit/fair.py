"""The FairLinBandit meta-algorithm and LinNash built from it: Phase 1 fair exploration, an elimination, a base policy.

:class:`FairLinBandit` wraps any batched policy (:mod:`zoo.fair_lin_bandit.batched`): Phase 1 fair exploration,
the Bernstein-type elimination (or LinNash's Part I rule), then the base policy on the surviving arms. The Phase 1
lengths and elimination widths are plain functions here; :func:`linnash` assembles LinNash from the wrapper and
:class:`~zoo.fair_lin_bandit.elimination.LinNashElimination`. See :mod:`zoo.fair_lin_bandit.module` for every
reconstruction choice.
"""

from __future__ import annotations

import math

import numpy as np

from zoo.fair_lin_bandit.batched import batch_mask, sample_from
from zoo.fair_lin_bandit.design import g_optimal_design
from zoo.fair_lin_bandit.elimination import LinNashElimination, linnash_log
from zoo.fair_lin_bandit.regret import check_p


def phase1_length(horizon: int, dim: int, num_arms: int, p: float = 0.0, c1: float = 1.0) -> int:
    """``T1 = ceil(c1 sqrt(T d log(T K)) (1 + max(0, -p))**0.5)``."""
    return math.ceil(c1 * math.sqrt(horizon * dim * math.log(horizon * num_arms)) * math.sqrt(1 + max(0.0, -p)))


def linnash_part1_length(horizon: int, dim: int, num_arms: int, multiplier: float = 3.0, nu: float = 1.0) -> int:
    """LinNash's Part I length ``T~ = 3 sqrt(T d nu log(T K))`` (``multiplier`` = 3 as published)."""
    return math.ceil(multiplier * math.sqrt(horizon * dim * nu * linnash_log(horizon, num_arms)))


def bernstein_width(norms: np.ndarray, mean_reward: np.ndarray, length: int, num_arms: int, delta: float):
    """Our width ``||x||_{V^-1} (sqrt(2 log(2K/delta) max(nu_hat, 1/T1)) + log(2K/delta)/T1 ||x||_{V^-1})``.

    Args:
        norms: ``||x||_{V^-1}``, ``(B, K)``.
        mean_reward: nu_hat, the mean observed reward of Phase 1, ``(B,)``.
        length: T1.
        num_arms: K.
        delta: Confidence level (1/T).
    """
    log_term = math.log(2 * num_arms / delta)
    level = np.maximum(mean_reward, 1.0 / length)[:, None]
    return norms * (np.sqrt(2 * log_term * level) + log_term / length * norms)


def linnash_part1_width(
    best: np.ndarray, dim: int, length: int, horizon: int, num_arms: int, nu: float = 1.0, scale: float = 1.0
):
    """LinNash's Part I elimination width ``16 sqrt(3 gamma nu d log(T K) / T~)`` with gamma = max estimate
    (``scale`` multiplies the 16; 1 as published).

    The form ``x`` kept iff ``<x, theta> >= gamma - 16 sqrt(3 gamma ...)`` is the one in the FairLinBandit
    authors' LinNash baseline (NP-Hardest/FairLinBandit, ``algorithms/linnash.py``), which writes the infinite-arm
    ``d**2.5 log T`` where the finite-arm algorithm has ``d log(T |X|)``.
    """
    return scale * 16.0 * np.sqrt(3.0 * np.maximum(best, 0.0) * nu * dim * linnash_log(horizon, num_arms) / length)


class FairLinBandit:
    """The meta-algorithm: Phase 1 fair exploration, an elimination, then ``base`` on the surviving arms.

    Phase 1 (T1 rounds) samples ``x ~ lambda_1 = 1/2 lambda_G + 1/2 Unif(supp lambda_G)`` (``lambda_G`` the
    G-optimal design), so every round's expected reward is a fixed mixture of the arm means. Then ridge least
    squares (lambda = 1) on Phase 1's data, and ``x`` survives iff ``<x, theta> + w(x) >= max_y (<y, theta> -
    w(y))`` with the Bernstein-type width (``width="bernstein"``) or LinNash's d-scaled Part I rule
    (``width="linnash"``, the ablation). Phase 1's observations are passed to ``base.update`` before it starts
    (``share_phase1=True``), so OFUL starts warm; a phased base ignores data before its first phase.

    Args:
        base: Any policy with ``select(arms, mask)`` and ``update(x, r)``.
        horizon: T.
        p: The p whose p-means regret is targeted (``p <= 1``; sets the Phase 1 length).
        c1: Phase 1 constant.
        rng: Randomness of Phase 1.
        width: ``"bernstein"`` (ours) or ``"linnash"``.
        length: Phase 1 length instead of the formula (0 skips Phase 1 and the elimination).
        sampler: ``"mixture"`` (ours: i.i.d. draws from ``lambda_1``) or ``"linnash"`` (LinNash's
            GenerateArmSequence: each round a fair coin picks a uniform draw over the arms, else the next
            support arm of the design in round-robin order until it has ``ceil(lambda_x T1 / 3)`` such pulls).
        ridge: lambda of the Phase 1 estimate.
        share_phase1: Feed Phase 1's data to ``base.update``.
        linnash_scale: Multiplies the 16 of LinNash's Part I rule (``width="linnash"``; 1 as published).
    """

    def __init__(
        self,
        base,
        horizon: int,
        p: float = 0.0,
        c1: float = 1.0,
        rng: np.random.Generator | None = None,
        width: str = "bernstein",
        length: int | None = None,
        ridge: float = 1.0,
        share_phase1: bool = True,
        sampler: str = "mixture",
        linnash_scale: float = 1.0,
    ):
        check_p(p)
        if c1 < 0 or linnash_scale <= 0:
            raise ValueError(f"c1 must be >= 0 (0: no Phase 1) and linnash_scale > 0, got {c1} and {linnash_scale}")
        self.linnash_scale = linnash_scale
        if width not in ("bernstein", "linnash"):
            raise ValueError(f"width must be 'bernstein' or 'linnash', got {width!r}")
        if sampler not in ("mixture", "linnash"):
            raise ValueError(f"sampler must be 'mixture' or 'linnash', got {sampler!r}")
        self.sampler = sampler
        if length is not None and length < 0:
            raise ValueError(f"the Phase 1 length must be >= 0, got {length}")
        self.base, self.horizon, self.p, self.c1, self.width = base, horizon, p, c1, width
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.fixed_length, self.ridge, self.share_phase1 = length, ridge, share_phase1
        self.last_probs = None
        self.t = 0
        self.length: int | None = None
        self.survivors: np.ndarray | None = None

    def phase1_length(self, dim: int, num_arms: int) -> int:
        if self.fixed_length is not None:
            length = self.fixed_length
        else:
            length = phase1_length(self.horizon, dim, num_arms, self.p, self.c1)
        if length > self.horizon:
            raise ValueError(
                f"Phase 1 would last {length} rounds, longer than the horizon T={self.horizon}: lower c1 "
                f"({self.c1}) or raise T"
            )
        return length

    def _start(self, arms: np.ndarray, mask: np.ndarray) -> None:
        batch, num_arms, dim = arms.shape
        self.length = self.phase1_length(dim, num_arms)
        design = g_optimal_design(arms, mask)
        support = design > 1e-9
        self.mixture = 0.5 * design + 0.5 * support / support.sum(axis=1, keepdims=True)
        if self.sampler == "linnash":
            self._start_round_robin(design, support, mask)
        self.gram = np.tile(self.ridge * np.eye(dim), (batch, 1, 1))
        self.target = np.zeros((batch, dim))
        self.reward_sum = np.zeros(batch)
        self.history: list[tuple[np.ndarray, np.ndarray]] = []
        self.survivors = mask.copy()

    def select(self, arms: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        mask = batch_mask(arms, mask)
        if self.length is None:
            self._start(arms, mask)
        if self.t < self.length:
            if self.sampler == "linnash":
                return self._round_robin_select()
            self.last_probs = self.mixture
            return sample_from(self.mixture, self.rng)
        if self.t == self.length and self.length > 0:
            self._eliminate(arms, mask)
        self.last_probs = None
        chosen = self.base.select(arms, self.survivors & mask)
        self.last_probs = getattr(self.base, "last_probs", None)
        return chosen

    def _start_round_robin(self, design: np.ndarray, support: np.ndarray, mask: np.ndarray) -> None:
        """LinNash's GenerateArmSequence state: design support in index order, pull caps, a cyclic pointer."""
        batch = len(design)
        width = max(int(support.sum(axis=1).max()), 1)
        self.rr_arm = np.zeros((batch, width), int)
        self.rr_cap = np.zeros((batch, width), int)  # 0 pads the short rows: never alive
        for b in range(batch):
            arms_b = np.flatnonzero(support[b])
            self.rr_arm[b, : len(arms_b)] = arms_b
            self.rr_cap[b, : len(arms_b)] = np.ceil(design[b, arms_b] * self.length / 3.0).astype(int)
        self.rr_count = np.zeros_like(self.rr_cap)
        self.rr_next = np.zeros(batch, int)
        self.uniform = mask / mask.sum(axis=1, keepdims=True)

    def _round_robin_select(self) -> np.ndarray:
        rows = np.arange(len(self.rr_arm))
        width = self.rr_arm.shape[1]
        alive = self.rr_count < self.rr_cap
        order = (self.rr_next[:, None] + np.arange(width)) % width  # cyclic scan from the pointer
        slot = order[rows, np.take_along_axis(alive, order, axis=1).argmax(axis=1)]
        pending = alive.any(axis=1)
        design_arm = self.rr_arm[rows, slot]
        from_design = pending & (self.rng.random(len(rows)) >= 0.5)  # the coin: heads "SAMPLE-U", tails "D/G-OPT"
        chosen = np.where(from_design, design_arm, sample_from(self.uniform, self.rng))
        self.rr_count[rows[from_design], slot[from_design]] += 1
        self.rr_next[from_design] = (slot[from_design] + 1) % width
        # E[mu_x_t | history]: the coin is fresh, so half uniform and half the next round-robin arm
        probs = self.uniform.copy()
        probs[pending] *= 0.5
        probs[rows[pending], design_arm[pending]] += 0.5
        self.last_probs = probs
        return chosen

    def _eliminate(self, arms: np.ndarray, mask: np.ndarray) -> None:
        batch, num_arms, dim = arms.shape
        inverse = np.linalg.pinv(self.gram, hermitian=True)  # LinNash's gram has no ridge
        theta = np.einsum("bij,bj->bi", inverse, self.target)
        values = np.einsum("bkd,bd->bk", arms, theta)
        if self.width == "bernstein":
            norms = np.sqrt(np.einsum("bki,bij,bkj->bk", arms, inverse, arms))
            spread = bernstein_width(norms, self.reward_sum / self.length, self.length, num_arms, 1.0 / self.horizon)
            lowest = np.where(mask, values - spread, -np.inf).max(axis=1, keepdims=True)
            keep = values + spread >= lowest
        else:
            best = np.where(mask, values, -np.inf).max(axis=1)
            spread = linnash_part1_width(best, dim, self.length, self.horizon, num_arms, scale=self.linnash_scale)
            keep = values >= (best - spread)[:, None]
        self.survivors = mask & keep
        if self.share_phase1:
            for x, r in self.history:
                self.base.update(x, r)
        self.history = []

    def active(self) -> np.ndarray | None:
        """The arms still active ``(B, K)``: Phase 1's survivors and, after it, the base policy's active set."""
        if self.survivors is None:
            return None
        inner = active_arms(self.base) if self.t > (self.length or 0) else None
        return self.survivors if inner is None else self.survivors & inner

    def update(self, x: np.ndarray, r: np.ndarray) -> None:
        if self.t < (self.length or 0):
            self.gram += np.einsum("bi,bj->bij", x, x)
            self.target += r[:, None] * x
            self.reward_sum += r
            if self.share_phase1:
                self.history.append((x, r))
        else:
            self.base.update(x, r)
        self.t += 1


def active_arms(policy) -> np.ndarray | None:
    """The active arms ``(B, K)`` of a policy that eliminates (None for one that keeps every arm, or has not
    started)."""
    if isinstance(policy, FairLinBandit):
        return policy.active()
    return getattr(policy, "active", None)


def linnash(
    horizon: int,
    dim: int,
    num_arms: int,
    rng: np.random.Generator,
    multiplier: float = 3.0,
    width_scale: float = 1.0,
):
    """LinNash (Sawarni, Pal & Barman 2023): Part I of ``multiplier sqrt(T d log(T K))`` rounds drawn by its
    GenerateArmSequence (a fair coin between a uniform arm and the capped round-robin over the design), least
    squares without ridge and its Part I elimination, then :class:`LinNashElimination`; no data is shared
    across parts. ``width_scale`` multiplies both elimination constants (16 of Part I, 6 of Part II's NCB).
    Published: ``multiplier = 3``, ``width_scale = 1``. Sources of every constant:
    :mod:`zoo.fair_lin_bandit.module`, item 7."""
    length = min(linnash_part1_length(horizon, dim, num_arms, multiplier), horizon)
    base = LinNashElimination(horizon, first_length=2.0 * length / 3.0, width_scale=width_scale)
    return FairLinBandit(
        base, horizon, rng=rng, width="linnash", length=length, ridge=0.0, share_phase1=False, sampler="linnash",
        linnash_scale=width_scale,
    )  # fmt: skip
