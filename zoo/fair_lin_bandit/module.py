"""FairLinBandit (Nash and p-means regret in linear bandits) as a LightningModule.

Paper: *Improved Algorithms for Nash Welfare in Linear Bandits*, arXiv:2601.22969. Only the abstract was
available when this was written; the authors' experiment code (NP-Hardest/FairLinBandit) was found later and
is compared in item 7. The algorithm below is reconstructed (R) around the abstract and LinNash
(A. Sawarni, S. Pal, S. Barman, *Nash Regret Guarantees for Linear Bandits*, NeurIPS 2023, arXiv:2310.02023).

What is implemented (plain numpy in :mod:`.regret`, :mod:`.design`, :mod:`.policies`, :mod:`.fair`,
:mod:`.elimination`, :mod:`.oful`, :mod:`.instances`):

* p-means regret ``R_p = mu* - M_p(E[mu_{x_1}], ..., E[mu_{x_T}])`` for any ``p <= 1`` (Nash at p = 0, the
  minimum at -inf), with the per-round expectation inside the mean, and the per-run ("realised") version.
* The G-optimal design by Frank-Wolfe, Phase 1 fair exploration, the Bernstein-type width, and Phase 2 with
  phased elimination (``fair_pe``) or OFUL (``fair_ucb``). :class:`~.fair.FairLinBandit` wraps any policy
  with ``select(arms, mask)`` / ``update(x, r)``.
* LinNash: Part I by its GenerateArmSequence for ``3 sqrt(T d nu log(T K))`` rounds, its Part I elimination
  (``16 sqrt(3 gamma nu d log(T K) / T~)``), then phased elimination with Nash confidence bounds
  ``<x, theta> +- 6 sqrt(<x, theta> nu d log(T K) / T')``, ``T'`` from ``2/3 T~`` doubling, ``nu = 1``.
* Simulation batched over independent runs (the leading dimension of every array).

Reconstruction choices and deviations (R):

1. Phase 1 length ``T1 = ceil(c1 sqrt(T d log(T K)) (1 + max(0, -p))**0.5)``; ``c1`` tuned on validation
   instances (seeds 100-109; the grid and the winner are in the card). The target p is 0 (Nash) in the
   evaluation and every R_p is reported from that one run (the spec's "report the whole R_p curve").
2. Phase 1 samples ``x ~ 1/2 lambda_G + 1/2 Unif(supp lambda_G)``; Frank-Wolfe with away steps (Wolfe-Atwood)
   from a greedy spanning start, stopped at ``max ||x||^2_{V^-1} <= 1.01 d``; up to 500 iterations, not the
   spec's 200 (200 left some instances at 1.0106 d). On a rank-deficient active set d is the rank.
3. Elimination after Phase 1: ridge (lambda = 1) least squares on Phase 1's data; keep ``x`` iff ``<x, theta>
   + w(x) >= max_y (<y, theta> - w(y))`` with ``w(x) = ||x||_{V^-1} (sqrt(2 log(2K/delta) max(nu_hat, 1/T1))
   + log(2K/delta)/T1 ||x||_{V^-1})``, ``delta = 1/T``, ``nu_hat`` the mean Phase 1 reward. We take this
   multiplicative Bernstein width to be the paper's "new analytical tool" (the abstract names none).
4. Phase 1's data warm-starts the base policy (OFUL's V and b); phased elimination restarts its estimate
   every phase, so it ignores them. LinNash shares nothing across its parts, as published.
5. PE: ``eps_l = 2**-l``, each design support arm pulled ``ceil(2 sigma^2 d pi(x) log(K l (l+1)/delta) /
   eps_l**2)`` times in a block with the Bernoulli noise proxy sigma = 1/2, as for OFUL (the spec's count has
   ``2 d``, i.e. sigma = 1: four times longer phases, which left PE in its eps = 1/4 phase at T = 20k);
   eliminate ``x`` if ``max_y <theta_l, y - x> > 2 eps_l``; least squares by pseudo-inverse.
6. OFUL: ``beta_t = sqrt(lambda) S + 1/2 sqrt(2 log(1/delta) + d log(1 + t/(lambda d)))`` (S = 1, noise
   proxy 1/2 for Bernoulli), ties broken by the lowest index.
7. LinNash, and where each constant comes from. Its paper's algorithm box could not be read here: the stored
   copies of the paper (the NeurIPS 2023 text, the arXiv 2310.02023 source) answer searches with their opening
   only. Two public implementations were read instead (read, not copied):

   * dhruv-sarkar/LinNash (``main.py``, ``exact.py``; by the FairLinBandit paper's first author):
     ``T~ = 3 sqrt(T d nu log(T |X|))``; Part I is GenerateArmSequence (each round a fair coin: a draw from
     ``U``, or the next design support arm in round-robin order until it has ``ceil(lambda_x T~ / 3)`` such
     pulls); Part II ``T' = 2/3 T~``, doubling, every design arm pulled ``ceil(lambda_x T')`` times, estimate
     from the phase's data, keep ``x`` iff ``UNCB(x) >= max_z LNCB(z)``, ``NCB = <x, theta> +- 6 sqrt(<x,
     theta> nu d log(T |X|) / T')``.
   * NP-Hardest/FairLinBandit (``algorithms/linnash.py``; the FairLinBandit paper's own experiment code): the
     same GenerateArmSequence and ``T'`` schedule; after Part I keep ``x`` iff ``<x, theta> >= gamma - 16
     sqrt(3 gamma nu d^2.5 log T / T~)`` (``gamma`` the largest estimate), with ``T~ = 3 sqrt(T d^2.5 nu log
     T)``: the infinite-arm variant.

   We use the finite-arm ``d log(T K)`` everywhere (K = 200), the multiplier 3, the Part I rule ``gamma - 16
   sqrt(3 gamma nu d log(T K) / T~)``, Part II's NCB with 6, ``nu = 1`` (Bernoulli rewards are 1-sub-Poisson)
   and least squares without ridge. ``U`` is uniform over the arms: both codes compute a John-ellipsoid proxy
   (the Chebyshev centre of the convex hull), but in the official code that call always falls back to
   uniform (it reads an attribute the class never sets), and the hull of 200 points in d = 10 did not finish
   in two minutes here. dhruv-sarkar's Part I elimination is the NCB at ``T~/3`` instead of the 16 rule; we
   follow the FairLinBandit authors' baseline. The Part I multiplier (3) is tuned on the validation
   instances with as many trials as c1. With these constants LinNash eliminates no arm before T = 20k on our
   instances (the Part II width at ``gamma = 0.9`` is 1.19 at ``T' = 2/3 T~``): a weak baseline, as published.
   The evaluation therefore runs two LinNash arms: ``linnash_published`` (multiplier 3, widths 16 and 6) and
   ``linnash``, whose Part I multiplier and a common scale of both width constants are tuned on the validation
   instances (a grid of more trials than c1 gets, extended past a winning edge), so that it eliminates arms
   within T.
   The FairLinBandit authors' code also holds their own FairLinPE/FairLinUCB (an adaptive, doubling Phase 1
   from ``36 log T`` rounds with a stopping rule, widths ``8 sqrt(d^2 sigma^2 log T / T~)``). Their constants
   suit their reward scale (learning-to-rank labels with Gaussian noise); with Bernoulli rewards in [0, 1]
   and d = 10 their Phase 1 cannot stop before ``4 sigma d sqrt(3 log T / t) < 0.9``, i.e. t > 14.7k of the
   20k rounds, so we keep the reconstruction above and only record the differences.
8. ``E[mu_{x_t}]`` is estimated per instance by averaging, over ``replicates`` independent runs, the
   conditional expectation ``sum_x P(x_t = x | history) mu_x`` (Rao-Blackwellised: exact for Phase 1's and
   uniform's random draws, ``mu_{x_t}`` for deterministic choices). The evaluation's seeds are instances
   (arm samples); their R_p are averaged over seeds.
9. Instances (:mod:`.instances`): river's Shuttle, Yeast, Phishing and SolarFlare and a synthetic control,
   built as the spec says (NNLS theta*, max mu 0.9, floor 0.01, K = 200). The paper's datasets and instance
   construction are not available. The evaluation runs their decoy variants (``<name>_decoy``, not in the
   spec): 3 non-best arms replaced by unit vectors along 3 new coordinates with theta* = 0.01 there, so the
   model stays linear, every other mean is unchanged, and a regret-minimising policy spends early rounds on
   arms of mean 0.01 (on the spec's instances OFUL's worst rounds are not low, and p-means fairness has
   little to act on). c1 = 0 (Phase 1 off) is in c1's grid.
10. ``algorithm`` covers every arm of the evaluation (the spec's ``base="pe"|"ucb"`` is ``fair_pe`` /
    ``fair_ucb``), so baselines and ablations run through the same module.

Lightning. There are no learned weights: ``validation_step`` / ``test_step`` run the whole bandit loop on one
instance from :class:`~.data.LinearBanditDataModule` and log ``R_p`` for p in {1, 0.5, 0, -1, -5} (with the
expectation over replicates and realised); the mean-reward curve of the last episode is kept in
``self.curves``. ``forward(arms, mu, horizon)`` returns the per-round expected reward of a run.
``zoo.load(name, pretrained=True)`` raises ``NoPretrainedWeightsError`` (the registry publishes no weights).
"""

