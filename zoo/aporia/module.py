"""LightningModules of APORIA: the response generators and the published detector.

Paper: "A Geometric Analysis of Small-sized Language Model Hallucinations" (Onofri, Ricco, Cima, Di Pietro,
Cresci), ICML 2026, arXiv:2602.14778; APORIA is the method's name in it. The authors' code and
SOCRATES-300K are CC BY-NC-SA: nothing was copied; this is an implementation from the method's description.

The method (``fisher.py``, ``lp.py``): per (model, prompt) pair, the regularised Fisher direction
``v = (S_G + S_H + lambda tr(S_W)/d I)^-1 (mu_H - mu_G)`` with biased class covariances and lambda = 1.2,
fitted on the labelled responses only; APORIA-LP stores each class's labelled projections Z_c and their
pairwise gaps R_c, and calls a response hallucinated iff W1(D_H(z), R_H) < W1(D_G(z), R_G).

Deviations and reconstructed choices (R):

* Data: SOCRATES-300K and the ten real small LLMs are not available offline. SOCRATES-mini is built from
  six causal LMs of our own in four families (GPT-2 d64/L2 and d128/L4, Qwen2 d96/L2, Llama d96/L3 and
  d128/L4, GPT-NeoX d128/L3; transformers architectures from small configs) trained from scratch on
  countryinfo facts (8 attributes, 1881 facts, 5 questions each answered in one of 10 answer paraphrases;
  gpt2_s, llama_xs and llama_s were trained on the first 5 paraphrases only) mixed with 20% Wikipedia text
  (gensim's test dump), byte-level BPE with 2048 tokens. Six models, not ten: each recipe takes a few
  minutes on 2 cores.
* Responses (issue 18: a benchmark hard enough to tell the methods apart): only *well-formed* answers are
  labelled (they parse with an answer template of the asked attribute and country and their value has the
  attribute's type); hallucinated = well-formed and wrong. Malformed answers are left out and reported per
  generator. Up to 60 (model, prompt) pairs per generator, 50 well-formed answers each (the spec's 40 would leave
  nothing to test at 40 labels), temperature 1.0 or 1.3 in turn over the prompts, top-p 0.95, 24 tokens,
  >= 6 answers of each class; pairs are found by a 12-sample probe before the full sampling (R). A pair is kept
  only if at least half its hallucinations are *near misses* (the wrong value shares a word with the true one
  or is a similar string: +502/+503, XOF/XAF; ``facts.is_near_miss``) and region questions (five values) are
  left out (R): with unrelated wrong values the embeddings separate the classes along one value direction and
  tuned logistic regression scored 0.967 on the first release. To find enough such pairs a fact may be asked in
  each of its 5 question phrasings, one pair per fact and generator. Half of each generator's pairs have a wrong
  greedy answer (the majority vote's blind spot), half a right one (the paper's "knowledge present, retrieval
  unstable"), the larger stratum cut to the smaller (R; ``dataset.SocratesConfig.balance_strata``): the weak
  generators keep 2-26 pairs, the strong ones 24-58, not the 60 issue 18 asks for. The labelling rule is in
  ``facts.py``; the build pipeline in ``build.py``; the dataset ships as a sha256-pinned artifact.
* Unit of analysis and protocol (R): F1 (hallucinated positive) per pair on the held-out fold of 5
  answer-grouped folds (every copy of an answer string in one test part, so no test answer is a verbatim
  copy of a labelled one; issue 18, ``zoo.aporia.folds.grouped_folds``; the spec's stratified folds with
  ``--set grouped=false``), label draws per fold, nested class-balanced budgets (a class short of L/2
  training answers is topped up by the other), averaged over pairs, folds and draws.
* Propagation (R): besides the single-pass rule, ``AporiaLP(self_training_rounds=3)`` adds the 5 most
  confident unlabelled training answers per predicted class and round and refits v and the references.
* The published detector holds one fit per pair (grouped split 0, draw 0, 40 labels) plus the held-out answers
  of each pair for the golden check; ``classify`` serves new answers to those prompts, and ``AporiaLP``
  fits new prompts from your own labels. A detector that transfers to unseen prompts is not claimed.
"""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import torch

from zoo._errors import ZooError
from zoo._inference import PretrainedMixin
from zoo.aporia import DETECTOR_INPUT, DETECTOR_LABELS, GENERATOR_INPUT
from zoo.aporia.generator import LMConfig, build_causal_lm, continuations
from zoo.common.schedules import warmup_cosine

TOKENIZER_FILE = "tokenizer.json"


