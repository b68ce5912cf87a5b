"""``OlafLAMModule``: the beta-VAE latent action model with SeqDelta-REPA alignment, as a LightningModule.

See :mod:`zoo.olaf_world` for the paper, every reconstruction choice and every deviation.
``align_weight = 0`` is the paper's baseline (the plain beta-VAE LAM); the trajectory head exists in both
(so both checkpoints have the same keys and, for one seed, the same initial weights), it only receives a
gradient when ``align_weight > 0``.
"""

from __future__ import annotations

import lightning.pytorch as pl
import numpy as np
import torch

from zoo._inference import PretrainedMixin
from zoo.olaf_world.clips import ACTION_NAMES
from zoo.olaf_world.lam import LatentActionModel, TrajectoryHead, lam_losses
from zoo.olaf_world.metrics import probe_accuracies


class OlafLAMModule(PretrainedMixin, pl.LightningModule):
    """LAM + trajectory head; ``forward(videos)`` returns ``mu_z`` ``(B, T-1, latent_dim)``.

    Args:
        align_weight: lambda of the align loss (0.02 in the authors' config; 0 = the beta-VAE baseline).
        beta: Weight of the KL term (2e-4, the authors' config).
        lr: AdamW learning rate.
        weight_decay: AdamW weight decay.
        image_size: Frame side length.
        patch: Patch side length.
        model_dim: Token width.
        encoder_blocks: Spatio-temporal encoder blocks.
        decoder_blocks: Spatial decoder blocks.
        heads: Attention heads.
        latent_dim: Width of z.
        clip_length: Frames per clip T of ``example_input_array`` (the model takes 2..16).
        teacher_dim: Width of tau (1280 for EfficientNet-Lite0).
        residual: Decoder adds to the previous frame's logits (see :class:`~zoo.olaf_world.lam.LatentActionModel`).
        shift_kernel: 0 or the odd kernel width of the shift decoder (see
            :class:`~zoo.olaf_world.lam.LatentActionModel`).
        logvar_init: Initial bias of the logvar head (None: default init; see
            :class:`~zoo.olaf_world.lam.LatentActionModel`).
        motion_tokens: Encoder tokens embed each patch and its change since the previous frame.
        encoder_stem: ``"linear"`` patch embedding (the authors') or ``"conv"`` (a small CNN on the frame and its
            change; see :class:`~zoo.olaf_world.lam.MotionStem`).
        encoder: ``"transformer"`` (the authors' spatio-temporal encoder) or ``"conv"`` (z_t from frames t-1, t
            through a small CNN; see :class:`~zoo.olaf_world.lam.ConvActionEncoder`).
        latent_readout: ``"prompt"`` (the authors') or ``"tokens"`` (z from all of the frame's tokens; see
            :class:`~zoo.olaf_world.lam.LatentActionModel`).
        kl_warmup_steps: Steps over which beta ramps linearly from 0 (0: beta from the start). Why: the residual
            decoder's output layer starts at zero, so at first z gets no reconstruction gradient and AdamW turns
            the tiny beta KL gradient into full-size steps that pull the z-head onto the prior (posterior
            collapse before the decoder has learnt to use z).
        seed: Seed of the initial weights.
    """

    DEFAULT_PRETRAINED_CFG = {
        "input_format": "videos [B, T, 64, 64, 3] float in [0, 1] (Crafter frames / 255), T >= 2; "
        "model(videos) returns mu_z [B, T-1, 32], model.reconstruct(videos) the predicted frames 1..T-1",
        "input_size": (4, 64, 64, 3),
        "value_range": (0.0, 1.0),
        "label_names": ACTION_NAMES,
    }

    def __init__(
        self,
        align_weight: float = 0.02,
        beta: float = 2e-4,
        lr: float = 3e-4,
        weight_decay: float = 1e-2,
        image_size: int = 64,
        patch: int = 16,
        model_dim: int = 128,
        encoder_blocks: int = 3,
        decoder_blocks: int = 3,
        heads: int = 4,
        latent_dim: int = 32,
        clip_length: int = 4,
        teacher_dim: int = 1280,
        residual: bool = True,
        shift_kernel: int = 0,
        logvar_init: float | None = None,
        motion_tokens: bool = False,
        encoder_stem: str = "linear",
        latent_readout: str = "prompt",
        encoder: str = "transformer",
        kl_warmup_steps: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if align_weight < 0 or beta < 0:
            raise ValueError(f"align_weight={align_weight} and beta={beta} must be >= 0")
        if kl_warmup_steps < 0:
            raise ValueError(f"kl_warmup_steps={kl_warmup_steps} must be >= 0")
        if clip_length < 2:
            raise ValueError(f"clip_length={clip_length}: a clip needs T >= 2 frames")
        self.save_hyperparameters()
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.lam = LatentActionModel(
                image_size=image_size,
                patch=patch,
                model_dim=model_dim,
                encoder_blocks=encoder_blocks,
                decoder_blocks=decoder_blocks,
                heads=heads,
                latent_dim=latent_dim,
                residual=residual,
                shift_kernel=shift_kernel,
                logvar_init=logvar_init,
                motion_tokens=motion_tokens,
                encoder_stem=encoder_stem,
                latent_readout=latent_readout,
                encoder=encoder,
            )
            self.head = TrajectoryHead(latent_dim, teacher_dim)
        # fixed frames (not the global RNG): two instances of the same weights give the same example output
        example = torch.Generator().manual_seed(0)
        self.example_input_array = torch.rand(2, clip_length, image_size, image_size, 3, generator=example)
        self._val: list[dict[str, torch.Tensor]] = []

    def forward(self, videos: torch.Tensor) -> torch.Tensor:
        """mu_z ``(B, T-1, latent_dim)``: the latent action of each transition (eval uses mu)."""
        return self.lam.encode(videos)[0]

    @torch.no_grad()
    def reconstruct(self, videos: torch.Tensor) -> torch.Tensor:
        """Frames 1..T-1 predicted from frames 0..T-2 and mu_z."""
        return self.lam(videos, sample=False)["recon"]

    @torch.no_grad()
    def decode(self, previous: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """Apply latent actions ``z`` ``(B, K, latent)`` to frames ``previous`` ``(B, K, H, W, C)``."""
        return self.lam.decode(previous, z)

    def losses(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """MSE + beta KL + lambda align of a training batch (``videos`` and ``tau``; no actions)."""
        tau = batch.get("tau")
        if tau is not None and tau.shape[-1] != self.head.teacher_dim:
            raise ValueError(
                f"tau has width {tau.shape[-1]} but the trajectory head predicts {self.head.teacher_dim} "
                "(set teacher_dim to the teacher's feature width)"
            )
        return lam_losses(self.lam, self.head, batch["videos"], tau, self.beta_now(), self.hparams.align_weight)

    def beta_now(self, step: int | None = None) -> float:
        """beta at optimiser step ``step`` (default: the trainer's): ramped from 0 over ``kl_warmup_steps``."""
        warmup = self.hparams.get("kl_warmup_steps", 0)
        if not warmup:
            return self.hparams.beta
        if step is None:
            step = self.global_step if self._trainer is not None else warmup
        return self.hparams.beta * min(1.0, step / warmup)

    def training_step(self, batch, batch_idx):
        losses = self.losses(batch)
        self.log_dict({f"train/{k}": v for k, v in losses.items()}, prog_bar=False)
        return losses["loss"]

    def validation_step(self, batch, batch_idx):
        out = self.lam(batch["videos"], sample=False)
        se = (batch["videos"][:, 1:] - out["recon"]).pow(2).mean(dim=(1, 2, 3, 4))
        self._val.append(
            {
                "mu": out["mu"].detach().cpu(),
                "actions": batch["actions"].cpu(),
                "context": batch["context"].cpu(),
                "world_seed": batch["world_seed"].cpu(),
                "mse": se.cpu(),
            }
        )

    def test_step(self, batch, batch_idx):
        self.validation_step(batch, batch_idx)

    def on_validation_epoch_end(self) -> None:
        self._log_probes("val")

    def on_test_epoch_end(self) -> None:
        self._log_probes("test")

    def _log_probes(self, prefix: str) -> None:
        """Pixel MSE and the within / cross-context probes of the collected mu_z (validation or test worlds)."""
        if not self._val:
            return
        parts = {k: torch.cat([p[k] for p in self._val]) for k in self._val[0]}
        self._val.clear()
        steps = parts["actions"].shape[1]
        mu = parts["mu"].reshape(-1, parts["mu"].shape[-1]).numpy()
        actions = parts["actions"].reshape(-1).numpy()
        context = np.repeat(parts["context"].numpy(), steps)
        world_seed = np.repeat(parts["world_seed"].numpy(), steps)
        metrics = {f"{prefix}/pixel_mse": float(parts["mse"].mean())}
        if len(np.unique(world_seed)) >= 4 and len(np.unique(actions)) > 1:  # the probes need two seeds per context
            probes = probe_accuracies(mu, actions, context, world_seed)
            metrics.update({f"{prefix}/{k}": v for k, v in probes.items()})
        self.log_dict(metrics)

    def predict_step(self, batch, batch_idx):
        """mu_z per transition ``(B, T-1, latent_dim)``."""
        return self(batch["videos"])

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)
