"""DeepHAModule: one GPT-2 decoder over the Chain-of-Action token stream (or an arm's reduced stream).

Paper: *DeepHA* (ICML 2026, OpenReview La7HVjveBA; companion system OpenHA, arXiv 2509.13347). The paper's agent
is a Qwen2-VL-7B policy in Minecraft over skill -> grounding -> keyboard/mouse actions on an 800-task benchmark.
None of that is obtainable offline on 2 CPU cores, so this package adapts the *mechanism* to BabyAI
(minigrid 3.2.0), whose ``BabyAIBot`` supplies all three action levels as labels:

* skills = the bot's subgoals (GoNextTo / Open / Pickup / Drop / Explore / Close + object type and colour);
* grounding = the egocentric (forward, right) offset of the cell where the current subgoal ended (hindsight);
* motor = MiniGrid's 7 primitive actions.

The decoder is a 1.27M-parameter GPT-2 (transformers' ``GPT2Model``: d 128, 4 layers, 4 heads, 1024
positions) instead of a VLM: the claim tested is the action-chain and memory design, not the backbone.

Reconstructed choices (R) and deviations, in the order of the pipeline:

1. Demos (:mod:`.demos`): the bot on training seeds, "Sampling rejected" prints silenced; 600 per training level
   (GoToLocal, PickupLoc, PutNextLocal, UnlockLocal, Synth); bot demos over 128 steps are skipped (the
   rollout horizon). Training, validation and test seeds are disjoint million-wide ranges. The skill of a step
   is the subgoal on top of the bot's stack after ``replan()``; a ``GoNextTo`` pushed by exploration is
   ``Explore``; ``Open`` / ``Pickup`` / ``Close`` name the object in front of the agent and ``Drop`` the carried
   one. A grounding segment is a maximal run of equal skill triples; offsets beyond +-12 are clipped (counted
   in the demo file; a file with offsets outside [-12, 12] is refused).
2. Stream (:mod:`.vocab`, :mod:`.sequences`): mission words, then per step ``[OBS][SKILL_type][SKILL_obj]
   [SKILL_colour][GND_f][GND_r][MOT]``. OBS = object/colour/state embeddings (16 each) concatenated per cell,
   49 x 48 flattened, 2-layer MLP, plus a direction embedding; every token adds a token-type embedding. One
   head per action type, each over its own vocabulary; the head is chosen by the type of the token to predict.
   ``obs_encoder="film"`` (R, both recipes'; module default ``"mlp"``): the OBS token is BabyAI's standard
   encoder instead, the [48, 7, 7] cell map through three 3x3 convolutions (64, 64, 32 channels), each
   FiLM-modulated by a GRU encoding of the mission, flattened to d (325k parameters against the MLP's 318k;
   +0.5% for the whole model), for every arm alike. Why: the diagnosis under 3. shows the predicted grounding
   (where the current subgoal's object is in the view) to be the bottleneck, and the MLP's OBS token does not
   know the mission. A GRU rather than a mean of word embeddings because a mean cannot tell "put the red ball
   next to the blue box" from "put the blue ball next to the red box". With it the decoupled arm's low-level
   decoder sees the mission through OBS. Validation pilot (2026-12-04, seed 100, 50 validation episodes per
   training level, the recipes otherwise unchanged): multistep / all-level success coa_compressed 0.18 / 0.29
   with the MLP against 0.43 / 0.53 with FiLM, flat 0.31 / 0.36 against 0.47 / 0.57 (fits 544-659 s for
   coa_compressed, 166-277 s for flat on one core). FiLM lifts both arms alike; with it flat still leads.
3. All-in-one training: teacher forcing, loss = sum over the six action types of that type's mean CE (weights
   1.0); each step's skill *and* grounding tokens are dropped together with p_drop = 0.3 (so the model can also
   act motor-only). Half the episodes (p_compress = 0.5) are trained as compressed contexts with W drawn from
   {2, 4, 8}, the other half with the full context, so the same weights serve ``coa`` and ``coa_compressed``.
   AdamW (weight decay 0.01 on matrices), linear warm-up over 5% of the steps, cosine to 10%. ``p_noise`` (R, not
   in the paper; 0 = plain teacher forcing) replaces skill and grounding tokens *as context only* by random ones
   (targets stay true). Why (validation diagnosis, 2026-12-03, seed 0, 8 epochs): teacher-forced accuracy on
   validation demos is high (skill 91-97%, grounding 83-86%, motor 95-96% on the local levels) because a step's
   thoughts mostly copy the previous step's true ones; greedy rollouts then carry their own first mistakes
   forward. With the bot's skill and grounding fed in, the same weights reach 72% multistep success (PutNextLocal
   85%, UnlockLocal 100%, Synth 30%; 20 validation episodes each) against 4% when the model predicts them, and 20%
   with the bot's skills but its own grounding: the conditioning works, the predicted grounding is the bottleneck.
4. Compression (R, the paper's code was not released): the context of step t is the mission, the deduplicated
   skill triples of all steps before ``b = W floor(t / W)``, and the full tokens of steps b..t. So no OBS token
   is W or more steps old, and the prefix only changes at multiples of W: the KV cache (transformers'
   ``DynamicCache`` through ``GPT2Model(inputs_embeds, position_ids, cache)``; ``cache`` is transformers 5's
   name for ``past_key_values``) is rebuilt from the compressed prefix once every W steps and extended
   token by token in between. Positions are re-indexed contiguously after compression. The spec's "last W
   steps in full" is read as "the steps of the current W-block", which is what makes the rebuild amortised.
5. Arms: ``flat`` (motor only, [OBS][MOT]); ``decoupled``: a high-level decoder over [OBS][SKILL x3][GND x2]
   with history and a low-level decoder that maps one step's [OBS][SKILL][GND] (no history, no mission) to
   MOT, two layers each, sharing the token embedder (so the parameter count matches CoA's within 1%);
   ``coa_skill_only`` and ``coa_grounding_only`` drop one action level from the stream. Each trains the
   same recipe (same epochs, data and batch) with ``--model.init_args.arm``.
6. Inference: greedy, one token type at a time; MOT joins the cache together with the next OBS (one decoder
   call). Every arm's episodes are cut at 128 steps (a cut episode failed), so 7 x 128 tokens fit 1024
   positions. A context beyond the decoder's positions raises instead of wrapping.
7. The DataModule yields episodes; the module builds its arm's token sequences (drops and windows differ per
   arm), sorts them by length and pads them in groups of at most 8192 tokens.
8. Crafter (``benchmarks/deepha/kv.py``) only measures latency and context length of random-policy rollouts
   (it has no expert).
9. Tuning (:mod:`.tune`): every trained arm gets the same 4 trials (its recipe's values, then lr 1e-3 / 3e-3,
   6 / 8 epochs, p_drop 0.3 / 0.6 one at a time), one fit each with seed 100, scored by greedy success on 50
   validation-seed episodes of each training level (``zoo/deepha/tuning.json``). Chosen: the recipes' values for
   coa_compressed (success_all 0.528; p_drop 0.6 tied), decoupled (0.320) and coa_skill_only (0.440); lr 1e-3 for
   coa_grounding_only (0.480 against 0.456) and lr 3e-3 for flat (0.576 against 0.572). Fewer epochs lost for
   every arm (0.22-0.49). Every choice sat at a grid edge, so :mod:`.tune_plateau` (issue #71) trains each arm to a
   validation plateau over lr {7.5e-4, 1.5e-3, 3e-3, 6e-3} (extended past an edge); ``schedule_epochs`` lets a fit
   replay a trial's best epoch exactly.
"""

