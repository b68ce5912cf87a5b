"""DeepHA's networks in plain torch: the token embedder, GPT-2 decoders with one head per action type.

The decoder is transformers' ``GPT2Model`` fed with ``inputs_embeds`` and explicit ``position_ids``; its KV
cache is transformers' own (``cache=`` / ``.cache``, the argument transformers 5 calls ``past_key_values``
until 5.40): nothing of the attention or the cache is written here.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zoo.deepha.vocab import ACTION_TYPES, MISSION_WORDS, N_DISCRETE, OBS, TYPE_OFFSETS, TYPE_SIZES

N_OBJECTS, N_COLOURS, N_STATES = 11, 6, 3  # MiniGrid's OBJECT_TO_IDX, COLOR_TO_IDX, STATE_TO_IDX
OBS_ENCODERS = ("mlp", "film")


class FiLMEncoder(nn.Module):
    """BabyAI's mission-conditioned image encoder: 3x3 convolutions over the cell map, each FiLM-modulated.

    The mission (word ids, 0 = padding) is read by a GRU; its last hidden state gives every conv block a
    per-channel scale and shift (``relu((1 + gamma) * conv(x) + beta)``); the last map is flattened (it keeps
    where things are: the grounding is an offset in the view) and projected to ``d_model``. No normalisation
    layer, so an OBS embedding depends on its own image and mission only (not on the batch).

    Args:
        in_channels: Channels of the cell map (the concatenated object, colour and state embeddings).
        d_model: Output width.
        channels: Output channels of each 3x3 conv block.
        word_dim: Width of the mission's word embeddings.
        mission_dim: Hidden size of the mission GRU.
    """

    def __init__(self, in_channels: int, d_model: int, channels=(64, 64, 32), word_dim: int = 32, mission_dim=64):
        super().__init__()
        self.words = nn.Embedding(len(MISSION_WORDS), word_dim, padding_idx=0)
        self.gru = nn.GRU(word_dim, mission_dim, batch_first=True)
        widths = (in_channels, *channels)
        self.convs = nn.ModuleList(nn.Conv2d(a, b, 3, padding=1) for a, b in zip(widths[:-1], widths[1:], strict=True))
        self.films = nn.ModuleList(nn.Linear(mission_dim, 2 * c) for c in channels)
        self.out = nn.Linear(channels[-1] * 49, d_model)

    def encode_mission(self, missions: torch.Tensor) -> torch.Tensor:
        """``[M, L]`` word ids, right-padded with 0 -> ``[M, mission_dim]`` (the GRU state at the last word)."""
        lengths = (missions != 0).sum(1).clamp(min=1)
        states, _ = self.gru(self.words(missions))
        return states[torch.arange(len(missions)), lengths - 1]  # the GRU is causal: padding after it is unseen

    def forward(self, cells: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        """``[N, 7, 7, C]`` cell embeddings and ``[N, mission_dim]`` mission codes -> ``[N, d_model]``."""
        x = cells.permute(0, 3, 1, 2)
        for conv, film in zip(self.convs, self.films, strict=True):
            gamma, beta = film(codes)[..., None, None].chunk(2, dim=1)
            x = F.relu((1 + gamma) * conv(x) + beta)
        return self.out(x.flatten(1))


class Embedder(nn.Module):
    """Token embeddings: discrete tokens by (type, id); OBS tokens from the 7x7x3 grid and the direction.

    OBS: object, colour and state embeddings (16 each) concatenated per cell, then either (``obs_encoder="mlp"``)
    the 49 x 48 values flattened through a 2-layer MLP to ``d_model`` (318k parameters; it does not see the
    mission), or (``"film"``) the [48, 7, 7] map through :class:`FiLMEncoder`, conditioned on the episode's
    mission (325k parameters: 3 conv blocks 64/64/32 channels, a GRU over 32-dim word embeddings with 64 hidden
    units, FiLM generators, 1568 -> d projection). Either way a direction embedding is added, and every token also
    gets a learned token-type embedding.

    Args:
        d_model: Width.
        cell_dim: Width of each of the object, colour and state embeddings of a cell.
        obs_encoder: ``"mlp"`` or ``"film"``.
    """

    def __init__(self, d_model: int, cell_dim: int = 16, obs_encoder: str = "mlp"):
        super().__init__()
        if obs_encoder not in OBS_ENCODERS:
            raise ValueError(f"obs_encoder: expected one of {', '.join(OBS_ENCODERS)}, got {obs_encoder!r}")
        self.obs_encoder = obs_encoder
        self.tokens = nn.Embedding(N_DISCRETE, d_model)
        self.types = nn.Embedding(8, d_model)
        self.objects = nn.Embedding(N_OBJECTS, cell_dim)
        self.colours = nn.Embedding(N_COLOURS, cell_dim)
        self.states = nn.Embedding(N_STATES, cell_dim)
        if obs_encoder == "mlp":  # created in the same order as before the option: seeded inits are unchanged
            self.obs_mlp = nn.Sequential(nn.Linear(49 * 3 * cell_dim, d_model), nn.GELU(), nn.Linear(d_model, d_model))
        else:
            self.obs_film = FiLMEncoder(3 * cell_dim, d_model)
        self.directions = nn.Embedding(4, d_model)
        self.register_buffer("offsets", torch.tensor([TYPE_OFFSETS[k] for k in range(8)]), persistent=False)

    @property
    def needs_mission(self) -> bool:
        """Whether :meth:`observe` reads the mission (the ``film`` encoder)."""
        return self.obs_encoder == "film"

    def mission_codes(self, missions) -> torch.Tensor:
        """``[N, L]`` word ids (0-padded) -> ``[N, mission_dim]`` mission codes (``film`` only); equal rows are
        encoded once (a training batch repeats its episode's mission for every image)."""
        if not self.needs_mission:
            raise ValueError(f"mission codes: the {self.obs_encoder!r} OBS encoder does not read the mission")
        missions = torch.as_tensor(missions).long()
        unique, inverse = torch.unique(missions, dim=0, return_inverse=True)
        return self.obs_film.encode_mission(unique)[inverse]

    def observe(
        self, images: torch.Tensor, dirs: torch.Tensor, missions: torch.Tensor | None = None, codes=None
    ) -> torch.Tensor:
        """``[N, 7, 7, 3]`` grids and ``[N]`` directions -> ``[N, d]`` OBS embeddings (type embedding added).

        Args:
            images: MiniGrid encodings ``[N, 7, 7, 3]``.
            dirs: Directions ``[N]``.
            missions: Each image's mission word ids ``[N, L]`` (0-padded); needed by ``film``, ignored by ``mlp``.
            codes: Precomputed :meth:`mission_codes` ``[N, mission_dim]`` instead of ``missions`` (``film``).
        """
        images = images.long()
        cells = torch.cat(
            [self.objects(images[..., 0]), self.colours(images[..., 1]), self.states(images[..., 2])], dim=-1
        )
        if self.obs_encoder == "mlp":
            encoded = self.obs_mlp(cells.flatten(1))
        else:
            if codes is None:
                if missions is None:
                    raise ValueError("missions: the film OBS encoder needs each image's mission word ids [N, L]")
                codes = self.mission_codes(missions)
            encoded = self.obs_film(cells, codes)
        return encoded + self.directions(dirs.long()) + self.types.weight[OBS]

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
