"""``AmideLibraryDataModule``: the cached amide library, its partition, the oracle and the labelled training set.

``prepare_data`` enumerates the library once and caches SMILES, packed fingerprints, acid (arm) ids and both
O1 oracles' scores (:func:`zoo.boba.library.load_library`, outside git). ``setup`` loads them and the chosen
partition. The campaign (:class:`zoo.boba.module.CampaignLoop`) reveals oracle scores through a counting oracle
and hands the labelled set back with :meth:`AmideLibraryDataModule.set_training_set`; ``train_dataloader``
serves it (packed fingerprints, standardised scores, bootstrap counts), reloaded every epoch.
"""

from __future__ import annotations

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from zoo._errors import ZooError
from zoo.boba.library import ORACLES, PARTITIONS, LibraryArrays, LibrarySpec, load_library


class AmideLibraryDataModule(pl.LightningDataModule):
    """The acid x amine library as index batches for inference and labelled batches for the surrogate.

    Args:
        cap: Heavy-atom cap per building block (14: the claim library; 18: the benchmark's).
        partition: Arms: ``acid`` (building block), ``kmeans`` (MiniBatchKMeans on a PCA of the fingerprints)
            or ``random`` (the acid arms shuffled over the molecules: the control).
        n_clusters: k-means arms.
        pca_dim: PCA dimension for k-means.
        oracle: ``validation`` (CDK2 ligands at even file positions; tuning) or ``test`` (odd positions; the card).
        batch_size: Surrogate training batch.
        seed: Seed of the training-set shuffles.
        cache_dir: Cache folder (default ``zoo._paths.cache_dir("boba")``, see :func:`zoo.boba.library.library_folder`).
    """

    def __init__(
        self,
        cap: int = 14,
        partition: str = "acid",
        n_clusters: int = 50,
        pca_dim: int = 64,
        oracle: str = "test",
        batch_size: int = 256,
        seed: int = 0,
        cache_dir: str | None = None,
    ):
        super().__init__()
        if partition not in PARTITIONS:
            raise ZooError(f"partition must be one of {', '.join(PARTITIONS)}, got {partition!r}")
        if oracle not in ORACLES:
            raise ZooError(f"oracle must be one of {', '.join(ORACLES)}, got {oracle!r}")
        if batch_size < 1:
            raise ZooError(f"batch_size must be >= 1, got {batch_size}")
        self.save_hyperparameters()
        self.library: LibraryArrays | None = None
        self.arm_ids: np.ndarray | None = None
        self.scores: np.ndarray | None = None
        self._train: TensorDataset | None = None

    def _load(self) -> LibraryArrays:
        from pathlib import Path

        root = Path(self.hparams.cache_dir) if self.hparams.cache_dir else None
        return load_library(LibrarySpec(cap=self.hparams.cap), root=root, progress=True)

    def prepare_data(self) -> None:
        self._load()

    def setup(self, stage: str | None = None) -> None:
        if self.library is not None:
            return
        h = self.hparams
        self.library = self._load()
        self.arm_ids = self.library.partition(h.partition, h.n_clusters, h.pca_dim)
        self.scores = self.library.scores[h.oracle]

    @property
    def fps(self) -> np.ndarray:
        self.setup()
        return self.library.fps

    def set_training_set(self, indices: np.ndarray, targets: np.ndarray, counts: np.ndarray) -> None:
        """The labelled molecules, their standardised scores and per-member bootstrap counts ``(n, members)``."""
        self.setup()
        if not (len(indices) == len(targets) == len(counts)):
            raise ZooError("indices, targets and bootstrap counts must have one row per labelled molecule")
        self._train = TensorDataset(
            torch.from_numpy(np.ascontiguousarray(self.library.fps[indices])),
            torch.as_tensor(targets, dtype=torch.float32),
            torch.as_tensor(counts, dtype=torch.float32),
        )

    def train_dataloader(self) -> DataLoader:
        if self._train is None:
            raise ZooError("no labelled molecules yet: the campaign (CampaignLoop) labels the initial design first")
        epoch = self.trainer.current_epoch if self.trainer is not None else 0
        generator = torch.Generator().manual_seed(int(self.hparams.seed) * 100_003 + epoch)
        return DataLoader(self._train, batch_size=self.hparams.batch_size, shuffle=True, generator=generator)