from __future__ import annotations

import lightning.pytorch as pl
import numpy as np
import torch
import torch.nn.functional as F

from zoo._distributed import refuse_distributed
from zoo._inference import PretrainedMixin
from zoo.common.schedules import warmup_cosine
from zoo.deepha import INPUT
from zoo.deepha.agent import Policy
from zoo.deepha.model import Decoder, Embedder
from zoo.deepha.sequences import IGNORE, step_tokens, to_arrays, training_sequences
from zoo.deepha.vocab import ACTION_TYPES, GROUNDING, LAYOUTS, MOT, OBS, SKILL, WORD

COMPRESSED_ARMS = ("coa", "coa_skill_only")
ARMS = {  # module arm -> per-step layout
    "coa": "coa",
    "coa_skill_only": "skill",
    "coa_grounding_only": "grounding",
    "flat": "flat",
    "decoupled": "high",
}


class DeepHAModule(PretrainedMixin, pl.LightningModule):
    """DeepHA (Chain-of-Action over skill, grounding and motor tokens) or one of its comparison arms.

    Args:
        arm: ``coa`` (the method; also runs compressed), ``coa_skill_only``, ``coa_grounding_only``, ``flat``
            (motor only) or ``decoupled`` (a high-level decoder for skill + grounding and a low-level decoder for
            motor, each with half the layers, sharing the token embedder).
        d_model: Width.
        n_layer: Decoder layers (split in two halves for ``decoupled``).
        n_head: Attention heads.
        max_len: Maximum context (positions) of the decoder.
        lr: Peak AdamW learning rate (linear warm-up over 5% of the steps, cosine decay to 10%).
        weight_decay: AdamW weight decay.
        p_drop: Probability that a step's skill and grounding tokens are dropped in training (all-in-one
            training on mixed action spaces); unused by ``flat`` and ``decoupled``.
        p_compress: Probability that an episode is trained with the compressed context (else full); only
            ``coa`` and ``coa_skill_only`` (the others have no skill memory to compress to, and act in full).
        block_keep: Fraction of a compressed episode's W-blocks trained (each block repeats the mission and the
            compressed prefix, so all of them would double the tokens of an epoch).
        p_noise: Probability that a skill or grounding token is replaced, as context only, by a random one in
            training (its target stays true: :func:`~zoo.deepha.sequences.to_arrays`); 0 is plain teacher forcing.
        windows: Compression windows drawn in training.
        window: The compression window W used at inference by ``coa_compressed``.
        seed: Seed of the drops and windows drawn in training.
        num_threads: torch intra-op threads while fitting (0: leave as is).
        max_batch_tokens: Sequences are sorted by length and padded in groups of at most this many tokens.
        obs_encoder: The OBS token's encoder (:class:`~zoo.deepha.model.Embedder`): ``"mlp"`` (the grid flattened
            through an MLP, blind to the mission) or ``"film"`` (3x3 convolutions FiLM-modulated by a GRU
            encoding of the mission, BabyAI's standard encoder; parameter count within 1% of ``mlp``'s model).
        schedule_epochs: Epochs the learning-rate schedule spans (0: the fit's own ``max_epochs``). A fit with
            ``trainer.max_epochs=e`` and ``schedule_epochs=M`` replays the first ``e`` epochs of an ``M``-epoch fit
            exactly (the plateau tuning of :mod:`.tune_plateau` picks such a best epoch ``e``).
    """

    DEFAULT_PRETRAINED_CFG = INPUT  # what the published weights take (the registry states the same)

    def __init__(
        self,
        arm: str = "coa",
        d_model: int = 128,
        n_layer: int = 4,
        n_head: int = 4,
        max_len: int = 1024,
        lr: float = 1e-3,
        weight_decay: float = 0.01,
        p_drop: float = 0.3,
        p_compress: float = 0.5,
        windows: tuple[int, ...] = (2, 4, 8),
        window: int = 4,
        seed: int = 0,
        num_threads: int = 2,
        max_batch_tokens: int = 8192,
        block_keep: float = 0.5,
        p_noise: float = 0.0,
        obs_encoder: str = "mlp",
        schedule_epochs: int = 0,
    ):
        super().__init__()
        if arm not in ARMS:
            raise ValueError(f"arm: expected one of {', '.join(ARMS)}, got {arm!r}")
        if window < 1 or any(w < 1 for w in windows):
            raise ValueError(f"W: compression windows must be >= 1, got window={window}, windows={list(windows)}")
        if not all(0.0 <= p <= 1.0 for p in (p_drop, p_compress, p_noise)) or not 0.0 < block_keep <= 1.0:
            raise ValueError("p_drop, p_compress and p_noise must lie in [0, 1], block_keep in (0, 1]")
        if schedule_epochs < 0:
            raise ValueError(f"schedule_epochs must be >= 0 (0: the fit's max_epochs), got {schedule_epochs}")
        if d_model % n_head:
            raise ValueError(f"d_model ({d_model}) must be a multiple of n_head ({n_head})")
        self.save_hyperparameters()
        self.layout = LAYOUTS[ARMS[arm]]
        self.embedder = Embedder(d_model, obs_encoder=obs_encoder)
        layers = n_layer // 2 if arm == "decoupled" else n_layer
        self.decoder = Decoder(d_model, layers, n_head, max_len)
        self.low = Decoder(d_model, n_layer - layers, n_head, 8) if arm == "decoupled" else None
        batch = self.collate(_example(), np.random.default_rng(0), train=False)
        group = batch["low_groups" if self.low is not None else "groups"][0]
        self.example_input_array = (group["types"], group["ids"], batch["images"], batch["dirs"], batch["missions"])

    # ------------------------------------------------------------------ sequences

    def _steps(self, episode: dict, offset: int, drops, layout) -> list:
        return [
            step_tokens(layout, episode["skills"][t], episode["grounding"][t], episode["motor"][t], offset + t,
                        bool(drops[t]))
            for t in range(len(episode["motor"]))
        ]  # fmt: skip

    def collate(self, episodes: list[dict], rng: np.random.Generator, train: bool = True) -> dict:
        """Padded teacher-forcing tensors of a batch of episodes for this arm (``low_*`` for ``decoupled``).

        In training each step's skill and grounding tokens are dropped with ``p_drop`` and each episode is cut
        into compressed blocks with probability ``p_compress`` (W drawn from ``windows``); in validation
        (``train=False``) neither happens and the full context is used.
        """
        h = self.hparams
        sequences, low = [], []
        offset = 0
        for ep in episodes:
            steps_n = len(ep["motor"])
            droppable = any(k in SKILL or k in GROUNDING for k in self.layout) and h.arm != "decoupled"
            drops = rng.random(steps_n) < h.p_drop if (train and droppable) else np.zeros(steps_n, bool)
            steps = self._steps(ep, offset, drops, self.layout)
            window = None
            if train and h.arm in COMPRESSED_ARMS and rng.random() < h.p_compress:
                window = int(rng.choice(h.windows))
            blocks = training_sequences(ep["mission"], steps, window)
            if window is not None:  # a random half of the blocks: each repeats the mission and the prefix
                keep = rng.random(len(blocks)) < h.block_keep
                keep[rng.integers(len(blocks))] = True
                blocks = [b for b, k in zip(blocks, keep, strict=True) if k]
            sequences += blocks
            if h.arm == "decoupled":
                full = self._steps(ep, offset, np.zeros(steps_n, bool), LAYOUTS["coa"])
                low += [(tokens, [kind == MOT for kind, _ in tokens]) for tokens in full]
            offset += steps_n
        noise = h.p_noise if train else 0.0
        out = {"groups": _groups([to_arrays(s, rng, noise) for s in sequences], h.max_batch_tokens)}
        if low:
            out["low_groups"] = _groups([to_arrays(s) for s in low], h.max_batch_tokens)
        out["images"] = torch.from_numpy(np.concatenate([ep["images"] for ep in episodes]))
        out["dirs"] = torch.from_numpy(np.concatenate([np.asarray(ep["dirs"]) for ep in episodes]))
        out["missions"] = _image_missions(episodes)
        return out

    # ------------------------------------------------------------------ forward and loss

    def forward(self, types, ids, images, dirs, missions=None):
        """Motor logits ``[B, L, 7]`` at every position of padded token sequences (teacher forcing).

        ``missions`` (``[N, L]``: each image's mission word ids, 0-padded) is read by the ``film`` encoder only.
        """
        obs = self.embedder.observe(images, dirs, missions)
        decoder = self.low if self.low is not None else self.decoder
        hidden, _ = decoder(self.embedder(types, ids, obs))
        return decoder.logits(hidden, MOT)

    def _losses(self, decoder, groups: list[dict], obs: torch.Tensor) -> dict[int, torch.Tensor]:
        sums: dict[int, torch.Tensor] = {}
        counts: dict[int, int] = {}
        for group in groups:
            hidden, _ = decoder(self.embedder(group["types"], group["ids"], obs))
            for kind in ACTION_TYPES:
                select = group["target_types"] == kind
                if select.any():
                    logits = decoder.logits(hidden[select], kind)
                    ce = F.cross_entropy(logits, group["targets"][select], reduction="sum")
                    sums[kind] = sums.get(kind, 0.0) + ce
                    counts[kind] = counts.get(kind, 0) + int(select.sum())
        return {kind: sums[kind] / counts[kind] for kind in sums}

    def loss(self, batch: dict) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
        """Sum over action types of the mean cross-entropy of that type's tokens (weights 1.0 each)."""
        obs = self.embedder.observe(batch["images"], batch["dirs"], batch.get("missions"))
        losses = self._losses(self.decoder, batch["groups"], obs)
        if self.low is not None:
            losses[MOT] = self._losses(self.low, batch["low_groups"], obs)[MOT]
        return sum(losses.values()), losses

    def training_step(self, batch, batch_idx):
        rng = np.random.default_rng([self.hparams.seed, self.global_step, batch_idx])
        loss, parts = self.loss(self.collate(batch, rng, train=True))
        self.log("train_loss", loss, prog_bar=True, batch_size=len(batch))
        if MOT in parts:
            self.log("train_motor_ce", parts[MOT], batch_size=len(batch))
        return loss

    def validation_step(self, batch, batch_idx):
        loss, parts = self.loss(self.collate(batch, np.random.default_rng(0), train=False))
        self.log("val_loss", loss, prog_bar=True, batch_size=len(batch))
        self.log("val_motor_ce", parts[MOT], batch_size=len(batch))

    # ------------------------------------------------------------------ acting

    def policy(self, window: int | None = None, use_cache: bool = True) -> Policy:
        """A greedy agent; ``window`` compresses the context (the method's ``coa_compressed`` uses W = 4)."""
        self.eval()
        return Policy(self.embedder, self.decoder, self.layout, window, use_cache, self.low)

    def batch_policy(self, window: int | None = None):
        """The same greedy agent over a batch of episodes in lockstep (:class:`~zoo.deepha.agent.BatchPolicy`)."""
        from zoo.deepha.agent import BatchPolicy

        self.eval()
        return BatchPolicy(self.embedder, self.decoder, self.layout, window, self.low)

    # ------------------------------------------------------------------ fit

    def setup(self, stage: str) -> None:
        refuse_distributed(self, "the demo cache and the per-step random drops assume one process", stage)

    def on_fit_start(self) -> None:
        if self.hparams.num_threads:
            torch.set_num_threads(self.hparams.num_threads)

    def configure_optimizers(self):
        h = self.hparams
        decay = [p for n, p in self.named_parameters() if p.requires_grad and p.ndim >= 2 and "wpe" not in n]
        rest = [p for n, p in self.named_parameters() if p.requires_grad and not (p.ndim >= 2 and "wpe" not in n)]
        optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": h.weight_decay}, {"params": rest, "weight_decay": 0.0}], lr=h.lr
        )
        total = max(1, int(self.trainer.estimated_stepping_batches))
        if h.schedule_epochs:  # the schedule of a longer fit (the dataloader is loaded by now)
            per_epoch = -(-self.trainer.num_training_batches // self.trainer.accumulate_grad_batches)
            total = max(1, per_epoch * h.schedule_epochs)
        warm = max(1, total // 20)

        scheduler = warmup_cosine(optimizer, warm, total)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def export_metadata(self) -> dict:
        return {"layout": [int(k) for k in self.layout], "window": self.hparams.window, "token_types": _TYPES}


_TYPES = {"word": WORD, "obs": OBS, "skill": list(SKILL), "grounding": list(GROUNDING), "motor": MOT}


def _groups(arrays: list[tuple[np.ndarray, ...]], max_tokens: int) -> list[dict[str, torch.Tensor]]:
    """Sort sequences by length and pad them in groups of at most ``max_tokens`` padded tokens."""
    order = sorted(range(len(arrays)), key=lambda i: len(arrays[i][0]))
    groups, current = [], []
    for i in order:
        if current and (len(current) + 1) * len(arrays[i][0]) > max_tokens:
            groups.append(_pad([arrays[j] for j in current]))
            current = []
        current.append(i)
    groups.append(_pad([arrays[j] for j in current]))
    return groups


def _image_missions(episodes: list[dict]) -> torch.Tensor:
    """``[N, L]``: every image's episode mission (word ids, right-padded with 0), in the order of ``images``."""
    missions = [np.asarray(ep["mission"], dtype=np.int64) for ep in episodes]
    out = np.zeros((sum(len(ep["images"]) for ep in episodes), max(len(m) for m in missions)), dtype=np.int64)
    row = 0
    for ep, mission in zip(episodes, missions, strict=True):
        out[row : row + len(ep["images"]), : len(mission)] = mission
        row += len(ep["images"])
    return torch.from_numpy(out)


def _pad(arrays: list[tuple[np.ndarray, ...]]) -> dict[str, torch.Tensor]:
    length = max(len(a[0]) for a in arrays)
    out = {
        "types": np.full((len(arrays), length), WORD, dtype=np.int64),
        "ids": np.zeros((len(arrays), length), dtype=np.int64),
        "targets": np.full((len(arrays), length), IGNORE, dtype=np.int64),
        "target_types": np.full((len(arrays), length), -1, dtype=np.int64),
    }
    for row, (types, ids, targets, target_types) in enumerate(arrays):
        n = len(types)
        out["types"][row, :n], out["ids"][row, :n] = types, ids
        out["targets"][row, :n], out["target_types"][row, :n] = targets, target_types
    return {k: torch.from_numpy(v) for k, v in out.items()}


def _example() -> list[dict]:
    from zoo.deepha.data import example_batch

    return example_batch()
