"""The Usage snippet of the GEMQ cards: rendered by ``zoo card``, run as written by ``tests/test_usage.py``.

It ends with ``prediction: P | truth: T | tolerance: E``: the perplexity of held-out text against the card's.
"""

from string import Template

SNIPPET = Template("""
import torch
import zoo
from zoo.gemq.data import $corpus

model = zoo.load("$name", pretrained=True)
tokenizer = model.tokenizer()  # the byte-level BPE shipped as tokenizer.json
ids = $corpus().test[:2048]  # token ids of held-out Wikipedia articles (the card's test split)
with torch.no_grad():
    logits = model(ids[None, :64])  # next-token logits [1, 64, vocab]
guess, truth = tokenizer.decode([int(logits[0, -1].argmax())]), tokenizer.decode([int(ids[64])])
print(f"...{tokenizer.decode(ids[:64].tolist())[-40:]!r} -> next token {guess!r} (truth {truth!r})")
ppl = model.perplexity(tokenizer.decode(ids.tolist()))  # 128-token windows, as the card measures
card = zoo.get_entry("$name").metrics["ppl"]  # the card's held-out perplexity
print(f"prediction: {ppl:.1f} | truth: {card:.1f} | tolerance: {0.1 * card:.1f}")
""")


def snippet(name: str) -> str:
    """The snippet for the entry ``name`` (the split-v2 bases ``gemq.wiki2_*`` read split v2's test articles)."""
    corpus = "wiki_splits" if name.split(".", 1)[-1].startswith("wiki2_") else "wiki_corpus"
    return SNIPPET.substitute(name=name, corpus=corpus)
