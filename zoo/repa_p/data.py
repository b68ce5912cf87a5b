"""``PDEDataModule``: solver-generated (solution, condition) pairs with in- and out-of-distribution test splits.

Nothing is downloaded: :mod:`zoo.repa_p.tasks` draws the conditions and runs our solvers (DST for Poisson,
finite volumes for Darcy). Generation is deterministic in ``seed`` and cached in-process, so several runs
in one process (``zoo eval``) share it; 2,000 Poisson pairs at 32 x 32 take well under a second.
"""

from __future__ import annotations

import lightning.pytorch as pl
from torch.utils.data import DataLoader, TensorDataset

from zoo.repa_p.tasks import get_task


class PDEDataModule(pl.LightningDataModule):
    """Training, validation and test pairs ``(x0, condition)`` of one PDE task.

    Args:
        task: ``"poisson"`` or ``"darcy"``.
        size: Grid nodes per side, boundary included.
        num_train: Training pairs.
        num_val: Validation pairs (one batch; the convergence curve is measured on them).
        num_test: Pairs per test split.
        batch_size: Training batch size.
        test_splits: Test splits in loader order (default: ``id`` then the task's OOD splits).
        seed: Seed of the data (independent of the training seed).
    """

    def __init__(
        self,
        task: str = "poisson",
        size: int = 32,
        num_train: int = 2000,
        num_val: int = 32,
        num_test: int = 200,
        batch_size: int = 16,
        test_splits: tuple[str, ...] | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.task = get_task(task, size)
        if min(num_train, num_val, num_test, batch_size) < 1:
            raise ValueError("num_train, num_val, num_test and batch_size must all be positive")
        self.test_splits = tuple(test_splits) if test_splits else ("id", *self.task.ood_splits)
        unknown = [s for s in self.test_splits if s not in self.task.splits]
        if unknown:
            raise ValueError(f"unknown test splits {unknown} for task {task}; choose from {sorted(self.task.splits)}")

    def setup(self, stage: str | None = None) -> None:
        hp = self.hparams
        self.train_set = TensorDataset(*self.task.generate("train", hp.num_train, hp.seed))
        self.val_set = TensorDataset(*self.task.generate("val", hp.num_val, hp.seed))
        self.test_sets = {s: TensorDataset(*self.task.generate(s, hp.num_test, hp.seed)) for s in self.test_splits}

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=self.hparams.batch_size, shuffle=True, drop_last=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=self.hparams.num_val)

    def test_dataloader(self) -> list[DataLoader]:
        return [DataLoader(self.test_sets[s], batch_size=self.hparams.num_test) for s in self.test_splits]

    def predict_dataloader(self) -> DataLoader:
        return DataLoader(self.test_sets[self.test_splits[0]], batch_size=self.hparams.num_test)
