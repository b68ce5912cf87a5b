"""``OlafLAMModule``: the beta-VAE latent action model with SeqDelta-REPA alignment, as a LightningModule.

Paper: Y. Jiang, Y. Gu, I. W. Tsang, M. Z. Shou, "Orienting Latent Actions for Video World Modeling",
arXiv:2602.10104; code github.com/showlab/Olaf-World (MIT; the LAM code was read for the exact losses, this is
our own implementation). The world-model stage is out of scope (its code is not released either).

What is built: the beta-VAE latent action model (LAM) with a causal spatio-temporal encoder, action-prompt tokens
and a spatial decoder (:mod:`zoo.olaf_world.lam`), the trajectory head and the align loss on the mean latent; the
teacher stays outside the module: tau is cached per clip by the datamodule (:mod:`zoo.olaf_world.data`,
:mod:`zoo.olaf_world.clips`) for any frozen encoder. ``align_weight = 0`` is the paper's baseline (the plain
beta-VAE LAM, ``olaf_world.vae``); the trajectory head exists in both (so both checkpoints have the same keys and,
for one seed, the same initial weights), it only receives a gradient when ``align_weight > 0``.

Reconstructed choices and deviations:

* Data: Crafter (``crafter==1.8.3``, 64 x 64) instead of MiraData; neither MiraData, V-JEPA 2 nor the video
  world models can be obtained offline or run on 2 CPU cores.
* Teacher (issue 65): V-JEPA 2 is replaced by a frozen, label-free motion readout, the phase-correlation shift
  between consecutive frames (2-d, :func:`zoo.olaf_world.clips.phase_shift`), tau = normalize(mean_k shift_k).
  EfficientNet-Lite0's feature difference (ImageNet, the earlier teacher, ``teacher="efficientnet_lite0"``,
  ``teacher_dim=1280``) carries no action: its linear probe on the true actions is at chance, so aligning to it
  could not orient anything (the teacher gate of ``zoo eval olaf_world``).
* Contexts (issue 65): context B is also seen through Crafter's 11 x 11 view (``context_b="zoom"``: 5 px tiles
  and 5 px scrolls against A's 7 px), so that the same action looks different; without it a move is the same
  7 px scroll in every world and the plain LAM shows no context gap.
* Behaviour policy: segments of 1-4 steps (uniform) of one action, a movement with probability 0.8 (uniform
  over the 4), otherwise noop or do; one 128-step episode per world seed. Actions are kept for evaluation only.
* Worlds: training 0-29 / 50-79 (stride-1 clips, 7,560 clips), test 30-39 / 80-89, validation 40-49 / 90-99
  (non-overlapping clips).
* Splits: the world split (world seeds 0-49 vs 50-99, every episode from Crafter's spawn) draws both contexts
  from one world generator, so there is no transfer gap to close (lam_vae's probes at 500 steps: 0.31 cross vs
  0.27 within). The recipes use the harder *terrain* split: context A episodes (worlds 0-49) start on grass,
  context B episodes (worlds 50-99) start in a cave (a random free ``path`` tile at least 4 tiles from lava).
* LAM size: the spec's (model_dim 128, 3 + 3 blocks, 4 heads, latent 32, causal) but patch 16 instead of 8
  (16 tokens per frame: a step 4x cheaper on 2 cores); MLP ratio 2; pre-norm blocks; learned spatial and
  temporal position embeddings; AdamW weight decay 1e-2, gradient clip 0.3; batch 16 clips of T = 4 (the spec:
  32), lr 1e-3 / 2e-3 (lam_align / lam_vae; the spec: 3e-4), 800 steps (~2 min on one core, the CPU budget).
* Residual decoder (ours): the decoder's output is added to the logits of frame t-1 before the sigmoid, with a
  zero-initialised output layer, so the untrained LAM predicts the copy of frame t-1. With the authors' plain
  sigmoid decoder (lr 3e-4, batch 32, 500 steps) the KL ended at 0.03 nats (z unused) and the reconstruction was
  worse than copying (0.0132 vs 0.0067). ``residual=False`` restores the authors' decoder.
* Shift decoder (``shift_kernel=15``, ours, CDNA-style: z picks a separable kernel that moves frame t-1): the
  plain patch decoder barely profits even from the *true* action fed as an embedding (validation MSE 0.0072 vs
  0.0084 for copying frame t-1 after 300 steps); the shift decoder does (0.0048).
* Convolutional action encoder (``encoder="conv"``, ours: z_t from frames t-1, t through the inverse-dynamics
  CNN's architecture): the spatio-temporal transformer learns the action slowly even from labels (linear stem
  0.35, conv stem 0.39, token readout 0.31 after 300 steps of 16 clips) while the inverse-dynamics CNN reaches
  0.55 at the same samples (0.82 after 600 steps).
* Near-deterministic start and KL warm-up (``logvar_init=-6``, ``kl_warmup_steps=200``, beta 1e-6 / 1e-7, ours):
  at first z gets no reconstruction gradient (the zero-initialised output layer) while AdamW turns the tiny KL
  gradient into full-size steps; at the authors' beta 2e-4 the KL falls from ~6 nats to 0.01 within 50 steps,
  and a warm-up alone does not save it (2 nats, probes at chance after 800 steps).
* Probes (the paper's evaluation code is unreleased): logistic regression (sklearn, standardised inputs, C = 1)
  fit on half of one context's test worlds and tested on the other half of the same (within) or the other
  (cross) context; transfer through an inverse-dynamics CNN per context trained on true labels of the training
  worlds (:mod:`zoo.olaf_world.metrics`).
* Tried on validation worlds and not used: ``motion_tokens``, ``encoder_stem="conv"``, ``latent_readout``, a
  4-d latent, the keypoint teacher readout (``teacher_readout="keypoints"``) and the ALE domain (``env="ale"``:
  MsPacman = A, Alien = B; an inverse-dynamics CNN on true labels scores 0.21 / 0.22 against chance 0.21: the
  joystick is not visible in 64 px frame pairs).
* Not built: the VQ-LAM baseline, the self-supervised teacher option and the per-step alignment variant.
* Tuning (:mod:`zoo.olaf_world.tune`, the recipes' data: terrain split, context B zoomed, phase-correlation
  teacher; validation worlds, 12 trials per arm: 6 configurations x 400 / 800 steps, selected by the
  cross-context probe): lam_vae beta 1e-7 (of 1e-7 / 1e-6 / 1e-5), lr 2e-3 (of 1e-3 / 2e-3), 800 steps;
  lam_align lambda 0.005 (of 0.002 / 0.005 / 0.02) at beta 1e-6, lr 1e-3 (of 1e-3 / 2e-3), 800 steps. The
  earlier grid (unzoomed data, EfficientNet teacher) chose lambda 0.02, beta 1e-5 / 1e-6, lr 1e-3, 1,600 steps.
"""

from __future__ import annotations

import lightning.pytorch as pl
import numpy as np
import torch

from zoo._inference import PretrainedMixin
from zoo.olaf_world import INPUT
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

    DEFAULT_PRETRAINED_CFG = INPUT  # what the published weights take (the registry states the same)

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
