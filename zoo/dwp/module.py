"""DWPModule: standard training, plain noise injection or DWP over any backbone, as one LightningModule.

See :mod:`zoo.dwp` for the paper, the reconstruction choices and the deviations.
"""

from __future__ import annotations

import copy
import math
import warnings

import lightning.pytorch as pl
import torch
import torch.nn.functional as F

from zoo._inference import ImageClassifierMixin
from zoo.dwp import INPUT
from zoo.dwp.backbones import build_backbone
from zoo.dwp.dwp import (
    MODES,
    curriculum_sigma,
    dwp_loss,
    perturbable_weights,
    realisation_logits,
    sample_realisations,
)
from zoo.quant.cim import CIMConfig, cim_layers, convert_to_cim
from zoo.quant.cim.noise import mismatch_noise


class DWPModule(ImageClassifierMixin, pl.LightningModule):
    """A classifier trained to survive compute-in-memory weight perturbations.

    ``forward`` takes normalised images (the datamodule's); ``model.predict(raw)`` and ``model.transform(raw)``
    take raw Fashion-MNIST pixels (uint8, or floats in [0, 1]) and apply the ``pretrained_cfg`` normalisation
    (mean 0.2860, std 0.3530); ``model.label_names`` names the classes.

    ``mode="standard"`` trains on clean weights; ``"noise_injection"`` on ``k`` fresh mismatch draws per step
    with all sample weights 1 (``k=1`` is plain noise injection; ``k=4`` is compute-matched to DWP's K = 4);
    ``"dwp"`` on ``k`` draws per step with the DWP sample weights. The perturbation is applied functionally
    (``torch.func.functional_call``), so the stored weights stay clean.

    Args:
        mode: ``"standard"``, ``"noise_injection"`` or ``"dwp"``.
        backbone: ``"resnet_fmnist"``, ``"mlp"`` or ``"timm:<name>"`` (see :func:`zoo.dwp.backbones.build_backbone`).
        channels: Stage widths of ``resnet_fmnist`` (hidden widths of ``mlp``).
        stem_width: Stem width of ``resnet_fmnist``.
        norm_groups: GroupNorm groups of ``resnet_fmnist``.
        num_classes: Output classes.
        in_chans: Input channels.
        sigma_train: Training mismatch level (noise injection and DWP).
        noise_form: ``"additive"`` (max-scaled) or ``"multiplicative"``.
        k: Realisations per batch (DWP: at least 2; noise injection: at least 1).
        lam: Weight of the adaptive part of the sample weights (DWP).
        temperature: Temperature of the batch softmax over disagreements (DWP).
        curriculum: Fraction of the training steps over which the mismatch ramps up linearly from 0.
        lr: Adam learning rate.
        weight_decay: Adam weight decay.
        cosine_schedule: Anneal the learning rate to 0 with a cosine over the run.
        vectorize: Run the K realisations in one ``vmap`` (default: a loop, faster on CPU for this backbone;
            always a loop with BatchNorm running statistics).
        val_sigma: Mismatch level of the validation metric ``val/acc_noisy`` (one fixed draw per run).
        cim: When set, the backbone's Linear/Conv2d become CIM layers with this config (same state_dict),
            ready for ``zoo.quant.cim.program`` / ``drift``; the config is stored in config.json.
    """

    HEAD = "net.fc"  # timm's classifier: zoo.load(name, pretrained=True, num_classes=K) replaces it
    DEFAULT_PRETRAINED_CFG = INPUT

    def __init__(
        self,
        mode: str = "dwp",
        backbone: str = "resnet_fmnist",
        channels: tuple[int, ...] = (16, 32, 64, 128),
        stem_width: int = 16,
        norm_groups: int = 8,
        num_classes: int = 10,
        in_chans: int = 1,
        sigma_train: float = 0.5,
        noise_form: str = "additive",
        k: int = 4,
        lam: float = 0.5,
        temperature: float = 0.5,
        curriculum: float = 0.3,
        lr: float = 3e-3,
        weight_decay: float = 0.0,
        cosine_schedule: bool = True,
        vectorize: bool = False,
        val_sigma: float = 0.5,
        cim: CIMConfig | None = None,
    ) -> None:
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        if noise_form not in ("additive", "multiplicative"):
            raise ValueError(f"noise_form must be 'additive' or 'multiplicative', not {noise_form!r}")
        if k < 1 or (mode == "dwp" and k < 2):
            raise ValueError(f"k must be >= 2 for DWP (disagreement needs several realisations), not {k}")
        if not sigma_train >= 0 or not temperature > 0 or not 0 <= lam <= 1 or not 0 <= curriculum <= 1:
            raise ValueError("need sigma_train >= 0, temperature > 0, 0 <= lam <= 1 and 0 <= curriculum <= 1")
        self.save_hyperparameters()
        self.net = build_backbone(backbone, tuple(channels), stem_width, norm_groups, num_classes, in_chans)
        if cim is not None:
            convert_to_cim(self.net, cim)
        self.perturbed_names = perturbable_weights(self.net)
        self.example_input_array = torch.zeros(2, in_chans, 28, 28)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of normalised images (see :meth:`transform`); raw pixels score far lower, so warn once."""
        if not self.training and not getattr(self, "_warned_raw", False) and x.numel() and x.min() >= 0 < x.max():
            self._warned_raw = True
            warnings.warn(
                "DWPModule.forward got non-negative images, which look unnormalised (normalised Fashion-MNIST has "
                "negative background); use model.predict(raw_images) or model(model.transform(raw_images))",
                stacklevel=2,
            )
        return self.net(x)

    # ------------------------------------------------------------------------------------------- training

    def current_sigma(self) -> float:
        h = self.hparams
        total = self.trainer.estimated_stepping_batches if self._trainer is not None else 0
        total = total if math.isfinite(total) else 0
        return curriculum_sigma(h.sigma_train, self.global_step, int(total), h.curriculum)

    def training_step(self, batch, batch_idx):
        x, y = batch
        h = self.hparams
        if h.mode == "standard":
            logits = self.net(x)
            loss = F.cross_entropy(logits, y)
            self.log("train/acc", (logits.argmax(-1) == y).float().mean(), prog_bar=True)
        else:
            sigma = self.current_sigma()
            k = h.k
            params = {n: p for n, p in self.net.named_parameters() if n in self.perturbed_names}
            perturbed = sample_realisations(params, self.perturbed_names, sigma, h.noise_form, k)
            logits = realisation_logits(self.net, x, perturbed, vectorize=h.vectorize)
            lam = h.lam if h.mode == "dwp" else 0.0
            loss, stats = dwp_loss(logits, y, lam, h.temperature)
            self.log("train/sigma", sigma)
            self.log("train/affinity", stats.affinity.mean(), prog_bar=True)
            if h.mode == "dwp":
                self.log("train/alpha_mean", stats.alpha.mean())
                self.log("train/alpha_max", stats.alpha.max())
                self.log("train/disagreement", stats.disagreement.mean())
        self.log("train/loss", loss, prog_bar=True)
        return loss

    # ------------------------------------------------------------------------------------------ evaluation

    def _accuracies(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
        clean = (self.net(x).argmax(-1) == y).float().mean()
        # One fixed mismatch draw (same chip for every batch), a cheap proxy for robustness during training.
        generator = torch.Generator(device=x.device).manual_seed(1234)
        drawn = {
            name: param + mismatch_noise(param, self.hparams.val_sigma, self.hparams.noise_form, generator)
            for name, param in self.net.named_parameters()
            if name in self.perturbed_names
        }
        noisy_logits = torch.func.functional_call(self.net, drawn, (x,))
        return {"acc": clean, "acc_noisy": (noisy_logits.argmax(-1) == y).float().mean()}

    def validation_step(self, batch, batch_idx):
        for key, value in self._accuracies(*batch).items():
            self.log(f"val/{key}", value, prog_bar=True)

    def test_step(self, batch, batch_idx):
        for key, value in self._accuracies(*batch).items():
            self.log(f"test/{key}", value)

    def predict_step(self, batch, batch_idx):
        return self.net(batch[0]).argmax(-1)

    def configure_optimizers(self):
        h = self.hparams
        optimizer = torch.optim.Adam(self.parameters(), lr=h.lr, weight_decay=h.weight_decay)
        if not h.cosine_schedule:
            return optimizer
        total = self.trainer.estimated_stepping_batches
        if not math.isfinite(total) or total < 1:
            return optimizer
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=int(total))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    # ------------------------------------------------------------------------------------------- deployment

    def to_cim(self, config: CIMConfig | None = None) -> DWPModule:
        """A copy whose backbone runs on CIM layers (``config``, else the module's own ``cim``, else defaults)."""
        clone = copy.deepcopy(self).eval()
        layers = list(cim_layers(clone.net))
        if not layers:
            convert_to_cim(clone.net, config or self.hparams.cim or CIMConfig())
        elif config is not None:
            for _, layer in layers:
                layer.cim_config = config
        return clone

    def export_metadata(self) -> dict:
        h = self.hparams
        return {
            "method": {
                "mode": h.mode,
                "sigma_train": h.sigma_train,
                "noise_form": h.noise_form,
                "k": h.k,
                "lam": h.lam,
                "temperature": h.temperature,
                "curriculum": h.curriculum,
            },
            "perturbed_parameters": len(self.perturbed_names),
        }
