"""Block-causal next-scale transformer (VAR, Tian et al. 2024), tiny, with class AdaLN, CFG and a per-scale KV cache.

Plain torch. The 85 tokens of an image are its code maps at scales 1, 2, 4, 8 in raster order, coarse to fine.
Token inputs: the class embedding (plus a start position) for the one token of scale 1; for scale k > 1 the
cumulative f_hat_<k of the tokenizer, area-downsampled to k x k, through a linear 32 -> d layer. A token of scale
k attends to every token of scales <= k. Every block's LayerNorms are modulated by the class embedding (AdaLN).
Sampling predicts one whole scale per step; with ``use_cache`` the keys and values of earlier scales are kept, so
each step runs only the new scale's tokens (the per-scale KV cache), otherwise the whole prefix is recomputed.

Prototype injection (:mod:`zoo.protovar.prototypes` builds the maps): at an injected scale k a per-sample map
P (k x k x D) adds beta_k to the logit of the code that the residual P - down(f_hat_<k) quantises to
(``logit bias``); ``gamma_k`` mixes the cumulative map toward P after the scale is sampled (``embedding mixing``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from zoo._errors import ZooError


def block_causal_mask(scales: Sequence[int]) -> torch.Tensor:
    """[L, L] bool, True where token i (row) may attend token j: scale(j) <= scale(i)."""
    level = torch.cat([torch.full((k * k,), i) for i, k in enumerate(scales)])
    return level[None, :] <= level[:, None]


class AdaLNBlock(nn.Module):
    """Pre-norm transformer block whose two LayerNorms take shift, scale and gate from the class embedding."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(approximate="tanh"), nn.Linear(hidden, dim))
        self.ada = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))
        nn.init.zeros_(self.ada[1].weight)
        nn.init.zeros_(self.ada[1].bias)

    def forward(self, x, cond, mask=None, cache: dict | None = None):
        shift1, scale1, gate1, shift2, scale2, gate2 = self.ada(cond)[:, None].chunk(6, dim=-1)
        h = self.norm1(x) * (1 + scale1) + shift1
        n, length, dim = h.shape
        q, k, v = self.qkv(h).view(n, length, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        if cache is not None:
            if "k" in cache:
                k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)
            cache["k"], cache["v"] = k, v
        attn = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + gate1 * self.proj(attn.transpose(1, 2).reshape(n, length, dim))
        h = self.norm2(x) * (1 + scale2) + shift2
        return x + gate2 * self.mlp(h)


