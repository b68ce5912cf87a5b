"""Linear bandit policies, batched over episodes (seeds as the leading dimension), in plain numpy.

Every policy works on a batch of ``B`` independent episodes at once: ``select(arms, mask)`` takes the arm
features ``(B, K, d)`` and the active arms ``(B, K)`` and returns one arm index per episode; ``update(x, r)``
takes the pulled features ``(B, d)`` and rewards ``(B,)``. A single run is ``B = 1``. After ``select`` a
randomised policy leaves its choice distribution in ``last_probs`` ``(B, K)`` (None when the choice was
deterministic given the history), so the simulator can record ``E[mu_{x_t} | history]``.

:class:`FairLinBandit` wraps any such policy: Phase 1 fair exploration, the Bernstein-type elimination, then
the base policy on the surviving arms. See :mod:`zoo.fair_lin_bandit.module` for every reconstruction choice.
"""

from __future__ import annotations

import math

import numpy as np

from zoo.fair_lin_bandit.design import g_optimal_design
from zoo.fair_lin_bandit.regret import check_p

NOISE_PROXY = 0.5  # sub-Gaussian proxy of a Bernoulli reward


def _batched(arms: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    if arms.ndim != 3:
        raise ValueError(f"arms must be (B, K, d), got shape {arms.shape}")
    if arms.shape[1] < 2:
        raise ValueError(f"a bandit needs K >= 2 arms, got K={arms.shape[1]}")
    return np.ones(arms.shape[:2], bool) if mask is None else np.asarray(mask, bool)


def sample_from(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One index per row of ``probs`` ``(B, K)`` (inverse CDF)."""
    cdf = np.cumsum(probs, axis=1)
    draws = rng.random(len(probs)) * cdf[:, -1]
    return np.minimum((cdf < draws[:, None]).sum(axis=1), probs.shape[1] - 1)


class UniformPolicy:
    """Pull an active arm uniformly at random (the sanity floor)."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.last_probs = None

    def select(self, arms: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        mask = _batched(arms, mask)
        self.last_probs = mask / mask.sum(axis=1, keepdims=True)
        return sample_from(self.last_probs, self.rng)

    def update(self, x: np.ndarray, r: np.ndarray) -> None:
        pass


def oful_beta(t: int, dim: int, delta: float, ridge: float = 1.0, norm_bound: float = 1.0) -> float:
    """OFUL's radius ``sqrt(lambda) S + sigma sqrt(2 log(1/delta) + d log(1 + t/(lambda d)))`` (sigma = 1/2)."""
    return math.sqrt(ridge) * norm_bound + NOISE_PROXY * math.sqrt(
        2 * math.log(1 / delta) + dim * math.log(1 + t / (ridge * dim))
    )


class OFUL:
    """OFUL / LinUCB with a shared parameter: pull ``argmax <x, theta_hat> + beta_t ||x||_{V^-1}``.

    ``V^-1`` is kept by Sherman-Morrison and every arm's ``||x||^2_{V^-1}`` by the matching rank-one
    correction, so a round costs ``O(B K d)``.

    Args:
        horizon: T (``delta = 1/T`` unless given).
        ridge: lambda.
        delta: Confidence level of beta_t.
        beta: A fixed radius instead of beta_t (used to compare with MABWiser's LinUCB).
    """

    def __init__(self, horizon: int, ridge: float = 1.0, delta: float | None = None, beta: float | None = None):
        self.horizon, self.ridge, self.beta = horizon, ridge, beta
        self.delta = 1.0 / horizon if delta is None else delta
        self.last_probs = None
        self._state = None
        self._arms = None

    def _init(self, batch: int, dim: int) -> None:
        self.inverse = np.tile(np.eye(dim) / self.ridge, (batch, 1, 1))
        self.target = np.zeros((batch, dim))
        self.theta = np.zeros((batch, dim))
        self.t = 0
        self._state = (batch, dim)

    def radius(self) -> float:
        return self.beta if self.beta is not None else oful_beta(self.t, self._state[1], self.delta, self.ridge)

    def select(self, arms: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        mask = _batched(arms, mask)
        if self._state is None:
            self._init(arms.shape[0], arms.shape[2])
        if self._arms is not arms:  # new arm set: recompute the norms from V^-1 once
            self._arms = arms
            self._norms = np.einsum("bki,bij,bkj->bk", arms, self.inverse, arms)
        estimate = np.einsum("bkd,bd->bk", arms, self.theta)
        scores = estimate + self.radius() * np.sqrt(np.maximum(self._norms, 0.0))
        return np.where(mask, scores, -np.inf).argmax(axis=1)

    def update(self, x: np.ndarray, r: np.ndarray) -> None:
        if self._state is None:
            self._init(x.shape[0], x.shape[1])
        u = np.einsum("bij,bj->bi", self.inverse, x)
        denom = 1.0 + np.einsum("bi,bi->b", x, u)
        self.inverse -= np.einsum("bi,bj->bij", u, u) / denom[:, None, None]
        if self._arms is not None:
            projection = np.einsum("bkd,bd->bk", self._arms, u)
            self._norms -= projection**2 / denom[:, None]
        self.target += r[:, None] * x
        self.theta = np.einsum("bij,bj->bi", self.inverse, self.target)
        self.t += 1


class _Scheduled:
    """A policy that pulls a per-episode schedule of arms and, when it runs out, starts the next phase."""

    def __init__(self):
        self.last_probs = None
        self._schedule = None

    def _next_phase(self, b: int) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _start(self, arms: np.ndarray, mask: np.ndarray) -> None:
        batch, num_arms, dim = arms.shape
        self.arms = arms
        self.active = mask.copy()
        self.phase = np.zeros(batch, int)
        self.queue = np.zeros((batch, 1), int)  # padded per-episode schedules of the current phase
        self.queue_length = np.zeros(batch, int)
        self.position = np.zeros(batch, int)
        self.gram = np.zeros((batch, dim, dim))
        self.target = np.zeros((batch, dim))
        self._schedule = True

    def select(self, arms: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        mask = _batched(arms, mask)
        if self._schedule is None:
            self._start(arms, mask)
        for b in np.flatnonzero(self.position >= self.queue_length):  # phase ends: rare, per episode
            schedule = self._next_phase(b)
            if len(schedule) > self.queue.shape[1]:
                grown = np.zeros((len(self.queue), len(schedule)), int)
                grown[:, : self.queue.shape[1]] = self.queue
                self.queue = grown
            self.queue[b, : len(schedule)] = schedule
            self.queue_length[b] = len(schedule)
            self.position[b] = 0
        chosen = self.queue[np.arange(len(arms)), self.position]
        self.position += 1
        return chosen

    def update(self, x: np.ndarray, r: np.ndarray) -> None:
        if self._schedule is None:
            return  # data before the first phase (e.g. a wrapper's Phase 1) is not part of any phase
        self.gram += np.einsum("bi,bj->bij", x, x)
        self.target += r[:, None] * x

    def _estimate(self, b: int) -> np.ndarray:
        theta = np.linalg.pinv(self.gram[b], rcond=1e-10, hermitian=True) @ self.target[b]
        self.gram[b] = 0.0
        self.target[b] = 0.0
        return theta

    def _design_schedule(self, b: int, counts_per_weight) -> np.ndarray:
        weights = g_optimal_design(self.arms[b], self.active[b])
        support = np.flatnonzero(weights > 1e-9)
        counts = np.maximum(np.ceil(counts_per_weight(weights[support])).astype(int), 1)
        return np.repeat(support, counts)


class PhasedElimination(_Scheduled):
    """Phased elimination with G-optimal designs (Lattimore & Szepesvari, ch. 22).

    Phase ``l = 1, 2, ...`` with ``eps_l = 2**-l``: pull every support arm of the design on the active set
    ``ceil(2 sigma^2 d pi(x) log(K l (l + 1) / delta) / eps_l**2)`` times (sigma = 1/2, Bernoulli), refit
    theta on the phase's data, and
    eliminate ``x`` if ``max_y <theta, y - x> > 2 eps_l``.

    Args:
        horizon: T (``delta = 1/T`` unless given).
        delta: Confidence level.
    """

    def __init__(self, horizon: int, delta: float | None = None):
        super().__init__()
        self.delta = 1.0 / horizon if delta is None else delta
        self.eliminated_log: list[list[int]] | None = None

    def _next_phase(self, b: int) -> np.ndarray:
        batch, num_arms, dim = self.arms.shape
        if self.eliminated_log is None:
            self.eliminated_log = [[] for _ in range(batch)]
        level = self.phase[b]
        if level > 0:
            theta = self._estimate(b)
            values = self.arms[b] @ theta
            best = values[self.active[b]].max()
            drop = self.active[b] & (best - values > 2 * 2.0**-level)
            self.active[b] &= ~drop
            self.eliminated_log[b] += np.flatnonzero(drop).tolist()
        level += 1
        self.phase[b] = level
        if self.active[b].sum() == 1:
            return np.repeat(np.flatnonzero(self.active[b]), 1 << 16)
        log_term = math.log(num_arms * level * (level + 1) / self.delta)
        scale = 2 * NOISE_PROXY**2  # 2 sigma^2 with the Bernoulli proxy sigma = 1/2 (the spec's 2 is sigma = 1)
        return self._design_schedule(b, lambda w: scale * dim * w * log_term / 4.0**-level)


def linnash_log(horizon: int, num_arms: int) -> float:
    return math.log(horizon * num_arms)


class LinNashElimination(_Scheduled):
    """LinNash Part II (Sawarni, Pal & Barman 2023): phased elimination with Nash confidence bounds.

    Constants (sources in :mod:`zoo.fair_lin_bandit.module`, item 7): ``T'`` starts at ``2/3`` of Part I's
    length and doubles, every design arm is pulled ``ceil(lambda_x T')`` times (both public re-implementations);
    the NCB multiplier 6 and ``nu d log(T K)`` are the finite-arm LNCB/UNCB of dhruv-sarkar/LinNash.

    Phase length ``T'`` starts at ``2/3`` of Part I's length and doubles; each phase pulls every support arm of
    the D-optimal design on the active set ``ceil(lambda_x T')`` times, refits theta on the phase's data and
    keeps ``x`` iff ``UNCB(x) >= max_z LNCB(z)`` with ``NCB = <x, theta> +- 6 sqrt(max(<x, theta>, 0) nu d
    log(T K) / T')``.

    Args:
        horizon: T.
        first_length: T' of the first phase (2/3 of Part I's length).
        nu: Sub-Poisson parameter of the rewards (1 for Bernoulli).
    """

    WIDTH = 6.0

    def __init__(self, horizon: int, first_length: float, nu: float = 1.0):
        super().__init__()
        self.horizon, self.first_length, self.nu = horizon, first_length, nu

    def width(self, values: np.ndarray, dim: int, num_arms: int, length: float) -> np.ndarray:
        log_term = linnash_log(self.horizon, num_arms)
        return self.WIDTH * np.sqrt(np.maximum(values, 0.0) * self.nu * dim * log_term / length)

    def _next_phase(self, b: int) -> np.ndarray:
        _, num_arms, dim = self.arms.shape
        if self.phase[b] > 0:
            length = self.first_length * 2.0 ** (self.phase[b] - 1)
            values = self.arms[b] @ self._estimate(b)
            spread = self.width(values, dim, num_arms, length)
            lowest = (values - spread)[self.active[b]].max()
            self.active[b] &= values + spread >= lowest
        self.phase[b] += 1
        if self.active[b].sum() == 1:
            return np.repeat(np.flatnonzero(self.active[b]), 1 << 16)
        length = self.first_length * 2.0 ** (self.phase[b] - 1)
        return self._design_schedule(b, lambda w: w * length)


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


def linnash_part1_width(best: np.ndarray, dim: int, length: int, horizon: int, num_arms: int, nu: float = 1.0):
    """LinNash's Part I elimination width ``16 sqrt(3 gamma nu d log(T K) / T~)`` with gamma = max estimate.

    The form ``x`` kept iff ``<x, theta> >= gamma - 16 sqrt(3 gamma ...)`` is the one in the FairLinBandit
    authors' LinNash baseline (NP-Hardest/FairLinBandit, ``algorithms/linnash.py``), which writes the infinite-arm
    ``d**2.5 log T`` where the finite-arm algorithm has ``d log(T |X|)``.
    """
    return 16.0 * np.sqrt(3.0 * np.maximum(best, 0.0) * nu * dim * linnash_log(horizon, num_arms) / length)


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
    ):
        check_p(p)
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
        mask = _batched(arms, mask)
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
            spread = linnash_part1_width(best, dim, self.length, self.horizon, num_arms)
            keep = values >= (best - spread)[:, None]
        self.survivors = mask & keep
        if self.share_phase1:
            for x, r in self.history:
                self.base.update(x, r)
        self.history = []

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


def linnash(horizon: int, dim: int, num_arms: int, rng: np.random.Generator, multiplier: float = 3.0):
    """LinNash (Sawarni, Pal & Barman 2023): Part I of ``multiplier sqrt(T d log(T K))`` rounds drawn by its
    GenerateArmSequence (a fair coin between a uniform arm and the capped round-robin over the design), least
    squares without ridge and its Part I elimination, then :class:`LinNashElimination`; no data is shared
    across parts. Sources of every constant: :mod:`zoo.fair_lin_bandit.module`, item 7."""
    length = min(linnash_part1_length(horizon, dim, num_arms, multiplier), horizon)
    base = LinNashElimination(horizon, first_length=2.0 * length / 3.0)
    return FairLinBandit(
        base, horizon, rng=rng, width="linnash", length=length, ridge=0.0, share_phase1=False, sampler="linnash"
    )


def simulate(policy, arms: np.ndarray, mu: np.ndarray, horizon: int, rng: np.random.Generator) -> dict:
    """Run ``policy`` for ``horizon`` rounds on a batch of episodes with Bernoulli(mu) rewards.

    Args:
        policy: A batched policy.
        arms: ``(B, K, d)``.
        mu: ``(B, K)`` arm means in [0, 1].
        horizon: T.
        rng: Randomness of the rewards.

    Returns:
        ``{"expected": (B, T), "realised": (B, T), "chosen": (B, T)}``: the conditional expected mean reward
        ``sum_x P(x_t = x | history) mu_x``, the mean of the arm pulled, and its index.
    """
    batch = arms.shape[0]
    rows = np.arange(batch)
    expected = np.empty((batch, horizon))
    realised = np.empty((batch, horizon))
    chosen = np.empty((batch, horizon), dtype=np.int32)
    uniforms = rng.random((batch, horizon))
    for t in range(horizon):
        index = policy.select(arms, None)
        means = mu[rows, index]
        probs = getattr(policy, "last_probs", None)
        expected[:, t] = means if probs is None else (probs * mu).sum(axis=1)
        realised[:, t] = means
        chosen[:, t] = index
        policy.update(arms[rows, index], (uniforms[:, t] < means).astype(np.float64))
    return {"expected": expected, "realised": realised, "chosen": chosen}


ALGORITHMS = ("fair_pe", "fair_ucb", "linnash", "fair_pe_linnash_width", "pe", "oful", "uniform")


def make_policy(
    algorithm: str,
    horizon: int,
    dim: int,
    num_arms: int,
    rng: np.random.Generator,
    p: float = 0.0,
    c1: float = 1.0,
    linnash_multiplier: float = 3.0,
):
    """A fresh batched policy by name (the evaluation's arms).

    Args:
        algorithm: One of :data:`ALGORITHMS`.
        horizon: T.
        dim: d.
        num_arms: K.
        rng: The policy's randomness.
        p: Target p of FairLinBandit (sets its Phase 1 length).
        c1: FairLinBandit's Phase 1 constant.
        linnash_multiplier: LinNash's Part I multiplier (3 as published).
    """
    check_p(p)
    if algorithm == "fair_pe":
        return FairLinBandit(PhasedElimination(horizon), horizon, p=p, c1=c1, rng=rng)
    if algorithm == "fair_ucb":
        return FairLinBandit(OFUL(horizon), horizon, p=p, c1=c1, rng=rng)
    if algorithm == "fair_pe_linnash_width":
        return FairLinBandit(PhasedElimination(horizon), horizon, p=p, c1=c1, rng=rng, width="linnash")
    if algorithm == "linnash":
        return linnash(horizon, dim, num_arms, rng, linnash_multiplier)
    if algorithm == "pe":
        return PhasedElimination(horizon)
    if algorithm == "oful":
        return OFUL(horizon)
    if algorithm == "uniform":
        return UniformPolicy(rng)
    raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {', '.join(ALGORITHMS)}")


def run_episode(
    algorithm: str,
    arms: np.ndarray,
    mu: np.ndarray,
    horizon: int,
    seed: int,
    replicates: int = 8,
    **policy_args,
) -> dict:
    """Run ``replicates`` independent copies of ``algorithm`` on one instance, batched.

    Args:
        algorithm: One of :data:`ALGORITHMS`.
        arms: ``(K, d)``.
        mu: ``(K,)``.
        horizon: T.
        seed: Seed of the policy's and the rewards' randomness.
        replicates: Independent runs (the batch dimension); their average estimates ``E[mu_{x_t}]``.
        **policy_args: ``p``, ``c1``, ``linnash_multiplier``.

    Returns:
        :func:`simulate`'s arrays, each ``(replicates, T)``.
    """
    arms, mu = np.asarray(arms, np.float64), np.asarray(mu, np.float64)
    if arms.ndim != 2 or mu.shape != arms.shape[:1]:
        raise ValueError(f"arms must be (K, d) and mu (K,), got {arms.shape} and {mu.shape}")
    if arms.shape[0] < 2:
        raise ValueError(f"a bandit needs K >= 2 arms, got K={arms.shape[0]}")
    if replicates < 1 or horizon < 1:
        raise ValueError(f"replicates and horizon must be >= 1, got {replicates} and {horizon}")
    rng = np.random.default_rng([seed, horizon, ALGORITHMS.index(algorithm) if algorithm in ALGORITHMS else 0])
    policy = make_policy(algorithm, horizon, arms.shape[1], arms.shape[0], rng, **policy_args)
    batch_arms = np.broadcast_to(arms, (replicates, *arms.shape))
    return simulate(policy, batch_arms, np.broadcast_to(mu, (replicates, len(mu))), horizon, rng)
