"""SpecExitModule: a target reasoning LM plus an EAGLE-style draft that also predicts when to stop thinking.

Implements **SpecExit: Accelerating Large Reasoning Model via Speculative Exit** (Yang, Bai, Liu, Yu, ..., Chen;
arXiv 2509.24248) at laptop scale. The draft of speculative decoding reads the target's hidden states anyway;
SpecExit widens the draft's ``fc`` by three rows whose outputs are a confidence, a progress and a
remaining-length signal, smooths them with an EWMA across verification rounds and, at a step delimiter in
the thinking block, cuts the reasoning and forces ``</think>`` once confidence > 0.8, progress > 0.3 and
remaining length < threshold. No extra model or pass is needed, unlike probing-based early exit.

Training runs in two stages (two recipes): ``stage="target"`` trains the target LM on generated traces;
``stage="draft"`` freezes it and trains the draft (token loss, 2-step unrolled, plus the signal losses) and,
for the probing baseline, a linear probe on target hidden states. See :mod:`zoo.specexit.decoding` for the
decoders, :mod:`zoo.specexit.exits` for the exit rules and :mod:`zoo.specexit.traces` for the data.

Deviations from the paper and choices where the spec reconstructs (R) (issue 34 rework):

* Scale: a small ``LlamaForCausalLM`` target (see ``recipes/specexit/arith_target.yaml``) and a ~0.25 M-parameter
  draft on generated arithmetic traces (20-180 tokens) instead of Qwen3 LRMs on GSM8K/GPQA (1-4 k tokens). The
  target is a base trained once by its own recipe and published inside ``specexit.arith``; the draft recipe and
  the evaluation's draft seeds train on it frozen.
* Traces (R): the published recipes write the **unmarked** grammar (:mod:`zoo.specexit.grammar`): step lines that
  each consume one operand (``+4=12.``), after each of them 0-2 genuine partial checks (a re-derivation ``8+4=12.``
  or an undo ``Check: 12-4=8.``; their number is set by the next operand, which the thinking text does not show), no
  bare answer line, then 0-4 redundant verifications in the same two formats. No string marks the exit point, so a
  stop pattern cannot find it (the evaluation's headroom gate); in the first recipes' ``checks`` grammar
  (:mod:`zoo.specexit.traces`, ``grammar="checks"``, still available) a bare answer line and then only ``Check:``
  lines follow the last step, and a tuned stop string matched the oracle exit. Training traces write a random
  number of redundant verifications (all of them half of the time, else uniform), so an exit after any of them is in
  distribution; greedy decoding writes all of them (the overthinking). No injected corrections (``p_wrong`` 0).
* Position ids (issue 34): **position coupling** (Cho et al. 2024, :mod:`zoo.specexit.positions`): a step line
  carries the position ids of the prompt entry it consumes, so reading the next operand is attention to an equal
  id at every problem length; in the unmarked grammar a verification line writes each value at the ids of the step
  that produced it. One causal helper assigns the ids in training batches, in target greedy decoding
  (KV cache), in the speculative verification pass, the probe pass and the draft (draft position ``i`` carries the
  id of the token it reads, ``i+1``); speculative decoding stays lossless because the target sees the same ids in
  every decoder. Attention is also limited to keys within ``WINDOW`` (48, four blocks of ``STRIDE`` 12) ids of the query
  (:func:`zoo.specexit.models.coupled_mask`): a first pilot without it solved 80% of 7-operand validation problems
  but 0-13% of 8-10, its first lines thrown off by prompt entries further ahead than any training prompt reached.
* Length: training problems have 2-6 operands with a curriculum (2 operands first, every count after
  ``curriculum_steps`` batches); the evaluation adds longer problems (7-10 operands). Operands 1-9 (spec 1-99),
  running values kept in 0..49, so long problems need no arithmetic the short ones do not.
* Tokenizer: a 25-token longest-match vocabulary (digits, operators, four word tokens, ``"\\n\\n"`` as the
  single-token step delimiter, ``<think>``/``</think>``); shipped as ``tokenizer.json``.
* Labels (R): the exit label ``L*`` is the earliest delimiter after which the answer the full trace gives is
  already determined (:func:`zoo.specexit.traces.exit_label`); progress = min(1, t/L*), remain =
  log(max(L*-t, 0)+1) and confidence = 1[t >= L*], as in the spec. The data acceptance check of the evaluation
  forces ``</think>`` at L*-1 and L*..L*+3 of clean traces.
* Exit rule: EWMA weight alpha = 0.1 as in the paper, progress > 0.3 as in the paper. The confidence and remain
  thresholds are **calibrated** on 100 validation problems when the draft recipe ends (:meth:`calibrate_exit`:
  fewest tokens within 1 accuracy point of speculative decoding; the probe's threshold likewise, same budget): with
  alpha 0.1 over the ~10-20 verification rounds of a thinking block the smoothed confidence cannot reach the
  paper's 0.8. The decision at a delimiter folds in the delimiter's own signal, read from the verification pass that
  accepted it (``ExitConfig.read_delimiter``; a 3-row slice of ``fc``, no extra pass): only the closing delimiter's
  features tell whether a line was the last computation.
* Loss weights (R): token CE (teacher-forced) + 1.0 x CE of the second unrolled step (self-feature) +
  1.0 BCE(confidence) + 1.0 MSE(progress) + 0.5 SmoothL1(log-remain).
* Drafting: a chain of depth ``k`` = 4 (top-1) instead of EAGLE-3's dynamic tree (60 tokens, depth 5,
  top-k 10): a tree adds little on CPU at this scale.
* EAGLE-3's 2H-wide draft attention is replaced by a 2H -> H projection before a stock ``LlamaDecoderLayer``.
* Probing baseline: DEER-style extra target pass on ``</think>Answer:`` at each delimiter, read by a
  linear probe trained on target hidden states (labels: forcing the answer there is correct); it runs
  on the same speculative decoder, so its cost over SpecExit is exactly the probing overhead.
"""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from zoo._distributed import refuse_distributed
from zoo._errors import ZooError
from zoo._inference import PretrainedMixin
from zoo.common.schedules import warmup_cosine
from zoo.specexit import INPUT_FORMAT
from zoo.specexit.decoding import GenerationResult, SpeculativeDecoder, target_generate
from zoo.specexit.exits import ExitConfig, NoExit, OracleExit, ProbeExit, SignalExit
from zoo.specexit.losses import LossWeights, masked_accuracy, masked_cross_entropy, unrolled_mask
from zoo.specexit.models import (
    ConcatCache,
    DraftConfig,
    EagleDraft,
    TargetConfig,
    build_target,
    target_forward,
)
from zoo.specexit.positions import batch_position_ids
from zoo.specexit.tokenizer import TraceTokenizer
from zoo.specexit.traces import Problem, parse_answer

