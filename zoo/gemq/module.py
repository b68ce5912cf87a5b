"""GEMQModule: the MoE language model, its pretraining, and GEMQ quantization with router fine-tuning.

Implements **GEMQ: Global Expert-level Mixed-precision Quantization for MoE LLMs** (arXiv 2605.23078) on a small
Mixtral-architecture LM trained from scratch on the Wikipedia articles of gensim's test data. The algorithm lives in
:mod:`zoo.quant.moe` (plain torch, reusable on any transformers MoE model); this module wires it into Lightning.

Two modes, chosen by ``gemq``:

* ``gemq=None``: pretraining; ``training_step`` is the causal-LM loss plus the load-balancing loss. The published
  ``gemq.wiki_fp`` checkpoint.
* ``gemq=GEMQConfig(...)``: quantization. ``setup("fit")`` loads the float weights of ``source`` (a registry name),
  computes ``c[l, e, b]`` on the calibration set, solves the global ILP, quantizes the experts with GPTQ into packed
  low-bit storage and records the allocation in ``quantization`` (saved in config.json). The fit loop then
  fine-tunes only the routers on the calibration sequences (``training_step`` = causal-LM loss). The published
  ``gemq.wiki_2p5bit`` / ``wiki_2bit`` / ``wiki_1p5bit`` checkpoints.

Deviations from the paper, and the choices the spec left open:

* Model and data: the paper quantizes Mixtral-8x7B / DeepSeek-V2-Lite calibrated on C4 and WikiText-2 and scores
  zero-shot accuracy. Here: a 4.46 M-parameter Mixtral (4 layers, 8 experts, top-2) trained by us; calibration is
  64 x 128 tokens of our Wikipedia train split (not 128 x 2048); quality is held-out perplexity and next-token
  accuracy.
* Only the routed experts are quantized in the evaluation and the checkpoints (the paper also puts attention and
  dense layers at 4 bits, "A4-G16-D4"); ``MoEQuantConfig.linear_bits=4`` does that when wanted. Routers,
  embeddings and the LM head stay in full precision, as in the paper.
* ``c[l, e, b]`` weights the squared error of the MoE block output by the squared loss gradient at that output
  (the decoder layer output gradient in the paper; the same tensor, since the block output is added to the
  residual stream).
* GPTQ: inputs never seen in calibration get an identity Hessian and keep their weights (the reference zeroes
  them); an expert that receives no calibration token is quantized with RTN; the quantizer range always contains
  0 (as in GPTQ's reference quantizer).
* GPTQ runs the experts of a block as one batch (each with its own Hessian and width; the result equals one matrix
  at a time, see ``gptq_quantize_batched``) and with one intra-op thread: the column loop is bound by per-operation
  overhead, and on the shared 2-core machine two threads made it 10-16x slower.
* Solver: HiGHS through ``scipy.optimize.milp`` instead of Gurobi; both are exact on these sizes.
* Router fine-tuning: the paper's recipe (AdamW, lr 1e-4, one epoch over the calibration set, batch size 8 here).
* Weights are stored in fp16 (the "fp16" arm); computation is in fp32 on CPU. No Triton kernels: the packed
  experts are dequantized on the fly in torch.
* Split v2 (the ``gemq.wiki2_*`` bases, :func:`zoo.gemq.data.wiki_splits`): disjoint train / calibration /
  validation / test articles and the Lee corpus as out-of-domain text; the bases are regularised (dropout 0.1,
  weight decay 0.1, random window offsets, early stopping on the validation slice restoring the best weights) and
  sized under the 10 MB per-file limit; 640 x 128 calibration tokens per seed; every GPTQ arm's dampening is chosen
  on validation, and router fine-tuning is replaced by alignment to the fp model's routing
  (:mod:`zoo.gemq.alignment`), early-stopped on the validation routing KL.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import lightning.pytorch as pl
import torch

from zoo._errors import ZooError
from zoo._inference import PretrainedMixin
from zoo.common.schedules import warmup_cosine
from zoo.gemq import INPUT_FORMAT
from zoo.gemq.model import MoEArch, build_moe_lm, round_to_fp16
from zoo.quant.moe.api import convert_for_loading
from zoo.quant.moe.config import MoEQuantConfig
from zoo.quant.moe.importance import causal_lm_loss
from zoo.quant.moe.pipeline import GEMQConfig, gemq_quantize  # noqa: F401 - GEMQConfig: init-arg type
from zoo.quant.moe.quantizers import torch_threads
from zoo.quant.moe.routing import router_parameters

TOKENIZER_FILE = "tokenizer.json"


class GEMQModule(PretrainedMixin, pl.LightningModule):
    """A Mixtral-style MoE causal LM, pretrained in full precision or GEMQ-quantized.

    Args:
        arch: Architecture of the language model.
        lr: Peak AdamW learning rate of pretraining.
        weight_decay: AdamW weight decay of pretraining (matrices only).
        warmup_steps: Linear warm-up steps before the cosine decay.
        router_aux_loss_coef: Weight of the load-balancing loss in pretraining.
        gemq: GEMQ settings; set to quantize ``source`` in ``setup("fit")`` and fine-tune the routers in ``fit``.
        source: Registry name of the float checkpoint that GEMQ quantizes.
        quantization: Packed structure of a quantized model (written by GEMQ; rebuilds it on load).
        restore_best: Pretraining: keep the weights of the validation run with the lowest ``val/nll`` and restore
            them when training ends (held-out early stopping; with ``EarlyStopping`` on ``val/nll`` it also stops).
            False in the published v1 recipe (the last weights).
        embed_dropout: Dropout on the token embeddings in pretraining (0 in the published v1 base); with
            ``arch.dropout`` (attention dropout) the regularisers of the v2 bases.
    """

    DEFAULT_PRETRAINED_CFG = {"input_format": INPUT_FORMAT}

    def __init__(
        self,
        arch: MoEArch | None = None,
        lr: float = 3e-3,
        weight_decay: float = 0.1,
        warmup_steps: int = 100,
        router_aux_loss_coef: float = 0.01,
        gemq: GEMQConfig | None = None,
        source: str | None = "gemq.wiki_fp",
        quantization: MoEQuantConfig | None = None,
        restore_best: bool = False,
        embed_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.arch = arch or MoEArch()
        # The hparams hold dataclass arguments as dicts (for config.json); the typed settings live here.
        self.gemq = GEMQConfig(**gemq) if isinstance(gemq, dict) else gemq
        if isinstance(quantization, dict):
            quantization = MoEQuantConfig.from_dict(quantization)
        self.model = build_moe_lm(self.arch, router_aux_loss_coef)
        round_to_fp16(self.model)
        if not 0.0 <= embed_dropout < 1.0:
            raise ValueError(f"embed_dropout must be in [0, 1), got {embed_dropout}")
        if embed_dropout:
            self.model.get_input_embeddings().register_forward_hook(_dropout_hook(embed_dropout))
        if quantization is not None:
            convert_for_loading(self.model, quantization)
        self.tokenizer_json: str | None = None
        self.report: dict = {}
        self.best_val: tuple[float, int, dict | None] = (math.inf, -1, None)  # (val nll, global step, weights)
        self.val_history: list[tuple[int, float]] = []  # (global step, val nll) of every validation run
        self.example_input_array = torch.zeros(2, 16, dtype=torch.long)
        # Weights are published in fp16 (a 4.5 M-parameter model in fp32 would exceed 10 MB); they are fp16 values
        # already (round_to_fp16 after init and after training), so saving and reloading is exact.
        self.register_state_dict_post_hook(_float32_to_fp16)

    @property
    def quantized(self) -> bool:
        """Whether the experts are packed low-bit."""
        return self.hparams.quantization is not None

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Next-token logits ``[B, T, vocab]``."""
        return self.model(input_ids=input_ids).logits

    # ------------------------------------------------------------------------------------------------ quantize

    def setup(self, stage: str) -> None:
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if stage != "fit" or datamodule is None:
            return
        if self.gemq is None:
            self.tokenizer_json = datamodule.tokenizer_json
            return
        if self.quantized:
            return  # already quantized (e.g. a reloaded checkpoint): the fit loop only fine-tunes the routers
        self.quantize_from_source(datamodule.calibration, datamodule.tokenizer_json)

    def quantize_from_source(self, calibration: torch.Tensor, tokenizer_json: str | None = None) -> dict:
        """Load the float ``source`` checkpoint and run GEMQ (importance, allocation, GPTQ) without router tuning."""
        import zoo

        if not self.hparams.source:
            raise ZooError(
                "GEMQ quantization needs source= (a registry name of the float checkpoint, e.g. gemq.wiki_fp)"
            )
        source = zoo.load(self.hparams.source, pretrained=True)
        if source.quantized:
            raise ZooError(f"{self.hparams.source} is already quantized; GEMQ starts from a full-precision checkpoint")
        if tokenizer_json is not None and source.tokenizer_json is not None and tokenizer_json != source.tokenizer_json:
            raise ZooError(
                f"the calibration data is tokenized differently from {self.hparams.source}; use its vocab_size"
            )
        self.model.load_state_dict(source.model.state_dict())
        self.tokenizer_json = source.tokenizer_json
        gemq = dataclasses.replace(self.gemq, router_finetune=False)
        with torch_threads(1):  # small-tensor work: one intra-op thread is fastest (see torch_threads)
            self.report = gemq_quantize(self.model, calibration, gemq)
        self.hparams.quantization = MoEQuantConfig.from_dict(self.report["quant_config"])
        return self.report

    # ------------------------------------------------------------------------------------------------- train

    def training_step(self, batch, batch_idx):
        (input_ids,) = batch
        if self.gemq is not None:
            loss = causal_lm_loss(self.model, input_ids)
            self.log("router_ft/loss", loss, prog_bar=True)
            return loss
        output = self.model(input_ids=input_ids, labels=input_ids, output_router_logits=True)
        self.log("train/loss", output.loss, prog_bar=True)
        self.log("train/aux_loss", output.aux_loss)
        return output.loss

    def validation_step(self, batch, batch_idx):
        (input_ids,) = batch
        loss = causal_lm_loss(self.model, input_ids)
        self.log("val/nll", loss, prog_bar=True, batch_size=input_ids.shape[0])

    def on_validation_epoch_end(self) -> None:
        nll = self.trainer.callback_metrics.get("val/nll")
        if nll is not None:
            self.log("val/ppl", math.exp(float(nll)))
            if not self.trainer.sanity_checking:
                self.val_history.append((int(self.global_step), float(nll)))
            if self.hparams.restore_best and not self.trainer.sanity_checking and float(nll) < self.best_val[0]:
                weights = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
                self.best_val = (float(nll), int(self.global_step), weights)
            if self.hparams.restore_best and self.best_val[2] is not None:
                self.log("val/best_ppl", math.exp(self.best_val[0]))

    def restore_best_weights(self) -> bool:
        """Load the weights of the best validation run (``restore_best``); False when none was recorded."""
        if self.best_val[2] is None:
            return False
        self.model.load_state_dict(self.best_val[2])
        self.report["best_val"] = {"nll": self.best_val[0], "ppl": math.exp(self.best_val[0]), "step": self.best_val[1]}
        return True

    def on_train_end(self) -> None:
        if self.hparams.restore_best:
            self.restore_best_weights()
        round_to_fp16(self.model)  # what is published is what is evaluated

    def configure_optimizers(self):
        if self.gemq is not None:
            return torch.optim.AdamW(router_parameters(self.model), lr=self.gemq.router_lr, weight_decay=0.0)
        decay = [p for p in self.model.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.model.parameters() if p.dim() < 2]
        optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": self.hparams.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=self.hparams.lr,
            betas=(0.9, 0.95),
        )
        total = max(int(self.trainer.estimated_stepping_batches), 1)
        warmup = min(self.hparams.warmup_steps, total // 2)

        scheduler = warmup_cosine(optimizer, warmup, total)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    # ----------------------------------------------------------------------------------------------- export

    def export_metadata(self) -> dict:
        meta: dict = {"arch": self.arch}
        if "best_val" in self.report:
            meta["best_val"] = self.report["best_val"]
        if "widths" in self.report:
            meta["gemq"] = {"widths": self.report["widths"], "timings_s": self.report["timings"]}
        return meta

    def export_files(self) -> dict[str, str]:
        return {TOKENIZER_FILE: self.tokenizer_json} if self.tokenizer_json else {}

    def import_files(self, folder: str | Path) -> None:
        path = Path(folder) / TOKENIZER_FILE
        if path.is_file():
            self.tokenizer_json = path.read_text()

    @torch.no_grad()
    def perplexity(self, text: str, seq_len: int = 128) -> float:
        """Perplexity of ``text`` as the card measures it: non-overlapping ``seq_len``-token windows.

        Args:
            text: The text (at least ``seq_len`` tokens).
            seq_len: Window length (the card's evaluation uses 128).
        """
        from zoo.quant.moe.routing import lm_metrics

        ids = torch.tensor(self.tokenizer().encode(text).ids)
        windows = ids.numel() // seq_len
        if windows == 0:
            raise ZooError(f"the text has {ids.numel()} tokens; perplexity needs at least seq_len={seq_len}")
        metrics, _ = lm_metrics(self.model, ids[: windows * seq_len].view(windows, seq_len))
        return metrics["ppl"]

    def tokenizer(self):
        """The BPE this checkpoint was trained with (a ``tokenizers.Tokenizer``)."""
        from zoo.common.text import load_bpe

        if self.tokenizer_json is None:
            raise ZooError(
                "this module has no tokenizer; load a pretrained checkpoint (zoo.load(..., pretrained=True))"
            )
        return load_bpe(self.tokenizer_json)


def _dropout_hook(p: float):
    def hook(module, _args, output):
        return torch.nn.functional.dropout(output, p, module.training)

    return hook


def _float32_to_fp16(module, state_dict, prefix, local_metadata) -> None:
    for key, value in state_dict.items():
        if key.startswith(prefix) and value.dtype == torch.float32:
            state_dict[key] = value.half()
