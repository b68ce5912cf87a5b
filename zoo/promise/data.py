"""``ProMiSEDataModule``: AdK's training exposure for the DDPM and the benchmark target for the harness.

* The PCA basis (top-K components, whitened) comes from the aligned frames of the two DIMS runs; the TMD run
  is held out (its frames score path fidelity only).
* Training items ("exposure"): ``n_train`` frames drawn (with replacement, data ``seed``) from the DIMS frames,
  a fraction ``exposure`` from the closed half (frames nearer the closed than the open state) and the rest
  from the open half. Closed-half items are tagged ``ligand`` with probability ``ligand_tag_prob``, every other
  item ``apo`` (``tagging="state"``, the spec); ``tagging="independent"`` tags every item ``ligand`` with that
  probability whatever its state (the context then carries no information about the state: a variant tried on
  validation, see :mod:`zoo.promise.module`). Batches are ``(whitened PC coefficients (B, K), context id (B,))``.
* Validation / test batches are ensemble indices: the module samples the ensembles itself (``val_ensembles`` /
  ``test_ensembles`` of them, sampling seeds disjoint between the two) and scores them on :meth:`targets`.
"""

from __future__ import annotations

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

from zoo.promise.ddpm import CONTEXT_IDS, encode, fit_pca
from zoo.promise.harness import Target
from zoo.promise.metrics import kabsch_rmsd
from zoo.promise.structures import HELD_OUT_TRAJECTORY, STATE_NAMES, TRAIN_TRAJECTORIES, load_adk

#: First sampling seed of the validation ensembles and of the test ensembles (ensemble k uses seed + k).
VAL_SAMPLE_SEED = 1_000_000
TEST_SAMPLE_SEED = 0
#: How training items get their context tag (see the module docstring).
TAGGINGS = ("state", "independent")


class ProMiSEDataModule(pl.LightningDataModule):
    """AdK states, transitions, PCA encoder and the biased training exposure.

    Args:
        exposure: Fraction of training items from the closed half (0.85: the spec's biased exposure).
        n_train: Training items drawn.
        ligand_tag_prob: Probability that a closed-half item is tagged ``ligand`` (else ``apo``).
        tagging: ``"state"`` (the spec: only closed-half items can be tagged ``ligand``) or ``"independent"``
            (any item is tagged ``ligand`` with ``ligand_tag_prob``, independently of its state).
        n_components: PCA components K.
        batch_size: Training batch size.
        steps_per_epoch: Batches per training epoch (drawn with replacement from the items).
        val_ensembles: Ensembles per context in each validation run.
        test_ensembles: Ensembles per context in a test run.
        seed: Seed of the item draw and of the context tags (fixed across training seeds).
    """

    def __init__(
        self,
        exposure: float = 0.85,
        n_train: int = 400,
        ligand_tag_prob: float = 0.5,
        tagging: str = "state",
        n_components: int = 8,
        batch_size: int = 128,
        steps_per_epoch: int = 500,
        val_ensembles: int = 4,
        test_ensembles: int = 20,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if not 0.0 < exposure < 1.0:
            raise ValueError(f"exposure must be in (0, 1) (both halves are seen), got {exposure}")
        if not 0.0 <= ligand_tag_prob <= 1.0:
            raise ValueError(f"ligand_tag_prob must be in [0, 1], got {ligand_tag_prob}")
        if tagging not in TAGGINGS:
            raise ValueError(f"tagging must be one of {', '.join(TAGGINGS)}, got {tagging!r}")
        if min(n_train, n_components, batch_size, steps_per_epoch, val_ensembles, test_ensembles) < 1:
            raise ValueError("n_train, n_components, batch_size, steps_per_epoch and the ensemble counts must be >= 1")
        self.save_hyperparameters()
        self._ready = False

    def setup(self, stage: str | None = None) -> None:
        if self._ready:
            return
        h = self.hparams
        adk = load_adk()
        self.states = torch.as_tensor(adk["states"])
        frames = torch.as_tensor(np.concatenate([adk["trajectories"][name] for name in TRAIN_TRAJECTORIES]))
        self.train_frames = frames
        self.path = torch.as_tensor(adk["trajectories"][HELD_OUT_TRAJECTORY])
        self.pca = fit_pca(frames, h.n_components)
        rmsd = kabsch_rmsd(frames.unsqueeze(1), self.states.unsqueeze(0))  # (F, 2)
        closed = STATE_NAMES.index("closed")
        closed_half = torch.nonzero(rmsd.argmin(dim=1) == closed).squeeze(1).numpy()
        open_half = torch.nonzero(rmsd.argmin(dim=1) != closed).squeeze(1).numpy()
        rng = np.random.default_rng(h.seed)
        n_closed = int(round(h.exposure * h.n_train))
        picks = np.concatenate(
            [rng.choice(closed_half, n_closed, replace=True), rng.choice(open_half, h.n_train - n_closed, replace=True)]
        )
        is_closed = np.arange(h.n_train) < n_closed
        taggable = is_closed if h.tagging == "state" else np.ones(h.n_train, dtype=bool)
        tags = np.where(taggable & (rng.random(h.n_train) < h.ligand_tag_prob), "ligand", "apo")
        self.items = picks
        self.contexts = torch.as_tensor([CONTEXT_IDS[tag] for tag in tags], dtype=torch.long)
        self.coefficients = encode(frames[picks], self.pca).float()
        frequency = torch.zeros(len(STATE_NAMES), dtype=torch.float64)
        frequency[closed] = float(is_closed.mean())
        frequency[1 - closed] = 1.0 - float(is_closed.mean())
        #: Fraction of training items nearest each state (open, closed): the importance weights' denominator.
        self.state_frequency = frequency
        self._ready = True

    def encoder(self) -> dict[str, torch.Tensor]:
        """What the module copies at fit time: PCA mean/basis/scale, reference states, training state frequency."""
        self.setup()
        return {
            "pca_mean": self.pca["mean"],
            "pca_basis": self.pca["basis"],
            "pca_scale": self.pca["scale"],
            "states": self.states,
            "state_frequency": self.state_frequency,
        }

    def targets(self) -> list[Target]:
        """The harness's targets: AdK open/closed, contexts apo and ligand (holo = closed), TMD path held out."""
        self.setup()
        return [
            Target(
                name="adk",
                states=self.states.numpy(),
                state_names=STATE_NAMES,
                holo_state=STATE_NAMES.index("closed"),
                apo_state=STATE_NAMES.index("open"),
                mechanism="ligand-induced (emulated: Ap5A is not in the files)",
                path=self.path.numpy(),
            )
        ]

    def train_dataloader(self) -> DataLoader:
        self.setup()
        dataset = TensorDataset(self.coefficients, self.contexts)
        sampler = RandomSampler(
            dataset, replacement=True, num_samples=self.hparams.batch_size * self.hparams.steps_per_epoch
        )
        return DataLoader(dataset, batch_size=self.hparams.batch_size, sampler=sampler)

    def _ensembles(self, count: int, first_seed: int) -> DataLoader:
        seeds = torch.arange(first_seed, first_seed + count)
        return DataLoader(TensorDataset(seeds), batch_size=count, shuffle=False)  # one batch: sampled together

    def val_dataloader(self) -> DataLoader:
        return self._ensembles(self.hparams.val_ensembles, VAL_SAMPLE_SEED)

    def test_dataloader(self) -> DataLoader:
        return self._ensembles(self.hparams.test_ensembles, TEST_SAMPLE_SEED)

    def predict_dataloader(self) -> DataLoader:
        return self._ensembles(1, TEST_SAMPLE_SEED)