class VARTransformer(nn.Module):
    """The next-scale predictor.

    Args:
        num_classes: Classes; id ``num_classes`` is the null class of classifier-free guidance.
        codebook_size: V.
        code_dim: D, the tokenizer's code dimension.
        dim: Transformer width d.
        depth: Blocks.
        heads: Attention heads.
        scales: Code-map sides, coarse to fine.
    """

    def __init__(
        self,
        num_classes: int = 10,
        codebook_size: int = 256,
        code_dim: int = 32,
        dim: int = 128,
        depth: int = 4,
        heads: int = 4,
        scales: Sequence[int] = (1, 2, 4, 8),
    ) -> None:
        super().__init__()
        if dim % heads:
            raise ZooError(f"dim={dim} must be divisible by heads={heads}")
        self.num_classes, self.scales = num_classes, tuple(scales)
        self.lengths = [k * k for k in self.scales]
        self.class_emb = nn.Embedding(num_classes + 1, dim)
        self.word_embed = nn.Linear(code_dim, dim)
        self.pos_start = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.scale_emb = nn.Embedding(len(self.scales), dim)
        self.pos_2d = nn.Parameter(torch.randn(1, sum(self.lengths), dim) * 0.02)
        self.blocks = nn.ModuleList(AdaLNBlock(dim, heads) for _ in range(depth))
        self.head_norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.head_ada = nn.Sequential(nn.SiLU(), nn.Linear(dim, 2 * dim))
        self.head = nn.Linear(dim, codebook_size)
        level = torch.cat([torch.full((k * k,), i) for i, k in enumerate(self.scales)])
        self.register_buffer("level", level, persistent=False)
        self.register_buffer("mask", block_causal_mask(self.scales), persistent=False)

    @property
    def num_tokens(self) -> int:
        return sum(self.lengths)

    def _embed(self, class_ids, inputs, start: int, stop: int) -> torch.Tensor:
        """Input embeddings of tokens [start, stop); ``inputs`` are the code-vector inputs of its tokens >= 1."""
        pieces = []
        if start == 0:
            pieces.append(self.class_emb(class_ids)[:, None] + self.pos_start)
        if stop > max(start, 1):
            pieces.append(self.word_embed(inputs))
        x = torch.cat(pieces, 1)
        return x + self.scale_emb(self.level[start:stop])[None] + self.pos_2d[:, start:stop]

    def _head(self, x, cond) -> torch.Tensor:
        shift, scale = self.head_ada(cond)[:, None].chunk(2, dim=-1)
        return self.head(self.head_norm(x) * (1 + scale) + shift)

    def forward(self, class_ids: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits.

        Args:
            class_ids: [N] in 0..num_classes (num_classes = unconditional).
            inputs: [N, L - 1, D]: the tokenizer's ``var_inputs`` (tokens of scales 2..).

        Returns:
            [N, L, V] logits for the codes of every token.
        """
        cond = self.class_emb(class_ids)
        x = self._embed(class_ids, inputs, 0, self.num_tokens)
        for block in self.blocks:
            x = block(x, cond, self.mask)
        return self._head(x, cond)

    def step_logits(self, class_ids, inputs_so_far, index: int, caches: list[dict] | None) -> torch.Tensor:
        """Logits of scale ``index`` given the inputs of scales 1..index (cache: only scale ``index``'s)."""
        start, stop = sum(self.lengths[:index]), sum(self.lengths[: index + 1])
        cond = self.class_emb(class_ids)
        if caches is not None:
            new = inputs_so_far[:, max(start - 1, 0) : stop - 1]
            x = self._embed(class_ids, new, start, stop)
            for block, cache in zip(self.blocks, caches, strict=True):
                x = block(x, cond, None, cache)
            return self._head(x, cond)
        x = self._embed(class_ids, inputs_so_far[:, : stop - 1], 0, stop)
        mask = self.mask[:stop, :stop]
        for block in self.blocks:
            x = block(x, cond, mask)
        return self._head(x[:, start:stop], cond)


def check_guidance(name: str, values: Sequence[float] | None, injected: Sequence[int]) -> tuple[float, ...]:
    """A per-scale strength list must have one value per injected scale."""
    values = tuple(float(v) for v in (values or [0.0] * len(injected)))
    if len(values) != len(injected):
        raise ZooError(
            f"{name} has {len(values)} values but {len(injected)} scales are injected ({list(injected)}); "
            f"give one value per injected scale"
        )
    return values


@torch.no_grad()
def sample(
    var: VARTransformer,
    tokenizer,
    class_ids: torch.Tensor,
    generator: torch.Generator,
    top_k: int = 32,
    temperature: float = 1.0,
    cfg: float = 1.5,
    prototypes: Sequence[torch.Tensor] | None = None,
    beta: Sequence[float] | None = None,
    gamma: Sequence[float] | None = None,
    use_cache: bool = True,
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Sample f_hat (and the code maps) for ``class_ids``, optionally guided by per-sample prototype maps.

    Args:
        var: The transformer.
        tokenizer: The :class:`~zoo.protovar.tokenizer.MultiScaleVQVAE` whose codes ``var`` predicts.
        class_ids: [N] class of each sample.
        generator: The only source of randomness (same generator state => same samples).
        top_k: Keep the k most likely codes (0: all).
        temperature: Logit temperature.
        cfg: Classifier-free guidance weight w: logits = uncond + w (cond - uncond); 1 disables it.
        prototypes: One [N, k, k, D] map per injected scale (the first len(prototypes) scales), or None.
        beta: Logit bias per injected scale.
        gamma: Embedding-mixing weight per injected scale.
        use_cache: Keep the keys and values of earlier scales (else recompute the prefix each step).

    Returns:
        (f_hat [N, D, 8, 8], code maps [N, k, k] per scale).
    """
    prototypes = list(prototypes or [])
    injected = [var.scales[i] for i in range(len(prototypes))]
    beta = check_guidance("beta", beta, injected)
    gamma = check_guidance("gamma", gamma, injected)
    n = class_ids.shape[0]
    guided = cfg != 1.0
    ids = torch.cat([class_ids, torch.full_like(class_ids, var.num_classes)]) if guided else class_ids
    caches = [{} for _ in var.blocks] if use_cache else None
    dim = tokenizer.codebook.shape[1]
    f_hat = torch.zeros(n, dim, tokenizer.side, tokenizer.side)
    inputs = torch.zeros(n, 0, dim)
    codes = []
    for index, k in enumerate(var.scales):
        step_inputs = torch.cat([inputs, inputs]) if guided else inputs
        logits = var.step_logits(ids, step_inputs, index, caches)
        if guided:
            logits = logits[n:] + cfg * (logits[:n] - logits[n:])
        if index < len(prototypes) and beta[index] != 0.0:
            current = F.adaptive_avg_pool2d(f_hat, k) if k != tokenizer.side else f_hat
            target = tokenizer.lookup(prototypes[index] - current.permute(0, 2, 3, 1)).reshape(n, k * k)
            logits = logits + beta[index] * F.one_hot(target, logits.shape[-1]).to(logits.dtype)
        logits = logits / temperature
        if top_k and top_k < logits.shape[-1]:
            kth = logits.topk(top_k, dim=-1).values[..., -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = logits.softmax(-1).reshape(-1, logits.shape[-1])
        picked = torch.multinomial(probs, 1, generator=generator).reshape(n, k, k)
        codes.append(picked)
        f_hat = f_hat + tokenizer.code_to_z(picked, index)
        if index < len(prototypes) and gamma[index] != 0.0:
            target = prototypes[index].permute(0, 3, 1, 2)
            if k != tokenizer.side:
                target = F.interpolate(target, size=f_hat.shape[-2:], mode="bicubic", align_corners=False)
            f_hat = (1 - gamma[index]) * f_hat + gamma[index] * target
        if index + 1 < len(var.scales):
            inputs = torch.cat([inputs, tokenizer.next_input(f_hat, index + 1)], 1)
    return f_hat, codes
