"""PrefetchRAGModule: predictive prefetching for asynchronous RAG, at laptop scale.

Implements **Predictive Prefetching for Retrieval-Augmented Generation** (Pei & Zhang, ICML 2026,
arXiv 2605.17989). No code was published; everything below the abstract is reconstructed (R) after the project's
spec (``shared/papers/01-prefetch-rag.md``). Substitutions: the LLM is our GPT-2 d128/L4 (1.35 M
parameters, ``transformers`` with its KV cache) with our byte-level BPE (vocab 4096, :mod:`zoo.common.text`);
HotpotQA is replaced by templated country QA over ``countryinfo`` facts (:mod:`zoo.prefetch_rag.corpus`); the
remote index by a local faiss ``IndexFlatIP`` over MiniLM (all-MiniLM-L6-v2, :mod:`zoo.common.minilm`) embeddings
of the fact documents plus 4.8 k Wikipedia chunks and the 300 Lee news documents as distractors. The headline
latency is **simulated** (:mod:`zoo.prefetch_rag.clock`: 25 ms per decoded token, 300 ms per retrieval, 1 ms per
prefill token); a wall-clock run with a thread pool and injected sleeps checks it.

Components (as the spec gives them):

* RetrievalPredictor: MLP (d + w + n_heads + 1 -> 128 -> 1) over the window w = 8 (mean last-layer hidden state,
  entropy trajectory, per-head last-layer attention entropy, top-1/top-2 margin); p(spike within k = 12 tokens);
  BCE with pos_weight = neg/pos; fires when p > tau and nothing is pending. Inputs are standardised with the
  training features' mean and std (buffers).
* QueryGenerator: linear head d -> 384, target the MiniLM embedding of the gold document of the upcoming slot,
  loss 1 - cos; query ``normalize(alpha q_h + (1 - alpha) MiniLM(text))``. The text query (R, every active arm's):
  the spec's last 32 tokens lose the country once a long lead-in says "its" (gold document in the top 3 at 61% of
  validation slots), so the recipe sets ``Hyper.query_question``: the question, which names the country, then the
  last 16 answer tokens (85%; a retrieval-only validation diagnostic, card.md). Since the fourth release the recipe
  also sets ``Hyper.query_topic``: the answer's latest topic sentence (intro or switch) leads the query instead of the
  question, which in a multi-domain answer names both countries and fetched both countries' documents of the
  attribute (a validation diagnostic of sync_active's runs, card.md).
* ContextMonitor: every 4 tokens ``drift = 1 - cos(normalize(W h), q_inflight)``; above delta the pending prefetch
  is cancelled and re-issued. (R) ``Hyper.monitor_anchor = "head"`` compares ``normalize(W h)`` with the head's
  vector when the prefetch was issued instead of the in-flight query: that query mixes in the text query, so the
  spec's drift of an unchanged context grows as alpha falls (at alpha 0.2 the monitor re-issued every few tokens).
  Which anchor prefetch uses is a tuned choice (:data:`zoo.prefetch_rag.tune.GRIDS`).

Reconstruction choices and deviations (R):

* The generator reads its context through a pointer (copy) head on top of the GPT-2 (pointer-generator mixture,
  See et al. 2017; :class:`zoo.prefetch_rag.lm.PointerGPT2`, ``lm.pointer``): without it the d128/L4 never learned
  to copy a slot value from its documents within the CPU budget (oracle EM with the gold documents in context 0.00
  after 500 steps x 16 and 700 steps x 8 with the slot loss weighted x10), so retrieval could not
  help it and the task had no headroom. An LLM reads its context; the pointer is the small LM's substitute for that.

* Two stages in one recipe. Stage 1 (``training_step``): causal-LM loss on the answer tokens of sequences
  ``[documents] <eos> question <eos> answer`` from the ``lm`` countries (20% without documents, else 1-2 gold
  documents and 0-2 distractors). Facts are **counterfactual** in training (every fact of a sequence gets a random
  value of its attribute, in the answer and the documents alike), so the LM learns to copy rather than memorise:
  the first recipe run with true values memorised the 97 training countries and copied nothing (validation EM
  3%, with the gold documents in context too). At test time the facts are true and the countries unseen.
  Stage 2 (``on_train_end``, LM frozen): (a) theta and the decoder's ``keep_blocks`` rule (see
  :mod:`zoo.prefetch_rag.decoder`) are chosen jointly on the selection questions (30 single- and 20 multi-domain
  questions about the ``val`` countries with val lead-ins; the headroom gates are read on the declared validation
  set, whose multi-domain questions are other ones: :mod:`zoo.prefetch_rag.data`) over ``theta_grid`` x
  ``keep_grid`` by the synchronous baseline: the highest EM, ties within 1 point broken by the lowest latency
  (``keep_blocks`` then holds for every arm); (b) the synchronous baseline at that choice runs over the
  ``heads`` questions (countries the LM never saw, train lead-ins) and its spikes label every position (spike in
  (t, t + k]); (c) predictor and query head train on those positions (Adam, ``head_epochs``; plain torch,
  :func:`zoo.prefetch_rag.heads.train_heads`, which runs without a Trainer).
* Lead-ins: the LM and the heads train on 24 long + 8 short lead-ins per attribute, the validation and test
  questions use others (6 + 2 each, 2 + 1 before 2026-12-04); the BPE too is fitted without them
  (:func:`zoo.prefetch_rag.lm.tokenizer_texts`).
  The wider training pool is what lets the predictor recognise an unseen lead-in (validation AUROC 0.735 with
  5 + 2, 0.855 / 0.808 with 12 + 4, 0.85-0.87 with 24 + 8; :mod:`zoo.prefetch_rag.lead_ins`), with Gaussian noise on
  the predictor's standardised inputs while it trains (``predictor_noise``, R: the spec trains it on clean features).
  Stage 2's ``heldout_auroc`` holds out random
  positions, whose neighbours trained the predictor, so it is optimistic; the card's validation AUROCs
  score unseen questions.
* Decoding protocol, spike definition, prefetch use at a spike, re-ranking of ``candidates`` and the fallback:
  see :mod:`zoo.prefetch_rag.decoder`. A slot triggers at most one spike. An in-flight prefetch whose query is still
  valid at a spike is waited for (it is not a hit; a hit is a ready result that resolves the spike).
* Prefill: only the inserted documents' tokens are charged (the spec); the initial prompt is charged too.
* Documents inserted are cut to 32 tokens (Wikipedia chunks are 120 words); the context keeps the last
  ``keep_blocks`` inserted blocks (1: replace).
* TeleRAG-like: a retrieval every ``interval`` tokens with the text query; PipeRAG-like: the same with the text as it
  was ``staleness`` tokens earlier; both use the prefetch path at a spike (rho check, re-ranking, fallback).
* Ablations: ``prefetch_no_predictor`` fires every 16 tokens (with query head and monitor),
  ``prefetch_no_query_head`` uses alpha = 0 (text-only query), ``prefetch_no_monitor`` never re-issues.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import torch
import torch.nn.functional as F

from zoo._distributed import refuse_distributed
from zoo._inference import PretrainedMixin
from zoo.common.schedules import warmup_cosine
from zoo.prefetch_rag import INPUT_FORMAT
from zoo.prefetch_rag.clock import ClockConstants
from zoo.prefetch_rag.decoder import Decoder, Hyper
from zoo.prefetch_rag.heads import QueryGenerator, RetrievalPredictor, spike_labels, train_heads
from zoo.prefetch_rag.lm import LMConfig, Tokens, build_lm

TOKENIZER_FILE = "tokenizer.json"


class PrefetchRAGModule(PretrainedMixin, pl.LightningModule):
    """GPT-2 generator + RetrievalPredictor + QueryGenerator (the monitor reuses the head).

    Args:
        lm: Generator architecture.
        hyper: Decoder constants (theta is replaced by the stage-2 choice when ``theta_grid`` is set).
        clock: Latency-model constants.
        lr: Peak AdamW learning rate of the LM (linear warm-up, cosine decay to 10%).
        warmup_steps: Warm-up steps.
        theta_grid: Entropy thresholds tried on validation in stage 2 (empty: keep ``hyper.theta``).
        keep_grid: Values of ``hyper.keep_blocks`` tried with every theta in stage 2 (empty: keep
            ``hyper.keep_blocks``); the (theta, keep_blocks) pair is chosen jointly.
        val_single: Single-domain selection questions for that choice (``data.selection_questions``).
        val_multi: Multi-domain selection questions for that choice.
        head_epochs: Epochs of the predictor / query-head training.
        head_lr: Their Adam learning rate.
        predictor_hidden: Predictor hidden width.
        predictor_noise: Std of the Gaussian noise added to the predictor's standardised inputs while it trains
            (R; 0: none). The features of an unseen lead-in lie off the training templates; on the declared
            validation questions (val lead-ins) noise 2.0 lifted the predictor's AUROC from 0.80 to 0.87 and from
            0.72 to 0.78 on the fourth release's seed 0 and seed 1 LMs, from 0.83 to 0.85 on the fifth release's
            seed 0 LM (24 + 8 training lead-ins; the predictor retrained per noise std, card.md).
        seed: Seed of the heads' initialisation.
        slot_weight: Weight of the slot tokens (value and stop) in the LM loss (1: plain causal-LM loss). The
            slots are ~15% of the answer tokens; a larger weight pushes the copy behaviour (see the issue note).
        num_threads: torch threads while fitting (1: the machine's 2 cores are shared; small matmuls lose more to
            contention than a second thread gains).
    """

    DEFAULT_PRETRAINED_CFG = {"input_format": INPUT_FORMAT}

    def __init__(
        self,
        lm: LMConfig | None = None,
        hyper: Hyper | None = None,
        clock: ClockConstants | None = None,
        lr: float = 3e-3,
        warmup_steps: int = 50,
        theta_grid: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0),
        keep_grid: tuple[int, ...] = (),
        val_single: int = 30,
        val_multi: int = 20,
        head_epochs: int = 40,
        head_lr: float = 1e-3,
        predictor_hidden: int = 128,
        predictor_noise: float = 0.0,
        seed: int = 0,
        slot_weight: float = 1.0,
        num_threads: int = 1,
    ) -> None:
        super().__init__()
        if slot_weight <= 0:
            raise ValueError(f"slot_weight must be > 0, got {slot_weight}")
        if predictor_noise < 0:
            raise ValueError(f"predictor_noise must be >= 0, got {predictor_noise}")
        self.save_hyperparameters()
        self.lm_cfg = lm or LMConfig()
        self.hyper = hyper or Hyper()
        self.clock_constants = clock or ClockConstants()
        torch.manual_seed(seed)
        self.lm = build_lm(self.lm_cfg)
        self.predictor = RetrievalPredictor(self.lm_cfg.n_embd, self.hyper.w, self.lm_cfg.n_head, predictor_hidden)
        self.query_head = QueryGenerator(self.lm_cfg.n_embd)
        self.register_buffer("theta", torch.tensor(float(self.hyper.theta)))
        self.register_buffer("keep_blocks", torch.tensor(int(self.hyper.keep_blocks)))
        self.tokens: Tokens | None = None
        self.stage2: dict = {}
        self.example_input_array = torch.zeros(1, 16, dtype=torch.long)

    # ------------------------------------------------------------------ LM stage

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Next-token logits ``(batch, length, vocab)``."""
        return self.lm(input_ids=input_ids).logits

    def _slot_weights(self, batch) -> torch.Tensor:
        """Per-position loss weights ``(B, T - 1)``: ``slot_weight`` on slot tokens, 1 elsewhere, 0 where ignored."""
        labelled = (batch["labels"][:, 1:] != -100).float()
        if "slot_mask" not in batch:
            return labelled
        return (1.0 + (self.hparams.slot_weight - 1.0) * batch["slot_mask"][:, 1:]) * labelled

    def _loss(self, batch) -> torch.Tensor:
        if hasattr(self.lm, "token_nll"):  # pointer LM: the mixture only at the labelled positions
            nll = self.lm.token_nll(batch["input_ids"], batch["attention_mask"], batch["labels"])
        elif self.hparams.slot_weight == 1.0 or "slot_mask" not in batch:  # plain LM, unweighted
            return self.lm(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]
            ).loss
        else:  # plain LM, slot-weighted
            logits = self.lm(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
            nll = F.cross_entropy(logits.transpose(1, 2), batch["labels"][:, 1:], ignore_index=-100, reduction="none")
        weights = self._slot_weights(batch)
        return (nll * weights).sum() / weights.sum().clamp_min(1.0)

    def training_step(self, batch, batch_idx):
        loss = self._loss(batch)
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val/loss", self._loss(batch), prog_bar=True)

    def configure_optimizers(self):
        h = self.hparams
        params = list(self.lm.parameters())
        optimizer = torch.optim.AdamW(params, lr=h.lr, betas=(0.9, 0.95), weight_decay=0.01)
        total = max(1, int(self.trainer.estimated_stepping_batches))

        scheduler = warmup_cosine(optimizer, h.warmup_steps, total)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def on_fit_start(self) -> None:
        torch.set_num_threads(self.hparams.num_threads)

    def setup(self, stage: str) -> None:
        refuse_distributed(self, "stage 2 (theta choice, heads) runs the decoder loop once, on one process", stage)
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if datamodule is not None and hasattr(datamodule, "build_tokens"):
            self.tokens = datamodule.build_tokens()
            if self.tokens.tokenizer.get_vocab_size() > self.lm_cfg.vocab_size:
                raise ValueError("the tokenizer is larger than lm.vocab_size")

    # ------------------------------------------------------------------ stage 2

    def on_train_end(self) -> None:
        if self.trainer.fast_dev_run:
            return
        datamodule = self.trainer.datamodule
        self.fit_stage2(datamodule.retriever(), datamodule.heads_questions())

    def decoder(self, retriever, encoder=None, hyper: Hyper | None = None) -> Decoder:
        """The decoder loop over this checkpoint (``hyper`` defaults to the stored constants with its theta)."""
        from zoo.prefetch_rag.index import TextEncoder

        if self.tokens is None:
            raise ValueError("no tokenizer: load a checkpoint with tokenizer.json or fit the module first")
        hyper = hyper or Hyper(
            **{**asdict(self.hyper), "theta": float(self.theta), "keep_blocks": int(self.keep_blocks)}
        )
        self.eval()
        return Decoder(
            self.lm, self.tokens, retriever, encoder or TextEncoder(), self.predictor, self.query_head, hyper
        )

    def choose_theta(self, retriever, questions, encoder=None) -> dict:
        """Stage 2a: theta (and ``keep_blocks`` over ``keep_grid``) of the synchronous baseline on validation
        questions: the highest EM over all slots, ties within 1 point broken by the lowest latency."""
        from zoo.prefetch_rag.scoring import run_arm

        trials = []
        for keep in self.hparams.keep_grid or (self.hyper.keep_blocks,):
            for theta in self.hparams.theta_grid:
                hyper = Hyper(**{**asdict(self.hyper), "theta": float(theta), "keep_blocks": int(keep)})
                metrics = run_arm(self.decoder(retriever, encoder, hyper), questions, "sync_active")
                trials.append({"theta": float(theta), "keep_blocks": int(keep), "em": metrics["em_all"],
                               "em_single": metrics["em"], "em_multi": metrics["em_multi"],
                               "latency_ms": metrics["latency_ms_mean"]})  # fmt: skip
                print("prefetch_rag stage 2 trial:", trials[-1])
        best_em = max(t["em"] for t in trials)
        chosen = min((t for t in trials if t["em"] >= best_em - 0.01), key=lambda t: t["latency_ms"])
        return {"trials": trials, "theta": chosen["theta"], "keep_blocks": chosen["keep_blocks"]}

    def fit_stage2(self, retriever, heads_questions, encoder=None) -> dict:
        """Choose theta on validation, label the heads' questions with the sync baseline, train the heads."""
        from zoo.prefetch_rag.data import selection_questions
        from zoo.prefetch_rag.index import TextEncoder

        torch.set_num_threads(1)  # one-token forwards: a second thread only adds contention on 2 shared cores
        start = time.perf_counter()
        encoder = encoder or TextEncoder()
        self.lm.eval()
        self.lm.requires_grad_(False)
        if self.hparams.theta_grid:
            val = selection_questions(self.hparams.val_single, self.hparams.val_multi)
            record = self.choose_theta(retriever, val, encoder)
            self.theta.fill_(record["theta"])
            self.keep_blocks.fill_(record["keep_blocks"])
            self.stage2["theta_choice"] = record
        x, y, hx, hy = self.heads_data(self.decoder(retriever, encoder), heads_questions)
        h = self.hparams
        record = train_heads(self.predictor, self.query_head, x, y, hx, hy, seed=h.seed, epochs=h.head_epochs,
                             lr=h.head_lr, noise=h.predictor_noise)  # fmt: skip
        self.stage2.update(record)
        self.stage2["seconds"] = round(time.perf_counter() - start, 1)
        print(f"prefetch_rag stage 2: {self.stage2}")
        return self.stage2

    def heads_data(self, decoder, questions) -> tuple[torch.Tensor, ...]:
        """The heads' training data from the synchronous baseline's runs over ``questions``: predictor features
        ``x`` and spike labels ``y`` at every answer position, query-head inputs ``hx`` and the gold documents'
        embeddings ``hy`` at every position that leads to a slot."""
        from zoo.prefetch_rag import corpus as C

        gold_index = {(c, a): i for i, (c, a, _) in enumerate(C.fact_documents())}
        features, labels, head_inputs, targets = [], [], [], []
        for question in questions:
            trace = decoder.answer(question, "sync_active", record=True)
            spikes = np.zeros(len(trace.tokens), dtype=bool)
            spikes[[s for s in trace.spikes if s < len(spikes)]] = True
            features.append(torch.stack(trace.features))
            labels.append(torch.from_numpy(spike_labels(spikes, self.hyper.k)))
            for t, slot_index in enumerate(trace.next_slot):
                if slot_index >= 0:
                    slot = question.slots[slot_index]
                    head_inputs.append(trace.head_inputs[t])
                    targets.append(decoder.retriever.embeddings[gold_index[(slot.country, slot.attribute)]])
        x, y = torch.cat(features), torch.cat(labels).float()
        return x, y, torch.stack(head_inputs), torch.from_numpy(np.stack(targets))

    # ------------------------------------------------------------------ publishing

    def export_metadata(self) -> dict:
        return {"stage2": self.stage2} if self.stage2 else {}

    def export_files(self) -> dict[str, str]:
        return {TOKENIZER_FILE: self.tokens.tokenizer.to_str()} if self.tokens is not None else {}

    def import_files(self, folder: str | Path) -> None:
        path = Path(folder) / TOKENIZER_FILE
        if path.is_file():
            from zoo.common.text import load_bpe

            self.tokens = Tokens(load_bpe(path.read_text()))
        config = Path(folder) / "config.json"
        if config.is_file():  # stage 2's record (theta / keep_blocks trials) for tune.py and the card's settings
            import json

            self.stage2 = dict(json.loads(config.read_text()).get("metadata", {}).get("stage2", {}))
