"""Text corpora that ship inside PyPI packages, and a byte-level BPE trained by our code.

* :func:`wikipedia_articles`: the ~100 English Wikipedia articles (about 3.1 M characters) in
  gensim's test data, with the wiki markup stripped by gensim's own ``filter_wiki``.
* :func:`lee_corpus`: the Lee background corpus (300 news documents) from gensim's test data,
  handy as an out-of-domain set.
* :func:`train_bpe` / :func:`load_bpe`: a byte-level BPE (Hugging Face ``tokenizers``) trained on
  any texts; it serialises to the ``tokenizer.json`` that Hub repos carry.

Needs the ``nlp`` (or ``sketch``) extra: ``pip install 'icml26-zoo[nlp]'``.
"""

from __future__ import annotations

import bz2
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from zoo._errors import MissingExtraError

WIKI_DUMP = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
SPECIAL_TOKENS = ("<|endoftext|>", "<|pad|>")


@dataclass(frozen=True)
class Article:
    """A Wikipedia article: its title and plain text."""

    title: str
    text: str


def _gensim_datapath(name: str) -> str:
    try:
        from gensim.test.utils import datapath
    except ImportError:
        raise MissingExtraError("this corpus ships with gensim: pip install 'icml26-zoo[nlp]'") from None
    return datapath(name)


def _clean_wiki(text: str) -> str:
    text = re.sub(r"'{2,}", "", text)  # bold / italic quotes that filter_wiki keeps
    text = re.sub(r"^=+\s*(.*?)\s*=+\s*$", r"\1", text, flags=re.M)  # headings -> plain lines
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r"\n\s*\n+", "\n\n", text)
    return text.strip()


@lru_cache(maxsize=4)
def wikipedia_articles(min_chars: int = 500) -> tuple[Article, ...]:
    """The English Wikipedia articles of gensim's test data, markup stripped, in dump order.

    Args:
        min_chars: Drop articles shorter than this (redirects and stubs).
    """
    from gensim.corpora.wikicorpus import extract_pages, filter_wiki

    articles = []
    with bz2.open(_gensim_datapath(WIKI_DUMP)) as dump:
        for title, markup, _page_id in extract_pages(dump, filter_namespaces=("0",)):
            text = _clean_wiki(filter_wiki(markup))
            if len(text) >= min_chars:
                articles.append(Article(title=title, text=text))
    return tuple(articles)


@lru_cache(maxsize=1)
def lee_corpus() -> tuple[str, ...]:
    """The 300 documents of the Lee background corpus (gensim test data), one string each."""
    with open(_gensim_datapath("lee_background.cor"), encoding="utf-8") as handle:
        return tuple(line.strip() for line in handle if line.strip())


def train_bpe(texts: Iterable[str], vocab_size: int = 4096, min_frequency: int = 2):
    """Train a byte-level BPE on ``texts``; deterministic for the same texts and settings.

    Args:
        texts: Training texts.
        vocab_size: Size of the vocabulary, the 256 byte tokens and the special tokens included.
        min_frequency: Minimum count of a pair to be merged.

    Returns:
        A ``tokenizers.Tokenizer``; its special tokens are :data:`SPECIAL_TOKENS`.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def load_bpe(serialised: str):
    """Rebuild a tokenizer from its ``tokenizer.json`` text (``Tokenizer.to_str()``)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_str(serialised)


def encode_texts(tokenizer, texts: Sequence[str], separator: str = SPECIAL_TOKENS[0]) -> list[int]:
    """Token ids of ``texts`` concatenated, each followed by the separator token (batched encode)."""
    separator_id = tokenizer.token_to_id(separator)
    ids: list[int] = []
    for encoding in tokenizer.encode_batch(list(texts)):
        ids.extend(encoding.ids)
        ids.append(separator_id)
    return ids
