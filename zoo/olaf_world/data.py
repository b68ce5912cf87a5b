"""``LatentActionVideoDataModule``: Crafter (or ALE) clips with tau cached per clip by a frozen teacher.

The teacher never enters the LightningModule: ``setup`` renders the clips (or reads them from the cache), runs
the frozen encoder once per frame, and stores ``tau`` per training clip. Training batches are dicts with
``videos`` (B, T, 64, 64, 3) float in [0, 1] and ``tau`` (B, D) only: the true actions are not in them.
Validation and test batches carry ``actions`` (B, T-1), ``context`` (B,) and ``world_seed`` (B,) for the
probes.

World seeds (contexts A = 0-49, B = 50-99): training ``0..n-1`` and ``50..50+n-1`` (``n = train_seeds_per_context``,
at most 30), test 30-39 and 80-89, validation 40-49 and 90-99 (the issue's validation clips).
"""

from __future__ import annotations

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from zoo.olaf_world import clips as clip_lib

TEST_FIRST_SEED = 30
VAL_FIRST_SEED = 40


def context_seeds(first: int, count: int) -> list[int]:
    """World seeds ``first..first+count-1`` of context A and the same offsets in context B."""
    return [*range(first, first + count), *range(50 + first, 50 + first + count)]


class ClipDataset(Dataset):
    """Dict items of uint8 clips turned to float on access (the cache stays uint8)."""

    def __init__(self, videos: np.ndarray, **fields: np.ndarray) -> None:
        self.videos = torch.as_tensor(videos)
        self.fields = {k: torch.as_tensor(v) for k, v in fields.items()}

    def __len__(self) -> int:
        return len(self.videos)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"videos": self.videos[index].float() / 255.0, **{k: v[index] for k, v in self.fields.items()}}


