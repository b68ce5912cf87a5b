"""``LinearBanditDataModule``: one episode spec (arms, theta*, mu) per dataset and seed.

There is nothing to train: ``validate`` / ``test`` feed each instance to the module, which runs the bandit
loop on it (see :mod:`zoo.fair_lin_bandit.module`). Instances are built by
:func:`zoo.fair_lin_bandit.instances.build_instance` (river's bundled tables and the synthetic control).
"""

from __future__ import annotations

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from zoo.fair_lin_bandit.instances import ALL_DATASETS, DATASETS, build_instance


class _Episodes(Dataset):
    def __init__(self, episodes: list[dict]):
        self.episodes = episodes

    def __len__(self) -> int:
        return len(self.episodes)

    def __getitem__(self, index: int) -> dict:
        return self.episodes[index]


class LinearBanditDataModule(pl.LightningDataModule):
    """Linear bandit instances as episode specs for ``validate`` / ``test``.

    Args:
        datasets: Instance names (``shuttle``, ``yeast``, ``phishing``, ``solarflare``, ``synthetic``, and their
            ``<name>_decoy`` variants with 3 decoy arms of mean 0.01, the evaluation's instances).
        num_arms: K, arms sampled per seed (the best row always included).
        seeds: Seeds of the arm samples (one episode per dataset and seed); 0-9 test, 100-109 validation.
    """

    def __init__(self, datasets: list[str] = list(DATASETS), num_arms: int = 200, seeds: list[int] = [0]):  # noqa: B006
        super().__init__()
        unknown = [name for name in datasets if name not in ALL_DATASETS]
        if unknown:
            raise ValueError(f"unknown dataset(s) {', '.join(unknown)}; expected any of {', '.join(ALL_DATASETS)}")
        if num_arms < 2:
            raise ValueError(f"a bandit needs K >= 2 arms, got num_arms={num_arms}")
        if not datasets or not seeds:
            raise ValueError("give at least one dataset and one seed")
        self.save_hyperparameters()
        self._episodes: list[dict] | None = None

    def setup(self, stage: str | None = None) -> None:
        if self._episodes is not None:
            return
        self._episodes = []
        for name in self.hparams.datasets:
            for seed in self.hparams.seeds:
                instance = build_instance(name, int(seed), self.hparams.num_arms)
                self._episodes.append(
                    {
                        "name": name,
                        "seed": torch.tensor(int(seed)),
                        "arms": torch.from_numpy(instance.arms),
                        "theta": torch.from_numpy(instance.theta),
                        "mu": torch.from_numpy(instance.mu),
                    }
                )

    def instances(self) -> list[dict[str, np.ndarray]]:
        """The episodes as numpy arrays (what the card publishes)."""
        self.setup()
        return [{k: (v.numpy() if isinstance(v, torch.Tensor) else v) for k, v in e.items()} for e in self._episodes]

    def _loader(self) -> DataLoader:
        self.setup()
        return DataLoader(_Episodes(self._episodes), batch_size=None, shuffle=False)

    def val_dataloader(self) -> DataLoader:
        return self._loader()

    def test_dataloader(self) -> DataLoader:
        return self._loader()