MODES = ("target", "spec", "specexit", "probe_exit", "oracle_exit")
STAGES = ("target", "draft")


class SpecExitModule(PretrainedMixin, pl.LightningModule):
    """Target LM + EAGLE-style draft with SpecExit signal rows, and a probing-baseline probe.

    Args:
        stage: ``"target"`` trains the target LM; ``"draft"`` freezes it and trains draft, signals and probe.
        target: Target architecture.
        draft: Draft architecture (``n_signals=3`` for SpecExit, 0 for a plain EAGLE draft).
        exit_rule: Exit thresholds and EWMA weight (used by :meth:`generate`).
        loss: Draft-stage loss weights.
        k: Draft tokens per speculative round.
        max_new_tokens: Generation budget.
        target_from: For ``stage="draft"``: a folder exported by the target recipe whose ``target.*`` weights
            initialise the target when fitting starts (not needed to load a published checkpoint).
        lr: Peak learning rate (AdamW, linear warm-up, cosine decay to 10%).
        weight_decay: AdamW weight decay.
        warmup_steps: Warm-up steps.
        calibrate_problems: For ``stage="draft"``: when training ends, choose SpecExit's exit thresholds and the
            probe's on this many **validation** problems (:func:`zoo.specexit.calibration.calibrate`: fewest tokens
            within 1 accuracy point of speculative decoding) and store them in ``exit_rule`` (0: keep ``exit_rule``).
        grammar: The trace grammar the model reads and writes (``unmarked``: the published recipes',
            :mod:`zoo.specexit.grammar`; ``checks``: :mod:`zoo.specexit.traces`): it sets the position ids, the
            exit label and the oracle exit (through ``self.tokenizer.grammar``). Must equal the datamodule's
            ``grammar`` when fitting.
    """

    DEFAULT_PRETRAINED_CFG = {"input_format": INPUT_FORMAT}

    def __init__(
        self,
        stage: str = "draft",
        target: TargetConfig | None = None,
        draft: DraftConfig | None = None,
        exit_rule: ExitConfig | None = None,
        loss: LossWeights | None = None,
        k: int = 4,
        max_new_tokens: int = 200,
        target_from: str | None = None,
        lr: float = 2e-3,
        weight_decay: float = 0.0,
        warmup_steps: int = 50,
        calibrate_problems: int = 0,
        grammar: str = "checks",
    ) -> None:
        super().__init__()
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
        if k < 1:
            raise ValueError(f"k (draft tokens per round) must be >= 1, got {k}")
        self.save_hyperparameters()
        self.target_cfg = target or TargetConfig()
        self.draft_cfg = draft or DraftConfig()
        self.exit_rule = exit_rule or ExitConfig()
        self.loss_weights = loss or LossWeights()
        bad_taps = [t for t in self.draft_cfg.taps if not 1 <= t <= self.target_cfg.num_layers]
        if bad_taps:
            raise ValueError(f"draft taps {bad_taps} are not target layers 1..{self.target_cfg.num_layers}")
        self.tokenizer = TraceTokenizer(grammar=grammar)
        vocab = len(self.tokenizer)
        self.target = build_target(vocab, self.target_cfg)
        self.draft = EagleDraft(vocab, self.target_cfg.hidden_size, self.draft_cfg, self.target_cfg.max_positions)
        self.probe = nn.Linear(self.target_cfg.hidden_size, 1)
        if stage == "draft":
            self.target.requires_grad_(False)
        else:
            self.draft.requires_grad_(False)
            self.probe.requires_grad_(False)
        self.example_input_array = torch.tensor([self.tokenizer.encode("Q:12+34-5=?<think>+34=46.\n\n")])

    # ------------------------------------------------------------------------------------------ model

    @property
    def taps(self) -> tuple[int, ...]:
        return tuple(self.draft_cfg.taps)

    def forward(self, input_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        """Teacher-forced pass: target logits, first-step draft logits and signal logits.

        Args:
            input_ids: (batch, T) token ids.

        Returns:
            ``logits`` (B, T, V) of the target; ``draft_logits`` (B, T-1, V), where position i predicts token
            i+2; ``signal_logits`` (B, T, n_signals).
        """
        positions = batch_position_ids(self.tokenizer, input_ids)
        out = target_forward(self.target, input_ids, self.taps, positions=positions, key_positions=positions)
        fused, signal_logits = self.draft.fuse(out.features)
        embeds = self.target.model.embed_tokens(input_ids)
        draft_positions = positions[:, 1:]
        hidden = self.draft(fused[:, :-1], embeds[:, 1:], draft_positions, key_positions=draft_positions)
        return {
            "logits": out.logits,
            "draft_logits": self.draft.logits(hidden, self.target.lm_head),
            "signal_logits": signal_logits,
        }

    # -------------------------------------------------------------------------------------- training

    def setup(self, stage: str) -> None:
        reason = "its data's curriculum batch sampler is not sharded across processes (no DistributedSampler)"
        refuse_distributed(self, reason, stage)
        data = getattr(getattr(self, "_trainer", None), "datamodule", None)
        theirs = getattr(getattr(data, "hparams", None), "grammar", None)
        if theirs is not None and theirs != self.tokenizer.grammar:
            raise ZooError(
                f"the data's trace grammar is {theirs!r} but the model's is {self.tokenizer.grammar!r}; set the same "
                "grammar on model.init_args and data.init_args (it decides the position ids)"
            )
        if stage == "fit" and self.hparams.target_from:
            self.load_target(self.hparams.target_from)

    def load_target(self, folder: str | Path) -> None:
        """Copy the ``target.*`` weights of an exported folder into this module's target.

        Raises:
            ZooError: If the folder holds no exported weights.
        """
        from safetensors.torch import load_file

        path = Path(folder) / "model.safetensors"
        if not path.is_file():
            raise ZooError(
                f"target_from={str(folder)!r} holds no model.safetensors; train the target first with "
                "`zoo fit -c recipes/specexit/arith_target.yaml`"
            )
        vocab = Path(folder) / "tokenizer.json"
        theirs = TraceTokenizer.from_json(vocab.read_text()).grammar if vocab.is_file() else self.tokenizer.grammar
        if theirs != self.tokenizer.grammar:
            raise ZooError(
                f"target_from={str(folder)!r} was trained on the {theirs!r} trace grammar, this draft on "
                f"{self.tokenizer.grammar!r}; train the target with the same grammar"
            )
        state = {k[len("target.") :]: v for k, v in load_file(str(path)).items() if k.startswith("target.")}
        missing, unexpected = self.target.load_state_dict(state, strict=False)
        missing = [k for k in missing if k != "lm_head.weight"]  # tied to the embedding
        if missing or unexpected:
            raise ZooError(
                f"{path} does not fit the target architecture (missing {missing[:3]}, unexpected {unexpected[:3]})"
            )

    def on_train_end(self) -> None:
        """Draft stage: calibrate the exit thresholds on validation problems (before the export writes config.json)."""
        trainer = self.trainer
        if self.hparams.stage != "draft" or self.hparams.calibrate_problems <= 0 or trainer.fast_dev_run:
            return
        self.calibrate_exit(self.hparams.calibrate_problems)

    def calibrate_exit(self, problems: int) -> dict:
        """Choose the exit thresholds on the first ``problems`` validation problems and store them in ``exit_rule``."""
        import dataclasses

        from zoo.specexit.calibration import calibrate
        from zoo.specexit.data import validation_problems

        was_training, threads = self.training, torch.get_num_threads()
        self.eval()
        torch.set_num_threads(1)
        try:
            chosen = calibrate(self, validation_problems(problems))
        finally:
            torch.set_num_threads(threads)
            self.train(was_training)
        self.exit_rule = dataclasses.replace(
            self.exit_rule,
            confidence=chosen["specexit"]["confidence"],
            remain=chosen["specexit"]["remain"],
            probe_threshold=chosen["probe_exit"]["threshold"],
        )
        self.hparams["exit_rule"] = self.exit_rule
        self.calibration = {key: chosen[key] for key in ("specexit", "probe_exit", "speculative", "problems")}
        return chosen

    def _target_step(self, batch: dict) -> dict[str, torch.Tensor]:
        ids, mask = batch["input_ids"], batch["loss_mask"]
        positions = batch_position_ids(self.tokenizer, ids)
        logits = target_forward(self.target, ids, self.taps, positions=positions, key_positions=positions).logits
        return {
            "loss": masked_cross_entropy(logits[:, :-1], ids[:, 1:], mask[:, 1:]),
            "acc": masked_accuracy(logits[:, :-1], ids[:, 1:], mask[:, 1:]),
        }

    def _draft_step(self, batch: dict) -> dict[str, torch.Tensor]:
        ids, mask = batch["input_ids"], batch["loss_mask"]
        w = self.loss_weights
        positions = batch_position_ids(self.tokenizer, ids)
        with torch.no_grad():
            out = target_forward(self.target, ids, self.taps, positions=positions, key_positions=positions)
            embeds = self.target.model.embed_tokens(ids)
        fused, signal_logits = self.draft.fuse(out.features)
        steps = ids.shape[1] - 1
        cache = ConcatCache()
        # Step 1: teacher-forced on target features; draft position i reads token i+1 (and carries its coupled
        # position id) and predicts token i+2.
        first = positions[:, 1:]
        hidden = self.draft(fused[:, :-1], embeds[:, 1:], first, cache=cache, key_positions=first)
        logits1 = self.draft.logits(hidden, self.target.lm_head)
        ce1 = masked_cross_entropy(logits1[:, :-1], ids[:, 2:], mask[:, 2:])
        # Step 2: the draft's own output at position a stands in for the target feature at a+1.
        mask2 = unrolled_mask(steps - 1, ids.device)
        second = positions[:, 2:]
        keys = torch.cat((first, second), dim=1)
        hidden2 = self.draft(hidden[:, :-1], embeds[:, 2:], second, cache=cache, mask=mask2, key_positions=keys)
        logits2 = self.draft.logits(hidden2, self.target.lm_head)
        ce2 = masked_cross_entropy(logits2[:, :-1], ids[:, 3:], mask[:, 3:])
        # Signals from the extra fc rows, on the thinking positions.
        sm = batch["signal_mask"]
        denom = sm.sum().clamp_min(1.0)
        conf = (
            F.binary_cross_entropy_with_logits(signal_logits[..., 0], batch["confidence"], reduction="none") * sm
        ).sum() / denom
        prog = (((torch.sigmoid(signal_logits[..., 1]) - batch["progress"]) ** 2) * sm).sum() / denom
        remain = (F.smooth_l1_loss(signal_logits[..., 2], batch["remain"], reduction="none") * sm).sum() / denom
        # Probing baseline: a linear probe on the target's hidden state after "</think>Answer:" (a quarter of the
        # batch is plenty for 193 parameters and keeps the extra target pass cheap).
        rows = max(ids.shape[0] // 4, 1)
        probe_last, probe_label = batch["probe_last"][:rows], batch["probe_label"][:rows]
        with torch.no_grad():
            probe_ids = batch["probe_ids"][:rows, : int(probe_last.max()) + 1]
            probe_positions = batch_position_ids(self.tokenizer, probe_ids)
            probe_hidden = target_forward(
                self.target, probe_ids, self.taps, positions=probe_positions, key_positions=probe_positions
            ).hidden
            probe_hidden = probe_hidden[torch.arange(rows, device=ids.device), probe_last]
        probe_logit = self.probe(probe_hidden).squeeze(-1)
        probe = F.binary_cross_entropy_with_logits(probe_logit, probe_label)
        loss = ce1 + w.unrolled * ce2 + w.confidence * conf + w.progress * prog + w.remain * remain + w.probe * probe
        return {
            "loss": loss,
            "ce1": ce1,
            "ce2": ce2,
            "acc1": masked_accuracy(logits1[:, :-1], ids[:, 2:], mask[:, 2:]),
            "acc2": masked_accuracy(logits2[:, :-1], ids[:, 3:], mask[:, 3:]),
            "confidence": conf,
            "progress": prog,
            "remain": remain,
            "probe": probe,
            "probe_acc": ((probe_logit > 0).float() == probe_label).float().mean(),
        }

    def _step(self, batch: dict) -> dict[str, torch.Tensor]:
        return self._target_step(batch) if self.hparams.stage == "target" else self._draft_step(batch)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        metrics = self._step(batch)
        size = batch["input_ids"].shape[0]
        self.log_dict({f"train/{k}": v for k, v in metrics.items()}, prog_bar=False, batch_size=size)
        self.log("loss", metrics["loss"], prog_bar=True, logger=False, batch_size=size)
        return metrics["loss"]

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        metrics = self._step(batch)
        self.log_dict(
            {f"val/{k}": v for k, v in metrics.items()}, prog_bar=True, batch_size=batch["input_ids"].shape[0]
        )

    test_step = validation_step

    def configure_optimizers(self):
        params = [p for p in self.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(
            params, lr=self.hparams.lr, betas=(0.9, 0.98), weight_decay=self.hparams.weight_decay
        )
        total = max(int(self.trainer.estimated_stepping_batches), 1)
        warmup = min(self.hparams.warmup_steps, max(total // 10, 1))

        scheduler = warmup_cosine(optimizer, warmup, total)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    # ------------------------------------------------------------------------------------ inference

    def decoder(self, temperature: float = 0.0) -> SpeculativeDecoder:
        """The speculative decoder over this module's target and draft."""
        return SpeculativeDecoder(
            self.target, self.draft, self.tokenizer, self.hparams.k, self.hparams.max_new_tokens, temperature
        )

    def policy(self, mode: str, answer: int | None = None) -> NoExit:
        """The exit policy of a speculative ``mode`` (``spec``, ``specexit``, ``probe_exit``, ``oracle_exit``)."""
        if mode == "spec":
            return NoExit()
        if mode == "specexit":
            if self.draft.n_signals < 3:
                raise ValueError("mode 'specexit' needs a draft with n_signals=3 (confidence, progress, remain)")
            return SignalExit(self.exit_rule)
        if mode == "probe_exit":
            suffix = [self.tokenizer.end_think_id, self.tokenizer.ids["Answer:"]]
            return ProbeExit(self.probe, self.exit_rule.probe_threshold, suffix)
        if mode == "oracle_exit":
            if answer is None:
                raise ValueError("mode 'oracle_exit' needs the answer to keep: generate(..., answer=...)")
            return OracleExit(self.tokenizer, answer)
        raise ValueError(f"unknown mode {mode!r}; choose one of {MODES}")

    def encode_prompt(self, prompt: str | Problem) -> list[int]:
        """Token ids of a prompt: a :class:`Problem`, ``"Q:23+45-12=?"`` or just ``"23+45-12"``."""
        if isinstance(prompt, Problem):
            text = prompt.prompt
        else:
            text = prompt.strip()
            if not text.startswith("Q:"):
                text = f"Q:{text}"
            if not text.endswith("?"):
                text = f"{text}=?"
            text = f"{text}<think>"
        return self.tokenizer.encode(text)

    @torch.inference_mode()
    def generate(
        self,
        prompt: str | Problem,
        mode: str = "specexit",
        temperature: float = 0.0,
        generator: torch.Generator | None = None,
        answer: int | None = None,
    ) -> GenerationResult:
        """Solve a problem with one of the decoders.

        Args:
            prompt: A :class:`Problem` or an expression such as ``"23+45-12+7"``.
            mode: ``target`` (target only), ``spec`` (speculative, no exit), ``specexit``, ``probe_exit`` or
                ``oracle_exit`` (needs ``answer``).
            temperature: 0 for greedy, else sampling (the acceptance rule keeps the target distribution).
            generator: Randomness for sampling.
            answer: For ``oracle_exit``: the answer to keep (the eval passes target greedy's); the exit fires where
                the thinking first states it.

        Returns:
            The result; ``result.text`` is the decoded completion.
        """
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose one of {MODES}")
        ids = self.encode_prompt(prompt)
        if mode == "target":
            result = target_generate(
                self.target, ids, self.taps, self.tokenizer, self.hparams.max_new_tokens, temperature, generator
            )
        else:
            policy = self.policy(mode, answer)
            result = self.decoder(temperature).generate(ids, policy, generator)
        result.text = self.tokenizer.decode(result.tokens)
        return result

    def predict(self, prompt: str | Problem, mode: str = "specexit") -> int | None:
        """The answer to ``prompt`` (greedy decoding with ``mode``), or None when the completion states none."""
        return parse_answer(self.generate(prompt, mode=mode).text)

    # ----------------------------------------------------------------------------------- publishing

    def export_files(self) -> dict[str, str]:
        return {"tokenizer.json": self.tokenizer.to_json()}

    def import_files(self, folder: str | Path) -> None:
        path = Path(folder) / "tokenizer.json"
        if not path.is_file():
            raise ZooError(f"{path} is missing; a specexit checkpoint ships its vocabulary as tokenizer.json")
        tokenizer = TraceTokenizer.from_json(path.read_text())
        if len(tokenizer) != self.target.config.vocab_size:
            raise ZooError(
                f"{path} has {len(tokenizer)} tokens but the model's vocabulary is {self.target.config.vocab_size}"
            )
        if tokenizer.grammar != self.hparams.get("grammar", "checks"):
            raise ZooError(
                f"{path} encodes the {tokenizer.grammar!r} trace grammar but the config says "
                f"{self.hparams.get('grammar', 'checks')!r}"
            )
        self.tokenizer = tokenizer

    def export_metadata(self) -> dict:
        return {
            "vocab_size": len(self.tokenizer),
            "step_delimiters": ["\n\n"],
            "stop_think_token": "</think>",
            "signals": ["confidence", "progress", "remain"][: self.draft.n_signals],
            **({"calibration": self.calibration} if getattr(self, "calibration", None) else {}),
            "num_params": {
                "target": sum(p.numel() for p in self.target.parameters()),
                "draft": sum(p.numel() for p in self.draft.parameters()),
                "probe": sum(p.numel() for p in self.probe.parameters()),
            },
        }
