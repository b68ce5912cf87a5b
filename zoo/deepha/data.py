"""BabyAIDemoDataModule: bot demonstrations on disjoint seeds, cached as .npz, batched by episode length."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
from torch.utils.data import DataLoader, Dataset, Sampler

from zoo.deepha.demos import TRAIN_LEVELS, Demos, check_level, generate
from zoo.deepha.demos import level_set as named_level_set

DEMO_VERSION = 1  # bump when the labels change: the cache file name carries it


def cache_dir() -> Path:
    """The demo cache, ``zoo._paths.cache_dir("deepha")`` (``$ZOO_CACHE_DIR/deepha``)."""
    from zoo._paths import cache_dir as paper_cache

    return paper_cache("deepha")


class EpisodeDataset(Dataset):
    """Episodes of a :class:`~zoo.deepha.demos.Demos` as dicts of numpy arrays."""

    def __init__(self, demos: Demos):
        self.demos = demos

    def __len__(self) -> int:
        return len(self.demos)

    def __getitem__(self, index: int) -> dict:
        return self.demos.episode(index)


class LengthBucketSampler(Sampler):
    """Shuffled batches of episodes of similar length (less padding); a new order every epoch."""

    def __init__(self, lengths: np.ndarray, batch_size: int, seed: int, shuffle: bool = True):
        self.lengths, self.batch_size, self.seed, self.shuffle = np.asarray(lengths), batch_size, seed, shuffle
        self.epoch = 0

    def __len__(self) -> int:
        return -(-len(self.lengths) // self.batch_size)

    def __iter__(self):
        rng = np.random.default_rng([self.seed, self.epoch])
        self.epoch += 1
        order = rng.permutation(len(self.lengths)) if self.shuffle else np.arange(len(self.lengths))
        chunk = self.batch_size * 16
        batches = []
        for start in range(0, len(order), chunk):
            part = order[start : start + chunk]
            part = part[np.argsort(self.lengths[part], kind="stable")]
            batches += [part[i : i + self.batch_size].tolist() for i in range(0, len(part), self.batch_size)]
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return iter(batches)


def _episodes(batch: list[dict]) -> list[dict]:
    return batch


class BabyAIDemoDataModule(pl.LightningDataModule):
    """BabyAIBot demonstrations (skill, hindsight grounding and motor labels) for DeepHA.

    ``prepare_data`` runs the bot once and caches the demos as ``.npz`` under ``cache_dir`` (default
    ``$ZOO_CACHE_DIR/deepha``, i.e. ``~/.cache/icml26-zoo/deepha``); training uses training seeds, validation (the
    teacher-forced validation loss) validation seeds. Batches are lists of episodes; the module turns them
    into its arm's token sequences (random drops and compression windows differ per arm and step).

    Args:
        levels: Training levels.
        episodes_per_level: Training demos per level.
        val_episodes_per_level: Validation demos per level (validation seeds).
        max_demo_steps: Demos longer than this are skipped (they would not fit the context).
        batch_size: Episodes per batch.
        seed: Seed of the batch order.
        cache_dir: Where the .npz files live.
        level_set: A named set of training levels (:data:`~zoo.deepha.demos.LEVEL_SETS`) that replaces
            ``levels``; ``"default"`` keeps ``levels`` (which may then be any levels). Naming another set while
            ``levels`` differs from the spec's is an error (two answers to one question).
    """

    def __init__(
        self,
        levels: tuple[str, ...] = TRAIN_LEVELS,
        episodes_per_level: int = 600,
        val_episodes_per_level: int = 10,
        max_demo_steps: int = 128,
        batch_size: int = 32,
        seed: int = 0,
        cache_dir: str | None = None,
        level_set: str = "default",
    ):
        super().__init__()
        chosen = named_level_set(level_set)
        if level_set != "default":
            if tuple(levels) != TRAIN_LEVELS:
                raise ValueError(f"give levels or level_set={level_set!r}, not both")
            levels = chosen.train
        for level in levels:
            check_level(level)
        if episodes_per_level < 1 or val_episodes_per_level < 0 or batch_size < 1 or max_demo_steps < 1:
            raise ValueError("episodes_per_level, batch_size and max_demo_steps must be >= 1")
        self.save_hyperparameters()
        self.levels = tuple(levels)
        self.train_demos: Demos | None = None
        self.val_demos: Demos | None = None

    def _path(self, split: str, episodes: int) -> Path:
        key = json.dumps([DEMO_VERSION, split, self.levels, episodes, self.hparams.max_demo_steps])
        digest = hashlib.sha256(key.encode()).hexdigest()[:12]
        folder = Path(self.hparams.cache_dir) if self.hparams.cache_dir else cache_dir()
        return folder / f"demos-{split}-{episodes}x{len(self.levels)}-{digest}.npz"

    def _ensure(self, split: str, episodes: int) -> Path:
        path = self._path(split, episodes)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            demos = generate(self.levels, episodes, split, self.hparams.max_demo_steps)
            tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")  # per process: eval/tune workers may race here
            demos.save(tmp)
            tmp.replace(path)
        return path

    def prepare_data(self) -> None:
        self._ensure("train", self.hparams.episodes_per_level)
        if self.hparams.val_episodes_per_level:
            self._ensure("validation", self.hparams.val_episodes_per_level)

    def setup(self, stage: str | None = None) -> None:
        if self.train_demos is None:
            self.prepare_data()
            self.train_demos = Demos.load(self._path("train", self.hparams.episodes_per_level))
            if self.hparams.val_episodes_per_level:
                self.val_demos = Demos.load(self._path("validation", self.hparams.val_episodes_per_level))

    def _loader(self, demos: Demos, shuffle: bool) -> DataLoader:
        sampler = LengthBucketSampler(demos.lengths(), self.hparams.batch_size, self.hparams.seed, shuffle)
        return DataLoader(EpisodeDataset(demos), batch_sampler=sampler, collate_fn=_episodes)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_demos, True)

    def val_dataloader(self) -> DataLoader | list:
        return self._loader(self.val_demos, False) if self.val_demos is not None else []


def example_batch() -> list[dict]:
    """A tiny synthetic episode (for ``example_input_array`` and tests): 3 steps of empty grids."""
    images = np.ones((3, 7, 7, 3), dtype=np.uint8)
    return [
        {
            "images": images,
            "dirs": np.array([0, 1, 2]),
            "skills": np.array([[1, 3, 1], [1, 3, 1], [3, 3, 1]]),
            "grounding": np.array([[1, 0], [0, 0], [0, 0]]),
            "motor": np.array([2, 0, 3]),
            "mission": np.array([5, 6, 3, 15, 12]),
        }
    ]
