"""The generator: a small GPT-2 (transformers) with our byte-level BPE, its training sequences, and a decoding
session that keeps the KV cache and the per-position signals the retrieval predictor reads.

Sequence layout: ``[doc_1 .. doc_m] <eos> question <eos> answer``. Each document is cut to :data:`DOC_TOKENS`
tokens (Wikipedia chunks are long); answer segments are tokenised one by one (a slot as ``" value"`` then
``"."``), exactly as the decoder feeds them, so training and decoding see the same token boundaries.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn.functional as F

from zoo.prefetch_rag import corpus as C
from zoo.prefetch_rag.lead_ins import LEAD_INS

DOC_TOKENS = 32
MAX_POSITIONS = 256
EOS = "<|endoftext|>"
PAD = "<|pad|>"


@dataclass
class LMConfig:
    """GPT-2 architecture (the spec's d128/L4).

    Args:
        vocab_size: BPE vocabulary size.
        n_embd: Width.
        n_layer: Blocks.
        n_head: Attention heads.
        n_positions: Longest context.
    """

    vocab_size: int = 4096
    n_embd: int = 128
    n_layer: int = 4
    n_head: int = 4
    n_positions: int = MAX_POSITIONS
    pointer: bool = True


class PointerGPT2(torch.nn.Module):
    """GPT-2 with a pointer (copy) head, as in pointer-generator networks (See et al., 2017) (R).

    ``p(token) = g p_vocab(token) + (1 - g) sum_{s <= t: x_s = token} a_{t,s}``, where ``a_t`` is a single-head
    attention of the position's last-layer state over the last-layer states of every position so far (context and
    answer) and ``g = sigmoid(w . h_t + b)``. ``logits`` of the output are ``log p`` (a softmax of them gives ``p``
    back, so entropy, margin, argmax and the cross-entropy loss read the mixture unchanged). With a KV cache the
    pointer's keys and token ids ride on the cache object, so a cached step sees the whole context.

    Why: the plain GPT-2 d128/L4 never learned to copy a slot value from its context within a CPU
    budget (oracle EM with the gold documents in context 0.00 after 500 steps of batch 16 and after 700 steps of
    batch 8 with the slot loss weighted x10); an LLM reads its context, and the pointer gives the small LM that
    ability directly.

    Args:
        gpt2: The ``GPT2LMHeadModel`` body.
        key_dim: Width of the pointer's queries and keys.
    """

    def __init__(self, gpt2, key_dim: int = 64) -> None:
        super().__init__()
        self.gpt2 = gpt2
        d = gpt2.config.n_embd
        self.query = torch.nn.Linear(d, key_dim, bias=False)
        self.key = torch.nn.Linear(d, key_dim, bias=False)
        self.gate = torch.nn.Linear(d, 1)
        self.scale = key_dim**-0.5

    @property
    def config(self):
        return self.gpt2.config

    def _mixture(self, h, logits, scores, ids):
        """log p of the mixture for query rows ``h`` (N, d) with vocabulary logits (N, V), pointer scores (N, S)
        (masked with -inf) and the key positions' token ids (N, S)."""
        attn = scores.float().softmax(-1)
        copy = torch.zeros(logits.shape, dtype=attn.dtype).scatter_add_(1, ids, attn)
        gate = torch.sigmoid(self.gate(h).float())
        return (gate * logits.float().softmax(-1) + (1.0 - gate) * copy).clamp_min(1e-9).log()

    def _scores(self, h, keys, attention_mask=None):
        t, s = h.shape[1], keys.shape[1]
        scores = (self.query(h) @ keys.transpose(1, 2)) * self.scale  # (B, T, S)
        allowed = torch.arange(s)[None, :] <= (torch.arange(t)[:, None] + (s - t))  # causal, incl. itself
        if attention_mask is not None:
            allowed = allowed[None] & attention_mask[:, None, :].bool()
        return scores.masked_fill(~allowed, float("-inf"))

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        cache=None,
        use_cache: bool | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ):
        """Log-probabilities of the mixture at every position (``logits``), as ``GPT2LMHeadModel`` returns logits."""
        from types import SimpleNamespace

        out = self.gpt2.transformer(
            input_ids=input_ids,
            attention_mask=attention_mask,
            cache=cache,
            use_cache=use_cache,
            output_hidden_states=True,
            output_attentions=output_attentions,
        )
        h = out.last_hidden_state  # (B, T, d), after the final layer norm (= hidden_states[-1])
        keys, ids = self.key(h), input_ids
        past = getattr(cache, "_pointer", None) if cache is not None else None
        if past is not None:
            keys, ids = torch.cat((past[0], keys), 1), torch.cat((past[1], ids), 1)
        if cache is not None and use_cache:
            cache._pointer = (keys, ids)
        scores = self._scores(h, keys, attention_mask if past is None else None)
        b, t, s = scores.shape
        logits = self._mixture(
            h.reshape(b * t, -1),
            self.gpt2.lm_head(h).reshape(b * t, -1),
            scores.reshape(b * t, s),
            ids[:, None, :].expand(b, t, s).reshape(b * t, s),
        ).reshape(b, t, -1)
        loss = None
        if labels is not None:
            loss = F.nll_loss(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))
        return SimpleNamespace(
            logits=logits,
            loss=loss,
            hidden_states=out.hidden_states if output_hidden_states else None,
            attentions=out.attentions,
        )

    def token_nll(self, input_ids, attention_mask, labels) -> torch.Tensor:
        """Per-position negative log-likelihood ``(B, T - 1)`` of ``labels[:, 1:]`` (0 where ignored), computed only
        at the labelled positions (training: the context's rows skip the vocabulary projection and the mixture)."""
        h = self.gpt2.transformer(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        scores = self._scores(h, self.key(h), attention_mask)[:, :-1]
        target = labels[:, 1:]
        rows = (target != -100).nonzero(as_tuple=True)
        hq = h[:, :-1][rows]
        ids = input_ids[rows[0]]
        logp = self._mixture(hq, self.gpt2.lm_head(hq), scores[rows], ids)
        nll = torch.zeros(target.shape, dtype=logp.dtype)
        nll[rows] = -logp.gather(1, target[rows][:, None])[:, 0]
        return nll


def build_lm(config: LMConfig):
    """A fresh ``GPT2LMHeadModel`` with eager attention (the predictor reads the attention weights), wrapped in
    :class:`PointerGPT2` when ``config.pointer``."""
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2Config(
        vocab_size=config.vocab_size,
        n_positions=config.n_positions,
        n_embd=config.n_embd,
        n_layer=config.n_layer,
        n_head=config.n_head,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )
    gpt2._attn_implementation = "eager"
    model = GPT2LMHeadModel(gpt2)
    model.config._attn_implementation = "eager"
    return PointerGPT2(model) if config.pointer else model


@lru_cache(maxsize=1)
def tokenizer_texts() -> tuple[str, ...]:
    """What the BPE is trained on: every fact document and question, the training lead-ins, and the Wikipedia/Lee
    distractors. The validation and test lead-ins are held out of the BPE as they are of the LM and the heads, so
    that nothing fitted before evaluation has seen them (until 2026-12-04 the BPE was trained on every pool)."""
    texts = [text for _, _, text in C.fact_documents()]
    for country in C.facts():
        texts += [C.QUESTION.format(c=country), C.INTRO.format(c=country), C.SWITCH.format(c=country)]
    for pools in LEAD_INS.values():
        texts += list(pools["train"] + pools["train_short"]) * 20
    return tuple(texts) + C.distractor_documents()


class Tokens:
    """The BPE with the encodings the decoder needs (cached per text)."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.eos = tokenizer.token_to_id(EOS)
        self.pad = tokenizer.token_to_id(PAD)
        self.stop = self.encode(C.STOP)[0]
        self._cache: dict[str, tuple[int, ...]] = {}

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text).ids

    def cached(self, text: str) -> tuple[int, ...]:
        if text not in self._cache:
            self._cache[text] = tuple(self.encode(text))
        return self._cache[text]

    def doc(self, text: str) -> tuple[int, ...]:
        return self.cached(text)[:DOC_TOKENS]

    def decode(self, ids) -> str:
        return self.tokenizer.decode(list(ids))

    def segment(self, segment: C.Segment, first: bool) -> list[int]:
        """Token ids of one answer segment (a slot: ``" value"`` then the stop token)."""
        if segment.is_slot:
            return [*self.cached(" " + segment.text), self.stop]
        return list(self.cached(segment.text if first else " " + segment.text))

    def context(self, docs: list[str], question: str) -> list[int]:
        ids: list[int] = []
        for doc in docs:
            ids += self.doc(doc)
        return [*ids, self.eos, *self.cached(question), self.eos]


def training_sequence(
    tokens: Tokens,
    rng: random.Random,
    countries,
    distractors,
    counterfactual: bool = True,
    with_slots: bool = False,
    n_slots: int = C.SLOTS_PER_ANSWER,
    gold_docs: tuple[int, int] = (1, 2),
):
    """One LM training sequence (input ids, labels): the answer is the target, documents and question are context.

    20% of the sequences have no document; the others hold the gold documents of 1-2 of the answer's slots plus
    0-2 distractors (another fact of the same country, the same fact of another country, or a text chunk), in
    random order. 30% are multi-domain. Lead-ins come from the ``train`` pool (20% short).

    With ``counterfactual`` (R), every fact of the sequence gets a value drawn at random from its attribute's
    values, in the answer and in the documents alike: the LM cannot memorise the training countries' facts, so it
    learns to copy a slot from the documents, and to be uncertain when no document holds it (a first recipe run
    with the true values memorised them and copied nothing: 3% EM with the gold documents in context).
    With ``with_slots`` a third list marks the slot tokens (value and stop) with 1 (for ``slot_weight``).
    ``n_slots`` slots per answer; ``gold_docs`` (low, high) gold documents when documents are present.
    """
    country = rng.choice(countries)
    multi = rng.random() < 0.3
    other = rng.choice([c for c in countries if c != country]) if multi else None
    multi = multi and n_slots >= 2
    other = other if multi else None
    short = rng.random() < 0.2
    question = C.make_question(country, rng, "train", multi=multi, other=other, short=short, n_slots=n_slots)
    pool = C.values_by_attribute()
    fake: dict[tuple[str, str], str] = {}

    def value(c: str, attribute: str) -> str | None:
        if not counterfactual:
            return None
        if (c, attribute) not in fake:
            fake[(c, attribute)] = rng.choice(pool[attribute])
        return fake[(c, attribute)]

    segments = [
        C.Segment(value(s.country, s.attribute), s.attribute, s.country) if s.is_slot and counterfactual else s
        for s in question.segments
    ]
    docs: list[str] = []
    if rng.random() >= 0.2:
        slots = list(question.slots)
        low, high = min(gold_docs[0], len(slots)), min(gold_docs[1], len(slots))
        for slot in rng.sample(slots, rng.randint(low, high)):
            docs.append(C.fact_document(slot.country, slot.attribute, value(slot.country, slot.attribute)))
        for _ in range(rng.randint(0, 2)):
            kind = rng.random()
            slot = rng.choice(slots)
            if kind < 0.4:
                attribute = rng.choice([a for a in C.ATTRIBUTES if a != slot.attribute])
                docs.append(C.fact_document(slot.country, attribute, value(slot.country, attribute)))
            elif kind < 0.8:
                c = rng.choice([c for c in countries if c != slot.country])
                docs.append(C.fact_document(c, slot.attribute, value(c, slot.attribute)))
            else:
                docs.append(rng.choice(distractors))
        rng.shuffle(docs)
    context = tokens.context(docs, question.question)
    answer: list[int] = []
    slot_flags: list[int] = []
    for i, segment in enumerate(segments):
        piece = tokens.segment(segment, first=i == 0)
        answer += piece
        slot_flags += [int(segment.is_slot)] * len(piece)
    ids = (context + answer)[:MAX_POSITIONS]
    labels = ([-100] * len(context) + answer)[:MAX_POSITIONS]
    if with_slots:
        return ids, labels, ([0] * len(context) + slot_flags)[:MAX_POSITIONS]
    return ids, labels


def collate(pairs, pad: int) -> dict[str, torch.Tensor]:
    """Right-pad a list of (ids, labels[, slot flags]) to the longest."""
    length = max(len(item[0]) for item in pairs)
    input_ids = torch.full((len(pairs), length), pad, dtype=torch.long)
    labels = torch.full((len(pairs), length), -100, dtype=torch.long)
    attention = torch.zeros((len(pairs), length), dtype=torch.long)
    slots = torch.zeros((len(pairs), length), dtype=torch.float32)
    for row, item in enumerate(pairs):
        ids, target = item[0], item[1]
        input_ids[row, : len(ids)] = torch.tensor(ids)
        labels[row, : len(target)] = torch.tensor(target)
        attention[row, : len(ids)] = 1
        if len(item) > 2:
            slots[row, : len(item[2])] = torch.tensor(item[2], dtype=torch.float32)
    return {"input_ids": input_ids, "labels": labels, "attention_mask": attention, "slot_mask": slots}


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy (nats) of the softmax of ``logits`` over the last axis."""
    logp = F.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


@dataclass
class Signals:
    """Per answer position: last-layer hidden state, next-token entropy, top-1/top-2 margin, attention entropy."""

    hidden: torch.Tensor  # (T, d)
    entropy: torch.Tensor  # (T,)
    margin: torch.Tensor  # (T,)
    attention: torch.Tensor  # (T, heads)

    @staticmethod
    def empty(d: int, heads: int) -> Signals:
        return Signals(torch.zeros(0, d), torch.zeros(0), torch.zeros(0), torch.zeros(0, heads))

    def cat(self, other: Signals) -> Signals:
        return Signals(*(torch.cat((a, b)) for a, b in zip(self.astuple(), other.astuple(), strict=True)))

    def astuple(self):
        return self.hidden, self.entropy, self.margin, self.attention

    def __len__(self) -> int:
        return len(self.entropy)


def _signals(out) -> tuple[Signals, torch.Tensor]:
    logits = out.logits[0].float()
    probs = logits.softmax(-1)
    top = probs.topk(2, dim=-1).values
    attn = out.attentions[-1][0].float()  # (heads, q, k)
    attn_entropy = -(attn * attn.clamp_min(1e-12).log()).sum(-1).transpose(0, 1)  # (q, heads)
    signals = Signals(out.hidden_states[-1][0].float(), entropy(logits), top[:, 0] - top[:, 1], attn_entropy)
    return signals, logits[-1]


class Session:
    """One answer being decoded: the context (documents + question), the answer so far and the KV cache.

    Args:
        lm: The ``GPT2LMHeadModel``.
        context: Token ids of documents + question.
    """

    def __init__(self, lm, context: list[int]) -> None:
        self.lm = lm
        self.context = list(context)
        self.answer: list[int] = []
        self.cache = None
        self.signals = Signals.empty(lm.config.n_embd, lm.config.n_head)
        self.logits: torch.Tensor | None = None

    @torch.no_grad()
    def _forward(self, ids: list[int], cache):
        from transformers import DynamicCache

        cache = cache if cache is not None else DynamicCache()
        out = self.lm(
            torch.tensor([ids]),
            cache=cache,
            use_cache=True,
            output_hidden_states=True,
            output_attentions=True,
        )
        out.kv = cache  # updated in place
        return out

    def start(self) -> int:
        """Prefill the context; returns its length (the prefill tokens)."""
        out = self._forward(self.context, None)
        self.cache = out.kv
        self.logits = out.logits[0, -1].float()
        return len(self.context)

    def extend(self, ids: list[int]) -> Signals:
        """Feed answer tokens (one forward, KV cache); returns their signals."""
        limit = self.lm.config.n_positions
        if len(self.context) + len(self.answer) + len(ids) > limit:
            raise ValueError(f"context of {len(self.context) + len(self.answer) + len(ids)} tokens > {limit}")
        out = self._forward(list(ids), self.cache)
        self.cache = out.kv
        signals, self.logits = _signals(out)
        self.answer += list(ids)
        self.signals = self.signals.cat(signals)
        return signals

    def rebuild(self, context: list[int]) -> None:
        """Replace the context (documents inserted) and recompute the cache and the answer's signals."""
        room = self.lm.config.n_positions - len(self.answer) - 8
        self.context = list(context)[-room:] if len(context) > room else list(context)
        out = self._forward(self.context + self.answer, None)
        self.cache = out.kv
        signals, self.logits = _signals(out)
        n = len(self.answer)
        tail = Signals(*(x[len(self.context) :] for x in signals.astuple())) if n else None
        self.signals = tail if tail is not None else Signals.empty(self.lm.config.n_embd, self.lm.config.n_head)
        if n == 0:
            self.logits = out.logits[0, -1].float()


def window_features(signals: Signals, t: int, w: int) -> torch.Tensor:
    """The predictor's input at answer position ``t``: window-mean hidden state, entropy trajectory
    ``H_{t-w+1..t}`` (zero-padded), window-mean attention entropy per head, top-1/top-2 margin at ``t``."""
    lo = max(0, t - w + 1)
    hidden = signals.hidden[lo : t + 1].mean(0)
    trajectory = torch.zeros(w)
    values = signals.entropy[lo : t + 1]
    trajectory[w - len(values) :] = values
    attention = signals.attention[lo : t + 1].mean(0)
    return torch.cat((hidden, trajectory, attention, signals.margin[t : t + 1]))


def window_hidden(signals: Signals, t: int, w: int) -> torch.Tensor:
    """Mean last-layer hidden state over the window ending at ``t`` (the query head's input)."""
    return signals.hidden[max(0, t - w + 1) : t + 1].mean(0)


def perplexity_of(loss: float) -> float:
    return math.exp(min(loss, 50.0))