class LatentActionVideoDataModule(pl.LightningDataModule):
    """Crafter clips of ``clip_length`` frames from the persistent behaviour policy, tau cached per clip.

    Args:
        env: ``"crafter"`` or ``"ale"`` (context A = MsPacman, B = Alien, 5 actions: no ``do``; ``split`` is then
            unused).
        split: What separates the contexts: ``"world"`` (world seeds 0-49 vs 50-99, every episode from Crafter's
            spawn) or ``"terrain"`` (the same worlds, context A episodes start on grass, context B in a cave).
        clip_length: Frames per clip T (T - 1 latent actions).
        steps_per_seed: Policy steps of the one episode played in each world seed.
        train_seeds_per_context: Training world seeds per context (0..n-1 and 50..50+n-1), at most 30.
        eval_seeds_per_context: Validation (40.., 90..) and test (30.., 80..) world seeds per context, at most 10.
        teacher: Frozen encoder of tau: ``"efficientnet_lite0"``, ``"random_efficientnet_lite0"`` or
            ``"phase_correlation"`` (a label-free motion readout: the global shift between consecutive frames,
            2-d, :func:`zoo.olaf_world.clips.phase_shift`; tau = normalize(mean_k shift_k)).
        target: ``"delta"`` (SeqDelta-REPA) or ``"static"`` (the clip's mean feature: an ablation; not with the
            phase-correlation teacher, which has no per-frame feature).
        context_b: How context B looks besides the split: ``"same"``, ``"recolour"`` (inverted, channels rotated)
            or ``"zoom"`` (Crafter's 11 x 11 view: 5 px tiles instead of 7 px).
        teacher_size: Side the frames are resized to for the teacher (64 or 128 px).
        teacher_grid: ``None``: tau from the spatially pooled feature (1280-d); ``g``: from the feature map pooled
            to ``g x g`` cells (``1280 g^2``-d; the model's ``teacher_dim`` must match).
        teacher_readout: ``"pooled"`` (the paper's spatial mean, or the ``teacher_grid`` map) or ``"keypoints"``
            (80-d centroids of the frozen stride-8 activations: where things are, not what; ours).
        batch_size: Training clips per batch.
        policy_seed: Seed of the behaviour policy (the data are fixed across training seeds).
        use_cache: Keep rendered clips and teacher features under ``zoo._paths.cache_dir("olaf_world")``.
    """

    def __init__(
        self,
        env: str = "crafter",
        split: str = "world",
        clip_length: int = 4,
        steps_per_seed: int = 128,
        train_seeds_per_context: int = 30,
        eval_seeds_per_context: int = 10,
        teacher: str = "efficientnet_lite0",
        target: str = "delta",
        teacher_size: int = 64,
        teacher_grid: int | None = None,
        teacher_readout: str = "pooled",
        context_b: str = "same",
        batch_size: int = 32,
        policy_seed: int = 0,
        use_cache: bool = True,
    ) -> None:
        super().__init__()
        clip_lib.check_env(env)
        if split not in clip_lib.SPLITS:
            raise ValueError(f"split={split!r}: choose one of {', '.join(clip_lib.SPLITS)}")
        if clip_length < 2:
            raise ValueError(f"clip_length={clip_length}: a clip needs T >= 2 frames")
        if steps_per_seed < clip_length:
            raise ValueError(f"steps_per_seed={steps_per_seed} is shorter than clip_length={clip_length}")
        if not 1 <= train_seeds_per_context <= TEST_FIRST_SEED:
            raise ValueError(f"train_seeds_per_context={train_seeds_per_context}: choose 1..{TEST_FIRST_SEED}")
        if not 1 <= eval_seeds_per_context <= 10:
            raise ValueError(f"eval_seeds_per_context={eval_seeds_per_context}: choose 1..10")
        if teacher not in clip_lib.TEACHERS:
            raise ValueError(f"teacher={teacher!r}: choose one of {', '.join(clip_lib.TEACHERS)}")
        if target not in clip_lib.TARGETS:
            raise ValueError(f"target={target!r}: choose one of {', '.join(clip_lib.TARGETS)}")
        if context_b not in clip_lib.CONTEXT_STYLES:
            raise ValueError(f"context_b={context_b!r}: choose one of {', '.join(clip_lib.CONTEXT_STYLES)}")
        if teacher == "phase_correlation" and target != "delta":
            raise ValueError("teacher='phase_correlation' reads motion between frames: only target='delta'")
        if teacher_size % 32 or teacher_size < 32:
            raise ValueError(f"teacher_size={teacher_size}: choose a multiple of 32 (64 or 128)")
        if teacher_grid is not None and not 1 <= teacher_grid <= teacher_size // 32:
            raise ValueError(
                f"teacher_grid={teacher_grid}: choose None or 1..{teacher_size // 32} at {teacher_size} px"
            )
        if teacher_readout not in clip_lib.READOUTS:
            raise ValueError(f"teacher_readout={teacher_readout!r}: choose one of {', '.join(clip_lib.READOUTS)}")
        self.save_hyperparameters()

    @property
    def teacher_dim(self) -> int:
        """Width of tau (the model's ``teacher_dim``)."""
        hp = self.hparams
        return clip_lib.teacher_dim(hp.teacher_grid, hp.teacher_readout, hp.teacher)

    def clips(self, split: str) -> dict[str, np.ndarray]:
        """The clips of ``"train"`` (stride 1), ``"val"`` or ``"test"`` (non-overlapping) world seeds."""
        hp = self.hparams
        if split == "train":
            seeds, stride = context_seeds(0, hp.train_seeds_per_context), 1
        elif split in ("val", "test"):
            first = VAL_FIRST_SEED if split == "val" else TEST_FIRST_SEED
            seeds, stride = context_seeds(first, hp.eval_seeds_per_context), hp.clip_length - 1
        else:
            raise ValueError(f"split={split!r}: choose train, val or test")
        view_b = clip_lib.ZOOM_VIEW if hp.context_b == "zoom" else 9
        out = clip_lib.cached_clips(
            hp.env, seeds, hp.steps_per_seed, hp.clip_length, stride, hp.policy_seed, hp.use_cache, hp.split, view_b
        )
        if hp.context_b == "recolour":
            frame_context = np.repeat(clip_lib.context_of(np.asarray(seeds)), hp.steps_per_seed + 1)
            out["frames"] = np.where(
                frame_context[:, None, None, None] == 1, clip_lib.recolour(out["frames"]), out["frames"]
            )
            out["videos"] = out["frames"][out["frame_index"]]
        return out

    def _teacher_features(self, clips: dict[str, np.ndarray]) -> np.ndarray:
        """The frozen teacher's per-frame features (per-transition shifts for the motion teacher), cached on disk."""
        hp = self.hparams
        tag = clip_lib._key(tuple(clips["world_seed"][[0, -1]].tolist()), clips["frames"].shape, hp.policy_seed)
        tag += "-" + clip_lib._key(clips["frames"][:: max(1, len(clips["frames"]) // 16)].tobytes())
        return clip_lib.cached_frame_features(
            clips, hp.teacher, tag, hp.use_cache, hp.teacher_size, hp.teacher_grid, hp.teacher_readout
        )

    def tau(self, clips: dict[str, np.ndarray]) -> np.ndarray:
        """tau ``(N, teacher_dim)`` of every clip, from per-frame teacher features (cached)."""
        hp = self.hparams
        features = self._teacher_features(clips)
        index = clips["frame_index"]
        if hp.teacher == "phase_correlation":  # features are per transition already: tau = normalize(mean_k m_k)
            motion = features[index[:, :-1]].mean(axis=1)
            return (motion / np.maximum(np.linalg.norm(motion, axis=1, keepdims=True), 1e-12)).astype(np.float32)
        if hp.target == "delta":  # mean_k (s_{k+1} - s_k) = (s_{T-1} - s_0) / (T - 1): the same unit vector
            index = index[:, [0, -1]]
        chunks = [
            clip_lib.tau_from_features(features[index[i : i + 1024]], hp.target) for i in range(0, len(index), 1024)
        ]
        return np.concatenate(chunks) if chunks else np.zeros((0, features.shape[1]), np.float32)

    def transition_targets(self, clips: dict[str, np.ndarray]) -> np.ndarray:
        """The teacher's temporal target of every transition ``(N (T-1), D)``, in the order of
        ``clips["actions"].reshape(-1)``: the motion readout, or the normalised feature difference of an encoder.
        A linear probe of these on the true actions is the teacher gate (does the target carry the action?)."""
        hp = self.hparams
        features = self._teacher_features(clips)
        index = clips["frame_index"]
        if hp.teacher == "phase_correlation":
            out = features[index[:, :-1]]
        else:
            out = features[index[:, 1:]] - features[index[:, :-1]]
            out = out / np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
        return out.reshape(-1, out.shape[-1])

    def setup(self, stage: str | None = None) -> None:
        if stage in (None, "fit"):
            train = self.clips("train")
            self.train_set = ClipDataset(train["videos"], tau=self.tau(train))
        if stage in (None, "fit", "validate"):
            self.val_set = self._labelled("val")
        if stage in (None, "test", "predict"):
            self.test_set = self._labelled("test")

    def _labelled(self, split: str) -> ClipDataset:
        data = self.clips(split)
        return ClipDataset(
            data["videos"], actions=data["actions"], context=data["context"], world_seed=data["world_seed"]
        )

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=self.hparams.batch_size, shuffle=True, drop_last=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=256)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.test_set, batch_size=256)

    def predict_dataloader(self) -> DataLoader:
        return DataLoader(self.test_set, batch_size=256)


def build(split: str = "terrain", context_b: str = "zoom") -> None:
    """Render the recipes' clips and the teacher features of every variant the evaluation trains (the data step of
    ``zoo reproduce olaf_world``; the fits and the evaluation would otherwise render them on first use)."""
    for teacher in ("phase_correlation", "efficientnet_lite0"):
        module = LatentActionVideoDataModule(split=split, context_b=context_b, teacher=teacher)
        module.tau(module.clips("train"))
    for split_name in ("val", "test"):
        module.clips(split_name)


if __name__ == "__main__":
    build()
