"""The generators' training corpus: country facts mixed with Wikipedia text, tokenised and packed into blocks."""

from __future__ import annotations

import random

import numpy as np

from zoo.aporia.facts import country_facts, fact_lines

EOT = "<|endoftext|>"


def training_texts(
    seed: int = 0, max_articles: int | None = None, paraphrases: int = 10
) -> tuple[list[str], list[str]]:
    """The facts corpus lines and the Wikipedia article texts (the BPE is trained on both).

    Args:
        seed: Seed of the facts corpus (answer-template shuffle and line order).
        max_articles: Use only the first articles of the dump (None = all, about 100).
        paraphrases: Answer templates per attribute the corpus draws from (:func:`zoo.aporia.facts.fact_lines`).
    """
    from zoo.common.text import wikipedia_articles

    articles = [article.text for article in wikipedia_articles()][:max_articles]
    return fact_lines(country_facts(), seed=seed, paraphrases=paraphrases), articles


def pack(token_ids: list[int], block_size: int) -> np.ndarray:
    """Cut a token stream into ``(n_blocks, block_size)`` rows, dropping the ragged tail."""
    n_blocks = len(token_ids) // block_size
    return np.asarray(token_ids[: n_blocks * block_size], dtype=np.int64).reshape(n_blocks, block_size)


def packed_facts(tokenizer, lines: list[str], block_size: int, packings: int, seed: int = 0) -> np.ndarray:
    """Facts lines packed into blocks, ``packings`` times with a different line order each.

    Re-packing varies which facts share a block, so a fact is not always seen after the same context.
    Every line is preceded by the separator token, as prompts are at generation time.
    """
    encoded = _encode_lines(tokenizer, lines)
    rng = random.Random(seed)
    blocks = []
    for _ in range(packings):
        order = list(range(len(encoded)))
        rng.shuffle(order)
        stream: list[int] = []
        for i in order:
            stream.extend(encoded[i])
        blocks.append(pack(stream, block_size))
    return np.concatenate(blocks)


def _encode_lines(tokenizer, lines: list[str]) -> list[list[int]]:
    eot = tokenizer.token_to_id(EOT)
    return [[eot, *encoding.ids] for encoding in tokenizer.encode_batch(lines)]


def packed_wiki(tokenizer, texts: list[str], block_size: int) -> np.ndarray:
    """Wikipedia articles, each preceded by the separator token, packed into blocks."""
    stream: list[int] = []
    for ids in _encode_lines(tokenizer, texts):
        stream.extend(ids)
    return pack(stream, block_size)
