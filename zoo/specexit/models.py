"""The target "reasoning" LM, the EAGLE-3-style draft with SpecExit's widened ``fc``, and a lean KV-cached forward.

* **Target**: ``transformers.LlamaForCausalLM`` from a small config (d=192, 4 layers, 4 heads, tied
  embeddings). :func:`target_forward` runs its layers directly with our :class:`KVCache`, returning the
  logits, the final normed hidden state and the concatenated hidden states of the tapped layers
  (EAGLE-3 reads low, middle and high layers: {1, 2, 4} here).
* **Draft** (:class:`EagleDraft`): ``fc`` fuses the tapped features (3·H → H) and, SpecExit's change,
  carries ``n_signals`` extra output rows whose values are the signal logits (confidence, progress,
  log-remaining length). The fused feature and the embedding of the next token (the target's embedding,
  shared) are normed, concatenated and projected to H, then pass one ``LlamaDecoderLayer``; the output
  is normed and read by the target's LM head (shared). The draft output at position i stands in for
  the target feature at i+1 when the draft chains (EAGLE's self-feature).

Deviation: EAGLE-3 feeds the 2H concatenation straight into a decoder layer with 2H-wide q/k/v
projections; we project 2H → H first (``in_proj``) so that the layer is a stock ``LlamaDecoderLayer``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm, LlamaRotaryEmbedding


@dataclass
class TargetConfig:
    """Architecture of the target LM.

    Args:
        hidden_size: Model width.
        num_layers: Decoder layers.
        num_heads: Attention heads.
        intermediate_size: MLP width.
        max_positions: Longest sequence (prompt + completion) the caches hold.
    """

    hidden_size: int = 192
    num_layers: int = 4
    num_heads: int = 4
    intermediate_size: int = 512
    max_positions: int = 256


@dataclass
class DraftConfig:
    """Architecture of the draft model.

    Args:
        taps: 1-based target layers whose outputs the draft fuses (EAGLE-3: low, middle, high).
        num_heads: Attention heads of the draft layer.
        intermediate_size: MLP width of the draft layer.
        n_signals: Extra ``fc`` rows for SpecExit's signals (3: confidence, progress, remain; 0: plain EAGLE).
    """

    taps: tuple[int, ...] = (1, 2, 4)
    num_heads: int = 4
    intermediate_size: int = 256
    n_signals: int = 3


def llama_config(
    vocab_size: int, hidden: int, layers: int, heads: int, intermediate: int, max_positions: int
) -> LlamaConfig:
    """A small LlamaConfig with SDPA attention (the masks below are boolean SDPA masks)."""
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        intermediate_size=intermediate,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        pad_token_id=0,
        bos_token_id=None,
        eos_token_id=1,
    )
    config._attn_implementation = "sdpa"
    return config


def build_target(vocab_size: int, cfg: TargetConfig) -> LlamaForCausalLM:
    """The target LM (random init)."""
    config = llama_config(
        vocab_size, cfg.hidden_size, cfg.num_layers, cfg.num_heads, cfg.intermediate_size, cfg.max_positions
    )
    return LlamaForCausalLM(config)


class KVCache:
    """A preallocated key/value cache with the ``update``/``get_seq_length`` interface transformers' attention uses.

    ``crop(n)`` rolls the cache back to its first ``n`` positions (rejected draft tokens, probe suffixes).

    Args:
        num_layers: Layers that write into the cache.
        max_length: Most positions it holds.
    """

    def __init__(self, num_layers: int, max_length: int) -> None:
        self.max_length = max_length
        self.keys: list[torch.Tensor | None] = [None] * num_layers
        self.values: list[torch.Tensor | None] = [None] * num_layers
        self.lengths = [0] * num_layers

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int, *args, **kwargs):
        """Append ``key``/``value`` (batch, heads, q, head_dim) for a layer; return all cached keys/values."""
        start, q = self.lengths[layer_idx], key.shape[2]
        if start + q > self.max_length:
            raise ValueError(
                f"sequence of {start + q} tokens exceeds the cache of {self.max_length}; lower max_new_tokens "
                "or raise target.max_positions"
            )
        if self.keys[layer_idx] is None:
            shape = (key.shape[0], key.shape[1], self.max_length, key.shape[3])
            self.keys[layer_idx] = key.new_empty(shape)
            self.values[layer_idx] = value.new_empty(shape)
        self.keys[layer_idx][:, :, start : start + q] = key
        self.values[layer_idx][:, :, start : start + q] = value
        self.lengths[layer_idx] = start + q
        return self.keys[layer_idx][:, :, : start + q], self.values[layer_idx][:, :, : start + q]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.lengths[layer_idx]

    def crop(self, length: int) -> None:
        """Keep the first ``length`` positions."""
        self.lengths = [min(n, length) for n in self.lengths]


class ConcatCache:
    """An autograd-safe cache for training: appends by concatenation instead of writing in place."""

    def __init__(self) -> None:
        self.keys: dict[int, torch.Tensor] = {}
        self.values: dict[int, torch.Tensor] = {}

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int, *args, **kwargs):
        if layer_idx in self.keys:
            key = torch.cat((self.keys[layer_idx], key), dim=2)
            value = torch.cat((self.values[layer_idx], value), dim=2)
        self.keys[layer_idx], self.values[layer_idx] = key, value
        return key, value

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.keys[layer_idx].shape[2] if layer_idx in self.keys else 0


def chunk_mask(past: int, q: int, device=None, visible: int | None = None) -> torch.Tensor | None:
    """Boolean SDPA mask (1, 1, q, past+q) for ``q`` new tokens after ``past`` cached ones (True = attend).

    Args:
        past: Cached positions.
        q: New positions (causal among themselves).
        device: Device of the mask.
        visible: Only the first ``visible`` cached positions are attended (a probe branching off mid-cache).

    Returns:
        None when plain attention is already right (one new token seeing the whole cache, or no cache).
    """
    if visible is None and (q == 1 or past == 0):
        return None
    mask = torch.ones(q, past + q, dtype=torch.bool, device=device)
    mask[:, past:] = torch.ones(q, q, dtype=torch.bool, device=device).tril()
    if visible is not None:
        mask[:, visible:past] = False
    return mask[None, None]


def causal_mask(past: int, q: int, device=None) -> torch.Tensor:
    """Boolean mask (1, 1, q, past+q): ``q`` new tokens see the ``past`` cached ones and, causally, each other."""
    return torch.ones(q, past + q, dtype=torch.bool, device=device).tril(diagonal=past)[None, None]


def coupled_mask(
    mask: torch.Tensor | None, past: int, positions: torch.Tensor, key_positions: torch.Tensor
) -> torch.Tensor:
    """``mask`` (default: :func:`causal_mask`) and the coupled-position window of :mod:`zoo.specexit.positions`.

    A query sees a key only when their position ids differ by at most ``WINDOW``, so no attention ever spans a
    distance a longer problem would make new (RoPE sees only relative positions).

    Args:
        mask: The structural mask (causal, probe branch, unrolled step) or None.
        past: Cached positions before the ``q`` new ones.
        positions: (q,) or (B, q) position ids of the queries.
        key_positions: (past+q,) or (B, past+q) position ids of the keys.
    """
    from zoo.specexit.positions import WINDOW

    near = (key_positions.unsqueeze(-2) - positions.unsqueeze(-1)).abs() <= WINDOW
    near = near[:, None] if near.dim() == 3 else near[None, None]
    if mask is None:
        mask = causal_mask(past, positions.shape[-1], positions.device)
    return mask & near


@dataclass
class TargetOutput:
    """What one target pass returns.

    Args:
        logits: (batch, q, vocab).
        hidden: Final normed hidden states (batch, q, H), what the LM head reads.
        features: Concatenated outputs of the tapped layers (batch, q, len(taps)·H), what the draft reads.
    """

    logits: torch.Tensor
    hidden: torch.Tensor
    features: torch.Tensor


def target_forward(
    target: LlamaForCausalLM,
    input_ids: torch.Tensor,
    taps: tuple[int, ...],
    cache: KVCache | None = None,
    positions: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    key_positions: torch.Tensor | None = None,
) -> TargetOutput:
    """Run the target's layers (with or without a cache), tapping layer outputs for the draft.

    Args:
        target: The target LM.
        input_ids: (batch, q) token ids.
        taps: 1-based layers whose outputs are concatenated into ``features``.
        cache: KV cache to read and extend (None: no cache, causal attention over ``input_ids``).
        positions: (q,) or (batch, q) position ids (default: following the cache; the decoders and training pass
            the coupled ids of :mod:`zoo.specexit.positions`).
        mask: Boolean attention mask (default: :func:`chunk_mask`).
        key_positions: Position ids of all keys (cached and new); given, attention is also limited to the
            coupled-position window (:func:`coupled_mask`), as every decoder and the training batches do.
    """
    model = target.model
    past = cache.get_seq_length() if cache is not None else 0
    q = input_ids.shape[1]
    if positions is None:
        positions = torch.arange(past, past + q, device=input_ids.device)
    if key_positions is not None:
        mask = coupled_mask(mask, past, positions, key_positions)
    elif mask is None and cache is not None:
        mask = chunk_mask(past, q, input_ids.device)
    hidden = model.embed_tokens(input_ids)
    rope = model.rotary_emb(hidden, positions if positions.dim() == 2 else positions[None])
    tapped = []
    for index, layer in enumerate(model.layers, start=1):
        hidden = layer(hidden, attention_mask=mask, position_embeddings=rope, cache=cache)
        if index in taps:
            tapped.append(hidden)
    hidden = model.norm(hidden)
    return TargetOutput(target.lm_head(hidden), hidden, torch.cat(tapped, dim=-1))


class EagleDraft(nn.Module):
    """EAGLE-3-style draft head with SpecExit's signal rows in ``fc``.

    Args:
        vocab_size: Vocabulary size (for the layer's config; the embedding and LM head are the target's).
        hidden_size: Width H (the target's).
        cfg: Draft architecture.
        max_positions: Longest sequence.
    """

    def __init__(self, vocab_size: int, hidden_size: int, cfg: DraftConfig, max_positions: int = 256) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.n_signals = cfg.n_signals
        self.taps = tuple(cfg.taps)
        # SpecExit: the last n_signals rows of fc are the signal logits; the first H rows are EAGLE-3's fc.
        self.fc = nn.Linear(len(self.taps) * hidden_size, hidden_size + cfg.n_signals, bias=False)
        self.norm_embed = LlamaRMSNorm(hidden_size)
        self.norm_feature = LlamaRMSNorm(hidden_size)
        self.in_proj = nn.Linear(2 * hidden_size, hidden_size, bias=False)
        config = llama_config(vocab_size, hidden_size, 1, cfg.num_heads, cfg.intermediate_size, max_positions)
        self.layer = LlamaDecoderLayer(config, layer_idx=0)
        self.rotary = LlamaRotaryEmbedding(config)
        self.norm = LlamaRMSNorm(hidden_size)

    def fuse(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Fused H-dim feature and the signal logits (``n_signals`` wide) of target features."""
        out = self.fc(features)
        return out[..., : self.hidden_size], out[..., self.hidden_size :]

    def forward(
        self,
        fused: torch.Tensor,
        next_embeds: torch.Tensor,
        positions: torch.Tensor,
        cache: KVCache | None = None,
        mask: torch.Tensor | None = None,
        key_positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One draft step over ``q`` positions; returns the pre-norm draft hidden states (batch, q, H).

        Args:
            fused: Fused target features, or the draft's own previous outputs when chaining (batch, q, H).
            next_embeds: Embeddings of the tokens that follow each position (batch, q, H).
            positions: (q,) or (batch, q) position ids.
            cache: The draft's KV cache.
            mask: Boolean attention mask (default: causal after the cache).
            key_positions: Position ids of all keys; given, attention is limited to the coupled-position window.
        """
        past = cache.get_seq_length() if cache is not None else 0
        if key_positions is not None:
            mask = coupled_mask(mask, past, positions, key_positions)
        elif mask is None and cache is not None:
            mask = chunk_mask(past, fused.shape[1], fused.device)
        x = self.in_proj(torch.cat((self.norm_embed(next_embeds), self.norm_feature(fused)), dim=-1))
        rope = self.rotary(x, positions if positions.dim() == 2 else positions[None])
        return self.layer(x, attention_mask=mask, position_embeddings=rope, cache=cache)

    def logits(self, hidden: torch.Tensor, lm_head: nn.Module) -> torch.Tensor:
        """Next-next-token logits through the (shared) LM head."""
        return lm_head(self.norm(hidden))


def signal_values(signal_logits: torch.Tensor) -> torch.Tensor:
    """confidence = sigmoid(s0), progress = sigmoid(s1), remain = exp(s2), per position (..., 3)."""
    return torch.stack(
        (torch.sigmoid(signal_logits[..., 0]), torch.sigmoid(signal_logits[..., 1]), torch.exp(signal_logits[..., 2])),
        dim=-1,
    )
