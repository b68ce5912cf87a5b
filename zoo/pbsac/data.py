"""The experience schedule of PB-SAC: how many environment steps each training batch runs.

RL has no dataset; the LightningModule (zoo.pbsac.module) owns the environment, the replay buffer and
the rollout. What Lightning iterates over is the schedule: ``total_steps`` environment steps cut into
chunks of ``steps_per_batch``, each chunk one ``training_step``. Large chunks keep Lightning's per-call
overhead off the per-step path; the chunk size changes nothing else (logging granularity only).
"""

from __future__ import annotations

import lightning.pytorch as pl
from torch.utils.data import DataLoader, IterableDataset


class EnvStepSchedule(IterableDataset):
    """Yields chunk sizes ``steps_per_batch, ..., remainder`` that sum to ``total_steps``.

    Args:
        total_steps: Environment steps in all.
        steps_per_batch: Environment steps per training batch.
    """

    def __init__(self, total_steps: int, steps_per_batch: int) -> None:
        if total_steps < 1 or steps_per_batch < 1:
            raise ValueError(f"total_steps and steps_per_batch must be >= 1, got {total_steps} and {steps_per_batch}")
        self.total_steps, self.steps_per_batch = total_steps, steps_per_batch

    def __iter__(self):
        done = 0
        while done < self.total_steps:
            chunk = min(self.steps_per_batch, self.total_steps - done)
            done += chunk
            yield chunk

    def __len__(self) -> int:
        return -(-self.total_steps // self.steps_per_batch)


class PBSACDataModule(pl.LightningDataModule):
    """Feeds PB-SAC its schedule of environment steps, and one validation item per validation run.

    Args:
        total_steps: Environment steps of the whole fit (random warm-up included).
        steps_per_batch: Environment steps per ``training_step``.
    """

    def __init__(self, total_steps: int = 15_000, steps_per_batch: int = 500) -> None:
        super().__init__()
        self.save_hyperparameters()
        EnvStepSchedule(total_steps, steps_per_batch)  # validate early, with a clear message

    def train_dataloader(self) -> DataLoader:
        return DataLoader(EnvStepSchedule(self.hparams.total_steps, self.hparams.steps_per_batch), batch_size=None)

    def val_dataloader(self) -> DataLoader:
        return DataLoader([0], batch_size=None)  # validation_step runs the evaluation episodes itself