from __future__ import annotations

import lightning.pytorch as pl
import numpy as np
import torch

from zoo._distributed import refuse_distributed
from zoo._inference import PretrainedMixin
from zoo.fair_lin_bandit.instances import check_instance
from zoo.fair_lin_bandit.policies import ALGORITHMS, run_episode
from zoo.fair_lin_bandit.regret import P_TAGS, check_p, regret_table


class FairLinBanditModule(PretrainedMixin, pl.LightningModule):
    """A linear bandit algorithm run on the instances of a datamodule; no gradients, no weights.

    Args:
        algorithm: One of ``fair_pe``, ``fair_ucb`` (the paper's two instantiations), ``linnash`` (scaled
            constants), ``linnash_published``, ``fair_pe_linnash_width``, ``pe``, ``oful``, ``uniform``.
        p: The p whose p-means regret FairLinBandit targets (sets its Phase 1 length); ``p <= 1``.
        horizon: T.
        c1: FairLinBandit's Phase 1 constant (0: no Phase 1, the base policy alone).
        linnash_multiplier: LinNash's Part I multiplier (3 in its paper).
        linnash_width_scale: Multiplies LinNash's elimination constants 16 and 6 (1 in its paper).
        replicates: Independent runs per instance (the batch dimension; they estimate ``E[mu_{x_t}]``).
        seed: Seed of the runs' randomness.
    """

    def __init__(
        self,
        algorithm: str = "fair_pe",
        p: float = 0.0,
        horizon: int = 20_000,
        c1: float = 1.0,
        linnash_multiplier: float = 3.0,
        replicates: int = 8,
        linnash_width_scale: float = 1.0,
        seed: int = 0,
    ):
        super().__init__()
        if algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
        check_p(p)
        if horizon < 1 or replicates < 1:
            raise ValueError(f"horizon and replicates must be >= 1, got {horizon} and {replicates}")
        if c1 < 0 or linnash_multiplier <= 0 or linnash_width_scale <= 0:
            raise ValueError("c1 must be >= 0, linnash_multiplier and linnash_width_scale > 0")
        self.save_hyperparameters()
        self.example_input_array = (
            torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [0.8, 0.6]]], dtype=torch.float64),
            torch.tensor([[0.2, 0.9, 0.7, 0.5]], dtype=torch.float64),
            torch.tensor(64),
        )
        self.curves: dict[str, np.ndarray] = {}

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        raise NotImplementedError(
            "FairLinBandit has no learned weights; build it with zoo.load('fair_lin_bandit') and pass an instance "
            "(LinearBanditDataModule or forward(arms, mu, horizon))"
        )

    def _policy_args(self) -> dict:
        h = self.hparams
        return {
            "p": h.p,
            "c1": h.c1,
            "linnash_multiplier": h.linnash_multiplier,
            "linnash_width_scale": h.get("linnash_width_scale", 1.0),
        }

    def run(self, arms: np.ndarray, mu: np.ndarray, horizon: int | None = None, seed: int | None = None) -> dict:
        """Run the algorithm on one instance (``arms (K, d)``, ``mu (K,)``); :func:`~.policies.simulate`'s arrays."""
        h = self.hparams
        check_instance(arms, None, mu, p=min(h.p, 0.0))
        return run_episode(
            h.algorithm, arms, mu, horizon or h.horizon, h.seed if seed is None else seed, h.replicates,
            **self._policy_args(),
        )  # fmt: skip

    def forward(self, arms: torch.Tensor, mu: torch.Tensor, horizon: torch.Tensor) -> torch.Tensor:
        """Per-round expected reward ``(B, T)`` (mean over replicates) for each instance of the batch."""
        curves = [
            self.run(a.double().cpu().numpy(), m.double().cpu().numpy(), int(horizon))["expected"].mean(axis=0)
            for a, m in zip(arms, mu, strict=True)
        ]
        return torch.from_numpy(np.stack(curves))

    def setup(self, stage: str) -> None:
        reason = "each process would run the bandit on only its share of the instances and log a partial mean"
        refuse_distributed(self, reason, stage, stages=("fit", "validate", "test", "predict"))

    def _episode(self, batch: dict, stage: str) -> None:
        arms, mu = batch["arms"].double().numpy(), batch["mu"].double().numpy()
        check_instance(arms, batch.get("theta"), mu, p=min(self.hparams.p, 0.0))
        outcome = self.run(arms, mu, seed=self.hparams.seed + int(batch.get("seed", 0)))
        table = regret_table(outcome["expected"], outcome["realised"], float(mu.max()), tuple(P_TAGS))
        self.curves[str(batch.get("name", "instance"))] = outcome["expected"].mean(axis=0)
        for key, value in table.items():
            self.log(f"{stage}/{key}", value, batch_size=1)

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._episode(batch, "val")

    def test_step(self, batch: dict, batch_idx: int) -> None:
        self._episode(batch, "test")

    def configure_optimizers(self):
        return None  # a bandit algorithm has nothing to train by gradient
