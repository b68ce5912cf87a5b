"""LaViDModule: the student CNN trained with CE plus the LaViD signature loss (or a baseline's loss).

The loss and the network are :mod:`zoo.lavid.student`'s. The class signatures S (and, for ``text_emb``, the
class-name embeddings) come from the datamodule at ``setup`` and are kept in buffers, so a published student
carries its S in ``model.safetensors``; ``export_files`` adds ``questions.txt`` and ``signatures.json``
(teacher identity, temperature, the class -> ImageNet/WordNet sources). See :mod:`zoo.lavid` for the paper
and the deviations.
"""

from __future__ import annotations

import json
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import torch

from zoo._distributed import refuse_distributed
from zoo._errors import ZooError
from zoo._inference import ImageClassifierMixin
from zoo.lavid import INPUT
from zoo.lavid.student import StudentCNN, aux_dim, check_mode, make_optimizer, mode_targets, student_loss


class LaViDModule(ImageClassifierMixin, pl.LightningModule):
    """A few-shot student trained with ``mode``'s loss; ``predict(raw_images)`` gives class ids.

    Args:
        mode: ``ce``, ``lavid``, ``lavid_hard``, ``shuffled``, ``makd``, ``text_emb`` (``kd`` runs in the
            evaluation's plain loop only: it needs a teacher's logits per image).
        num_classes: C (10 for Fashion-MNIST, 2 for the spurious set).
        num_questions: N.
        num_options: M.
        beta: Weight of the auxiliary loss (the paper's 40; 0 gives CE).
        gamma: Weight of CE (the paper's 1).
        lr: SGD learning rate (momentum 0.9).
        weight_decay: SGD weight decay.
        epochs: Length of the step schedule (x0.1 at 150/180/210 of 240, scaled); set trainer.max_epochs equal.
        shuffle_seed: Seed of the ``shuffled`` derangement.
        seed: Initialisation seed of the network.
    """

    HEAD = "net.fc"
    DEFAULT_PRETRAINED_CFG = INPUT

    def __init__(
        self,
        mode: str = "lavid",
        num_classes: int = 10,
        num_questions: int = 30,
        num_options: int = 5,
        beta: float = 40.0,
        gamma: float = 1.0,
        lr: float = 0.01,
        weight_decay: float = 5e-4,
        epochs: int = 60,
        shuffle_seed: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        check_mode(mode)
        if mode == "kd":
            raise ZooError("mode 'kd' needs a teacher's logits per image; `zoo eval lavid` runs it (arm kd)")
        self.save_hyperparameters()
        signature_dim = num_questions * num_options
        torch.manual_seed(seed)
        self.net = StudentCNN(num_classes, aux_dim(mode, signature_dim))
        self.register_buffer("signatures", torch.full((num_classes, signature_dim), 1.0 / num_options))
        self.register_buffer("targets", torch.zeros(num_classes, self.net.feature2question.out_features)
                             if self.net.feature2question is not None else torch.zeros(num_classes, 0))  # fmt: skip
        self.example_input_array = torch.zeros(2, 1, 28, 28)
        self._questions_text: str | None = None
        self._signature_record: str | None = None

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images)

    def setup(self, stage: str) -> None:
        refuse_distributed(
            self, "a few-shot run of 50-100 images is one process (DDP would change the data order)", stage
        )
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if datamodule is None or stage != "fit":
            return
        if datamodule.signatures is None:
            datamodule.setup(stage)
        self.set_signatures(datamodule.signature_set, datamodule.name_embeddings)

    def set_signatures(self, signature_set, name_embeddings=None) -> None:
        """Store S (and the mode's targets) in the buffers; rows must match the classes."""
        from zoo.lavid.classes import signature_record
        from zoo.lavid.signatures import check_signature_matrix, format_questions

        hp = self.hparams
        check_signature_matrix(signature_set.matrix, hp.num_classes, hp.num_questions, hp.num_options)
        self.signatures.copy_(torch.from_numpy(np.asarray(signature_set.matrix)))
        targets = mode_targets(hp.mode, signature_set.matrix, hp.num_options, name_embeddings, hp.shuffle_seed)
        if targets is not None:
            self.targets.copy_(targets)
        self._questions_text = format_questions(signature_set.questions)
        self._signature_record = signature_record(signature_set)

    def _loss(self, batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        images, labels = batch
        logits, h = self.net.forward_features(images)
        aux = self.net.feature2question(h) if self.net.feature2question is not None else None
        loss, aux_loss = student_loss(
            self.hparams.mode, logits, aux, labels, self.targets, self.hparams.beta, gamma=self.hparams.gamma
        )
        return loss, aux_loss, (logits.argmax(-1) == labels).float().mean()

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        loss, aux_loss, acc = self._loss(batch)
        self.log_dict({"train_loss": loss, "train_aux_loss": aux_loss, "train_acc": acc}, on_epoch=True, on_step=False)
        return loss

    def validation_step(self, batch, batch_idx: int) -> None:
        images, labels = batch
        self.log("val_acc", (self(images).argmax(-1) == labels).float().mean(), prog_bar=True)

    def test_step(self, batch, batch_idx: int) -> None:
        images, labels = batch
        self.log("test_acc", (self(images).argmax(-1) == labels).float().mean())

    def configure_optimizers(self):
        optimizer, scheduler = make_optimizer(self, self.hparams.lr, self.hparams.weight_decay, self.hparams.epochs)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "epoch"}}

    def export_files(self) -> dict[str, str]:
        """``questions.txt`` (the paper's format) and ``signatures.json`` (teacher, temperature, sources)."""
        if self._questions_text is None:
            return {}
        return {"questions.txt": self._questions_text, "signatures.json": self._signature_record}

    def import_files(self, folder: str | Path) -> None:
        folder = Path(folder)
        if (folder / "questions.txt").is_file():
            self._questions_text = (folder / "questions.txt").read_text()
        if (folder / "signatures.json").is_file():
            self._signature_record = (folder / "signatures.json").read_text()

    @property
    def signature_info(self) -> dict:
        """The teacher identity, temperature and class sources of the stored S (empty if none was set)."""
        return json.loads(self._signature_record) if self._signature_record else {}
