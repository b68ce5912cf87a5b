"""Small causal LMs built from ``transformers`` configs, and batched sampling with a KV cache.

These are the response generators that stand in for the paper's ten small LLMs: GPT-2, Llama, GPT-NeoX
(Pythia's family) and Qwen2 architectures at a few widths and depths, trained from scratch by
``AporiaGeneratorModule`` on the country-facts corpus mixed with Wikipedia text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

ARCHITECTURES = ("gpt2", "llama", "gpt_neox", "qwen2")


@dataclass
class LMConfig:
    """Architecture of a generator LM.

    Args:
        arch: One of :data:`ARCHITECTURES`.
        vocab_size: Vocabulary size (the BPE's).
        d_model: Hidden width.
        n_layers: Transformer blocks.
        n_heads: Attention heads.
        context: Maximum sequence length (positions).
    """

    arch: str = "gpt2"
    vocab_size: int = 2048
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    context: int = 128


def build_causal_lm(config: LMConfig):
    """A freshly initialised ``transformers`` causal LM for ``config``.

    Raises:
        ValueError: On an unknown architecture or a width not divisible by the head count.
    """
    if config.arch not in ARCHITECTURES:
        raise ValueError(f"unknown generator arch {config.arch!r}; choose one of {', '.join(ARCHITECTURES)}")
    if config.d_model % config.n_heads:
        raise ValueError(f"d_model={config.d_model} must be divisible by n_heads={config.n_heads}")
    common = {"vocab_size": config.vocab_size, "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 1}
    if config.arch == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        hf_config = GPT2Config(
            n_positions=config.context,
            n_embd=config.d_model,
            n_layer=config.n_layers,
            n_head=config.n_heads,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            **common,
        )
        return GPT2LMHeadModel(hf_config)
    if config.arch == "gpt_neox":
        from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

        hf_config = GPTNeoXConfig(
            hidden_size=config.d_model,
            intermediate_size=4 * config.d_model,
            num_hidden_layers=config.n_layers,
            num_attention_heads=config.n_heads,
            max_position_embeddings=config.context,
            rotary_pct=0.25,  # Pythia's partial rotary embedding
            use_parallel_residual=True,
            hidden_dropout=0.0,
            attention_dropout=0.0,
            tie_word_embeddings=False,  # Pythia unties the output embedding
            **common,
        )
        return GPTNeoXForCausalLM(hf_config)
    if config.arch == "qwen2":
        from transformers import Qwen2Config, Qwen2ForCausalLM

        hf_config = Qwen2Config(
            hidden_size=config.d_model,
            intermediate_size=(8 * config.d_model // 3 + 31) // 32 * 32,
            num_hidden_layers=config.n_layers,
            num_attention_heads=config.n_heads,
            num_key_value_heads=max(1, config.n_heads // 2),  # grouped-query attention, as in Qwen2
            max_position_embeddings=config.context,
            tie_word_embeddings=True,
            **common,
        )
        return Qwen2ForCausalLM(hf_config)
    from transformers import LlamaConfig, LlamaForCausalLM

    hf_config = LlamaConfig(
        hidden_size=config.d_model,
        intermediate_size=(8 * config.d_model // 3 + 31) // 32 * 32,  # the SwiGLU width rule, rounded to 32
        num_hidden_layers=config.n_layers,
        num_attention_heads=config.n_heads,
        num_key_value_heads=config.n_heads,
        max_position_embeddings=config.context,
        tie_word_embeddings=True,
        **common,
    )
    return LlamaForCausalLM(hf_config)


def _top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Set to -inf every logit outside the smallest set of tokens whose probability reaches ``top_p``."""
    if top_p >= 1.0:
        return logits
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    cumulative = sorted_logits.softmax(-1).cumsum(-1)
    drop_sorted = cumulative - sorted_logits.softmax(-1) >= top_p  # keep the token that crosses top_p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


@torch.inference_mode()
def generate(
    lm,
    prompt_ids: torch.Tensor,
    *,
    max_new_tokens: int,
    eos_id: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Continue prompts token by token with a KV cache.

    Args:
        lm: A ``transformers`` causal LM.
        prompt_ids: ``(batch, length)`` prompt token ids, left-padded when lengths differ.
        max_new_tokens: Tokens to generate at most.
        eos_id: Token that ends a continuation; later positions are filled with it.
        temperature: Sampling temperature; 0 means greedy decoding.
        top_p: Nucleus sampling mass (1.0 = off).
        generator: Random generator for reproducible samples.
        attention_mask: ``(batch, length)`` 1 for prompt tokens, 0 for left padding (None = no padding). The
            positions count real tokens only, so a padded prompt is continued as if it stood alone.

    Returns:
        ``(batch, max_new_tokens)`` generated ids.
    """
    batch = prompt_ids.shape[0]
    out = torch.full((batch, max_new_tokens), eos_id, dtype=torch.long)
    done = torch.zeros(batch, dtype=torch.bool)
    mask = torch.ones_like(prompt_ids) if attention_mask is None else attention_mask.long()
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    cache = None
    inputs = prompt_ids
    for step in range(max_new_tokens):
        result = lm(
            input_ids=inputs, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True,
            logits_to_keep=1,
        )  # fmt: skip
        cache = result.cache
        logits = result.logits[:, -1, :].float()
        if temperature <= 0:
            token = logits.argmax(-1)
        else:
            probs = _top_p_filter(logits / temperature, top_p).softmax(-1)
            token = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        token = token.masked_fill(done, eos_id)
        out[:, step] = token
        done |= token == eos_id
        if bool(done.all()):
            break
        inputs = token[:, None]
        positions = positions[:, -1:] + 1
        mask = torch.cat([mask, torch.ones(batch, 1, dtype=mask.dtype)], dim=1)
    return out


def continuations(
    lm,
    tokenizer,
    prompts: Sequence[str],
    *,
    num_samples: int = 1,
    max_new_tokens: int = 24,
    temperature: float = 1.0,
    top_p: float = 0.95,
    seed: int = 0,
    max_batch: int = 1024,
    prefix: str = "<|endoftext|>",
) -> list[list[str]]:
    """Sample ``num_samples`` continuations of each prompt (decoded text, stripped).

    Prompts are decoded together up to ``max_batch`` sequences, left-padded with an attention mask, in a
    fixed order, each batch with its own generator seeded from ``seed`` and the batch's first prompt, so
    results are reproducible for the same prompts and settings.

    Args:
        lm: A ``transformers`` causal LM (set to eval mode here).
        tokenizer: The ``tokenizers.Tokenizer`` the LM was trained with.
        prompts: Prompt texts.
        num_samples: Continuations per prompt.
        max_new_tokens: Tokens per continuation at most.
        temperature: Sampling temperature; 0 means greedy decoding.
        top_p: Nucleus sampling mass.
        seed: Base seed.
        max_batch: Largest number of sequences decoded together.
        prefix: Text put before every prompt (the separator the training corpus puts between lines).
    """
    lm.eval()
    eos_id = tokenizer.token_to_id("<|endoftext|>")
    encoded = [tokenizer.encode(prefix + p).ids for p in prompts]
    results: list[list[str]] = [[] for _ in prompts]
    order = sorted(range(len(prompts)), key=lambda i: len(encoded[i]))  # similar lengths share a batch
    per_batch = max(1, max_batch // num_samples)
    for start in range(0, len(order), per_batch):
        chunk = order[start : start + per_batch]
        width = max(len(encoded[i]) for i in chunk)
        rows = [[eos_id] * (width - len(encoded[i])) + encoded[i] for i in chunk for _ in range(num_samples)]
        masks = [[0] * (width - len(encoded[i])) + [1] * len(encoded[i]) for i in chunk for _ in range(num_samples)]
        generator = torch.Generator().manual_seed(seed * 1_000_003 + chunk[0])
        tokens = generate(
            lm, torch.tensor(rows), max_new_tokens=max_new_tokens, eos_id=eos_id, temperature=temperature,
            top_p=top_p, generator=generator, attention_mask=torch.tensor(masks),
        )  # fmt: skip
        texts = _decode(tokenizer, tokens, eos_id)
        for k, index in enumerate(chunk):
            results[index] = texts[k * num_samples : (k + 1) * num_samples]
    return results


def _decode(tokenizer, tokens: torch.Tensor, eos_id: int) -> list[str]:
    rows = []
    for row in tokens.tolist():
        row = row[: row.index(eos_id)] if eos_id in row else row
        rows.append(row)
    return [text.strip() for text in tokenizer.decode_batch(rows)]