class AporiaGeneratorModule(PretrainedMixin, pl.LightningModule):
    """A small causal LM trained on country facts and Wikipedia; one of the "small LLMs" whose answers are judged.

    Args:
        arch: ``"gpt2"`` or ``"llama"``.
        d_model: Hidden width.
        n_layers: Transformer blocks.
        n_heads: Attention heads.
        vocab_size: Vocabulary size (the BPE's).
        context: Maximum sequence length.
        lr: Peak AdamW learning rate.
        weight_decay: AdamW weight decay.
        warmup_steps: Linear warm-up steps before the cosine decay (to 10% of ``lr``).
    """

    DEFAULT_PRETRAINED_CFG = {"input_format": GENERATOR_INPUT}

    def __init__(
        self,
        arch: str = "gpt2",
        d_model: int = 128,
        n_layers: int = 4,
        n_heads: int = 4,
        vocab_size: int = 2048,
        context: int = 128,
        lr: float = 3e-3,
        weight_decay: float = 0.01,
        warmup_steps: int = 50,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.lm = build_causal_lm(LMConfig(arch, vocab_size, d_model, n_layers, n_heads, context))
        self.tokenizer = None
        self.example_input_array = torch.zeros(2, 16, dtype=torch.long)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Next-token logits ``(batch, length, vocab)``."""
        return self.lm(input_ids=input_ids).logits

    def _loss(self, batch) -> torch.Tensor:
        (ids,) = batch
        return self.lm(input_ids=ids, labels=ids).loss

    def training_step(self, batch, batch_idx):
        loss = self._loss(batch)
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val/loss", self._loss(batch), prog_bar=True)

    def configure_optimizers(self):
        h = self.hparams
        decay = [p for n, p in self.named_parameters() if p.ndim >= 2]
        no_decay = [p for n, p in self.named_parameters() if p.ndim < 2]
        optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": h.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=h.lr,
            betas=(0.9, 0.95),
        )
        total = max(1, int(self.trainer.estimated_stepping_batches))

        scheduler = warmup_cosine(optimizer, h.warmup_steps, total)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def setup(self, stage: str) -> None:
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        tokenizer = getattr(datamodule, "tokenizer", None)
        if tokenizer is None:
            return
        if tokenizer.get_vocab_size() > self.hparams.vocab_size:
            raise ZooError(
                f"the tokenizer has {tokenizer.get_vocab_size()} tokens but the LM only {self.hparams.vocab_size}; "
                "set model.init_args.vocab_size to the datamodule's vocab_size"
            )
        self.tokenizer = tokenizer

    # ------------------------------------------------------------------ publishing the tokenizer with the weights

    def export_files(self) -> dict[str, str]:
        return {TOKENIZER_FILE: self.tokenizer.to_str()} if self.tokenizer is not None else {}

    def import_files(self, folder: str | Path) -> None:
        path = Path(folder) / TOKENIZER_FILE
        if path.is_file():
            from zoo.common.text import load_bpe

            self.tokenizer = load_bpe(path.read_text())

    # ------------------------------------------------------------------------------------------------ sampling

    def sample(
        self,
        prompts: str | list[str],
        n: int = 1,
        *,
        temperature: float = 1.0,
        top_p: float = 0.95,
        max_new_tokens: int = 24,
        seed: int = 0,
    ) -> list[list[str]]:
        """``n`` sampled answers per prompt (``"Q: <question> A:"``), as text.

        Args:
            prompts: One prompt or a list.
            n: Samples per prompt.
            temperature: Sampling temperature (0 = greedy).
            top_p: Nucleus sampling mass.
            max_new_tokens: Answer length limit in tokens.
            seed: Seed of the sampling.

        Raises:
            ZooError: If the module has no tokenizer (load it with ``pretrained=True`` or train it first).
        """
        if self.tokenizer is None:
            raise ZooError("this generator has no tokenizer; load it with zoo.load(name, pretrained=True) or train it")
        prompts = [prompts] if isinstance(prompts, str) else list(prompts)
        return continuations(
            self.lm, self.tokenizer, prompts, num_samples=n, temperature=temperature, top_p=top_p,
            max_new_tokens=max_new_tokens, seed=seed,
        )  # fmt: skip

    def greedy_accuracy(self, facts: int = 600, seed: int = 0) -> float:
        """Share of facts answered right by greedy decoding, over the first ``facts`` of a seeded fact order.

        The order (and each fact's question template) is fixed by ``seed``, so a smaller ``facts`` scores a
        prefix of the same facts.
        """
        import random

        from zoo.aporia.facts import country_facts, is_genuine, prompt

        rng = random.Random(seed)
        order = list(country_facts())
        rng.shuffle(order)
        templates = [rng.randrange(5) for _ in order]
        chosen = order[:facts]
        answers = self.sample([prompt(f, t) for f, t in zip(chosen, templates)], 1, temperature=0.0)
        return sum(is_genuine(f, a[0]) for f, a in zip(chosen, answers, strict=True)) / len(chosen)


PAIRS_FILE = "pairs.json"
LABELS = ("genuine", "hallucinated")


class AporiaDetector(PretrainedMixin, pl.LightningModule):
    """APORIA-LP fitted per (model, prompt) pair of SOCRATES-mini: classify new responses to those prompts.

    Each pair holds its Fisher direction ``v`` (``directions``), the projections of its labelled
    responses with their labels (the LP reference sets), and the mean labelled embedding (used to
    route responses to a pair when no prompt is given). "Training" is the closed-form fit of every
    pair on its class-balanced labelled draw (answer-grouped split 0, draw 0 of the evaluation protocol); there is
    no gradient step.

    Args:
        num_pairs: Number of pairs; None = as many as the datamodule provides.
        max_labels: Label budget per pair (capacity of the reference buffers).
        embedding_dim: Sentence-embedding width (MiniLM: 384).
        reg: lambda of the regularised Fisher direction (paper: 1.2).
    """

    DEFAULT_PRETRAINED_CFG = {"input_format": DETECTOR_INPUT, "label_names": DETECTOR_LABELS}

    def __init__(
        self, num_pairs: int | None = None, max_labels: int = 40, embedding_dim: int = 384, reg: float = 1.2
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.automatic_optimization = False
        self.pairs: list[dict] = []
        self._allocate(num_pairs or 0)
        self.example_input_array = (torch.zeros(2, embedding_dim), torch.zeros(2, dtype=torch.long))

    def _allocate(self, num_pairs: int) -> None:
        h = self.hparams
        self.register_buffer("directions", torch.zeros(num_pairs, h.embedding_dim))
        self.register_buffer("centroids", torch.zeros(num_pairs, h.embedding_dim))
        self.register_buffer("z_labelled", torch.zeros(num_pairs, h.max_labels))
        self.register_buffer("y_labelled", torch.full((num_pairs, h.max_labels), -1, dtype=torch.int8))

    @property
    def num_pairs(self) -> int:
        return self.directions.shape[0]

    # ------------------------------------------------------------------------------------------ fitting

    def setup(self, stage: str) -> None:
        if self.trainer.world_size > 1:
            raise ZooError(
                "AporiaDetector fits each pair into its own buffer rows: under DDP each rank would fit a different "
                "subset of pairs and the buffers would diverge silently; fit it on one device (trainer.devices=1)"
            )
        datamodule = getattr(self.trainer, "datamodule", None)
        if datamodule is None or not hasattr(datamodule, "pair_records"):
            return
        records = datamodule.pair_records()
        if self.hparams.num_pairs is None:
            self.hparams.num_pairs = len(records)
            self._allocate(len(records))
        if len(records) != self.num_pairs:
            raise ZooError(
                f"the datamodule provides {len(records)} pairs but the detector has {self.num_pairs}; "
                f"set model.init_args.num_pairs={len(records)} (or null to follow the data)"
            )
        if datamodule.hparams.label_budget > self.hparams.max_labels:
            raise ZooError(
                f"label_budget={datamodule.hparams.label_budget} exceeds max_labels={self.hparams.max_labels}; "
                "raise model.init_args.max_labels"
            )
        self.pairs = records

    def training_step(self, batch, batch_idx):
        from zoo.aporia.lp import AporiaLP

        index = int(batch["pair"])
        x, y = batch["x"].double().numpy(), batch["y"].numpy()
        lp = AporiaLP(reg=self.hparams.reg).fit(x, y)
        count = len(y)
        self.directions[index] = torch.from_numpy(lp.direction).float()
        self.centroids[index] = torch.from_numpy(x.mean(0)).float()
        self.z_labelled[index] = 0.0
        self.y_labelled[index] = -1
        self.z_labelled[index, :count] = torch.from_numpy(x @ lp.direction).float()
        self.y_labelled[index, :count] = torch.from_numpy(y.astype("int8"))

    def validation_step(self, batch, batch_idx):
        from zoo.aporia.protocol import f1_hallucinated

        index = int(batch["pair"])
        pairs = torch.full((len(batch["y"]),), index, dtype=torch.long)
        predicted = (self(batch["x"].float(), pairs) > 0).long().numpy()
        self.log("val/f1", f1_hallucinated(batch["y"].numpy(), predicted), batch_size=1)

    def configure_optimizers(self):
        return None  # closed-form fit: nothing to optimise

    # --------------------------------------------------------------------------------------- inference

    def reference_sets(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Labelled projections (Z_G, Z_H) of pair ``index``."""
        labels = self.y_labelled[index]
        return self.z_labelled[index][labels == 0], self.z_labelled[index][labels == 1]

    def forward(self, embeddings: torch.Tensor, pair_index: torch.Tensor) -> torch.Tensor:
        """``W_G - W_H`` per response (positive = hallucinated) for responses of the given pairs.

        Args:
            embeddings: ``(n, embedding_dim)`` unit sentence embeddings.
            pair_index: ``(n,)`` the pair each response answers.
        """
        from zoo.aporia.lp import lp_scores

        scores = torch.zeros(len(embeddings), dtype=embeddings.dtype)
        for index in pair_index.unique().tolist():
            rows = pair_index == index
            z_genuine, z_hallucinated = self.reference_sets(index)
            if len(z_genuine) == 0 or len(z_hallucinated) == 0:
                continue  # an unfitted pair has no opinion
            z = (embeddings[rows].double() @ self.directions[index].double()).numpy()
            w_genuine, w_hallucinated = lp_scores(z, z_genuine.double().numpy(), z_hallucinated.double().numpy())
            scores[rows] = torch.from_numpy(w_genuine - w_hallucinated).to(embeddings.dtype)
        return scores

    def find_pair(
        self, embeddings: torch.Tensor | None = None, prompt: str | None = None, model: str | None = None
    ) -> int:
        """The pair for a prompt (and generator), or the pair nearest to the responses' mean embedding.

        Raises:
            ZooError: If nothing matches the prompt or the detector holds no fitted pair.
        """
        if self.num_pairs == 0 or not bool((self.y_labelled >= 0).any()):
            raise ZooError("this detector is not fitted; load it with zoo.load('aporia', pretrained=True)")
        if prompt is not None:
            wanted = prompt.strip()
            matches = [
                i for i, p in enumerate(self.pairs)
                if wanted in (p["prompt"], p["prompt"][3:-3]) and (model is None or p["model"] == model)
            ]  # fmt: skip
            if not matches:
                raise ZooError(
                    f"no fitted pair for prompt {prompt!r}" + (f" and model {model!r}" if model else "")
                    + "; see detector.prompts() for the prompts it knows, or fit zoo.aporia.AporiaLP on your own labels"
                )  # fmt: skip
            return matches[0]
        mean = embeddings.float().mean(0)
        return int(torch.argmax(self.centroids @ mean))

    def prompts(self) -> list[str]:
        """The prompts of the fitted pairs (``"Q: ... A:"``), one per pair."""
        return [p["prompt"] for p in self.pairs]

    @torch.no_grad()
    def classify(self, texts: list[str], prompt: str | None = None, model: str | None = None) -> list[str]:
        """Label repeated responses to one prompt as ``"genuine"`` or ``"hallucinated"``.

        Args:
            texts: Responses (answers without the question), embedded with MiniLM.
            prompt: The question they answer (``"Q: ... A:"`` or the bare question); default: the pair whose
                labelled responses are nearest to the mean embedding of ``texts``.
            model: Generator name, to choose among pairs that share a prompt.
        """
        from zoo.common.minilm import embed

        if isinstance(texts, str) or not texts:
            raise ZooError("classify expects a non-empty list of response strings")
        embeddings = torch.from_numpy(embed(texts))
        index = self.find_pair(embeddings, prompt, model)
        scores = self(embeddings, torch.full((len(texts),), index, dtype=torch.long))
        return [LABELS[int(s > 0)] for s in scores]

    def heldout_f1(self, limit: int | None = None) -> float:
        """Mean F1 (hallucinated positive) of the published fits on their pairs' held-out answers.

        Args:
            limit: Score only ``limit`` pairs, evenly spaced over all (so every generator is represented).
        """
        from zoo.aporia.protocol import f1_hallucinated
        from zoo.common.minilm import embed

        chosen = range(len(self.pairs))
        if limit and limit < len(self.pairs):
            chosen = np.linspace(0, len(self.pairs) - 1, limit).round().astype(int).tolist()
        if not self.pairs:
            raise ZooError("the detector holds no pairs; load it with zoo.load('aporia', pretrained=True)")
        pairs = [self.pairs[i] for i in chosen]
        rows = torch.tensor([i for i in chosen for _ in self.pairs[i]["heldout"]])
        index = torch.tensor([k for k, p in enumerate(pairs) for _ in p["heldout"]])
        with torch.no_grad():
            predicted = (self(torch.from_numpy(embed([t for p in pairs for t in p["heldout"]])), rows) > 0).numpy()
        scores = [
            f1_hallucinated(np.asarray(p["heldout_labels"]), predicted[index.numpy() == i]) for i, p in enumerate(pairs)
        ]
        return float(np.mean(scores))

    # ------------------------------------------------------------------------ pair metadata with the weights

    def export_files(self) -> dict[str, str]:
        import json

        return {PAIRS_FILE: json.dumps(self.pairs, indent=0, ensure_ascii=False)} if self.pairs else {}

    def import_files(self, folder: str | Path) -> None:
        import json

        path = Path(folder) / PAIRS_FILE
        if path.is_file():
            self.pairs = json.loads(path.read_text())
