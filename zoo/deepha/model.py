"""DeepHA's networks in plain torch: the token embedder, GPT-2 decoders with one head per action type.

The decoder is transformers' ``GPT2Model`` fed with ``inputs_embeds`` and explicit ``position_ids``; its KV
cache is transformers' own (``cache=`` / ``.cache``, the argument transformers 5 calls ``past_key_values``
until 5.40): nothing of the attention or the cache is written here.
"""

from __future__ import annotations

import torch
from torch import nn

from zoo.deepha.vocab import ACTION_TYPES, N_DISCRETE, OBS, TYPE_OFFSETS, TYPE_SIZES

N_OBJECTS, N_COLOURS, N_STATES = 11, 6, 3  # MiniGrid's OBJECT_TO_IDX, COLOR_TO_IDX, STATE_TO_IDX


class Embedder(nn.Module):
    """Token embeddings: discrete tokens by (type, id); OBS tokens from the 7x7x3 grid and the direction.

    OBS: object, colour and state embeddings (16 each) concatenated per cell, 49 x 48 flattened, a 2-layer MLP
    to ``d_model``, plus a direction embedding. Every token also gets a learned token-type embedding.
    """

    def __init__(self, d_model: int, cell_dim: int = 16):
        super().__init__()
        self.tokens = nn.Embedding(N_DISCRETE, d_model)
        self.types = nn.Embedding(8, d_model)
        self.objects = nn.Embedding(N_OBJECTS, cell_dim)
        self.colours = nn.Embedding(N_COLOURS, cell_dim)
        self.states = nn.Embedding(N_STATES, cell_dim)
        self.obs_mlp = nn.Sequential(nn.Linear(49 * 3 * cell_dim, d_model), nn.GELU(), nn.Linear(d_model, d_model))
        self.directions = nn.Embedding(4, d_model)
        self.register_buffer("offsets", torch.tensor([TYPE_OFFSETS[k] for k in range(8)]), persistent=False)

    def observe(self, images: torch.Tensor, dirs: torch.Tensor) -> torch.Tensor:
        """``[N, 7, 7, 3]`` grids and ``[N]`` directions -> ``[N, d]`` OBS embeddings (type embedding added)."""
        images = images.long()
        cells = torch.cat(
            [self.objects(images[..., 0]), self.colours(images[..., 1]), self.states(images[..., 2])], dim=-1
        )
        return self.obs_mlp(cells.flatten(1)) + self.directions(dirs.long()) + self.types.weight[OBS]

    def forward(self, types: torch.Tensor, ids: torch.Tensor, obs: torch.Tensor | None = None) -> torch.Tensor:
        """``[B, L]`` token types and ids -> ``[B, L, d]``; an OBS token's id is its row of ``obs [N, d]``."""
        is_obs = types == OBS
        flat_ids = torch.where(is_obs, torch.zeros_like(ids), ids + self.offsets[types])
        out = self.tokens(flat_ids) + self.types(types)
        if is_obs.any():
            if obs is None:
                raise ValueError("obs: OBS tokens need their encoded observations")
            out = out.clone()
            out[is_obs] = obs[ids[is_obs]]
        return out


class Decoder(nn.Module):
    """A GPT-2 decoder over embeddings with one linear head per action type (each its own vocabulary)."""

    def __init__(self, d_model: int, n_layer: int, n_head: int, max_len: int):
        super().__init__()
        from transformers import GPT2Config, GPT2Model

        config = GPT2Config(
            vocab_size=1, n_positions=max_len, n_embd=d_model, n_layer=n_layer, n_head=n_head,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, activation_function="gelu",
            bos_token_id=None, eos_token_id=None,
        )  # fmt: skip
        config._attn_implementation = "sdpa"
        self.max_len = max_len
        self.gpt = GPT2Model(config)
        self.gpt.wte.weight.requires_grad_(False)  # unused: inputs come as embeddings
        self.heads = nn.ModuleDict({str(k): nn.Linear(d_model, TYPE_SIZES[k]) for k in ACTION_TYPES})

    def forward(
        self, embeds: torch.Tensor, positions: torch.Tensor | None = None, cache=None, use_cache=False, mask=None
    ):
        """Hidden states ``[B, L, d]`` (and the cache) of ``embeds`` at ``positions`` after ``cache``'s prefix.

        ``mask`` (``[B, past + L]``, 1 = real token) hides left padding when rows of a batch differ in length.
        """
        past = cache.get_seq_length() if cache is not None else 0
        if positions is None:
            positions = torch.arange(past, past + embeds.shape[1], device=embeds.device).expand(embeds.shape[0], -1)
        if int(positions.max()) >= self.max_len:
            raise ValueError(
                f"context: position {int(positions.max())} passes the maximum length {self.max_len} of the decoder"
            )
        out = self.gpt(
            inputs_embeds=embeds, position_ids=positions, cache=cache, use_cache=use_cache, attention_mask=mask
        )
        return out.last_hidden_state, out.cache

    def logits(self, hidden: torch.Tensor, kind: int) -> torch.Tensor:
        return self.heads[str(kind)](hidden)


def num_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
