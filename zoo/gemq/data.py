"""Wikipedia text from gensim's test data, tokenized with our byte-level BPE, as LM batches and calibration sets."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

HOLDOUT_EVERY = 10  # every 10th article (in dump order) is held out: 10% of the articles


@dataclass(frozen=True)
class WikiCorpus:
    """Token streams of the train and held-out articles, and the tokenizer trained on the train articles.

    Args:
        tokenizer_json: The BPE as ``tokenizer.json`` text.
        train: Train token ids (articles separated by ``<|endoftext|>``).
        test: Held-out token ids.
        lee: Lee background corpus token ids (out of domain).
    """

    tokenizer_json: str
    train: torch.Tensor
    test: torch.Tensor
    lee: torch.Tensor


CACHE_VERSION = "1"


def cache_dir() -> Path:
    """Where tokenized corpora are cached: ``$ZOO_CACHE_DIR`` or ``~/.cache/zoo``."""
    return Path(os.environ.get("ZOO_CACHE_DIR") or Path.home() / ".cache" / "zoo")


def _gensim_test_file(name: str) -> Path:
    """Path of a gensim test-data file, found without importing gensim (slow to import)."""
    import importlib.util

    from zoo._errors import MissingExtraError

    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError("this corpus ships with gensim: pip install 'icml26-zoo[nlp]'")
    return Path(list(spec.submodule_search_locations)[0]) / "test" / "test_data" / name


@lru_cache(maxsize=2)
def wiki_corpus(vocab_size: int = 4096) -> WikiCorpus:
    """The tokenized corpus, from the on-disk cache when present (safetensors; keyed by the gensim data file,
    the vocabulary size and this code's cache version), else built by :func:`build_wiki_corpus` and cached."""
    from safetensors.torch import load_file, safe_open, save_file

    from zoo.common.text import WIKI_DUMP

    source = _gensim_test_file(WIKI_DUMP)
    key = hashlib.sha256(f"{CACHE_VERSION}|{vocab_size}|{source.stat().st_size}|{source.name}".encode()).hexdigest()[
        :16
    ]
    path = cache_dir() / f"gemq-wiki-{key}.safetensors"
    if path.is_file():
        try:
            tensors = load_file(str(path))
            with safe_open(str(path), framework="pt") as handle:
                tokenizer_json = handle.metadata()["tokenizer_json"]
            return WikiCorpus(tokenizer_json, tensors["train"], tensors["test"], tensors["lee"])
        except Exception:  # a truncated or foreign file: rebuild it
            pass
    corpus = build_wiki_corpus(vocab_size)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        save_file(
            {"train": corpus.train, "test": corpus.test, "lee": corpus.lee},
            str(partial),
            metadata={"tokenizer_json": corpus.tokenizer_json},
        )
        partial.replace(path)
    except OSError:  # read-only home: work without the cache
        pass
    return corpus


def build_wiki_corpus(vocab_size: int = 4096) -> WikiCorpus:
    """Train the BPE on the train articles and tokenize the train, held-out and Lee texts."""
    from zoo.common.text import encode_texts, lee_corpus, train_bpe, wikipedia_articles

    articles = [a.text for a in wikipedia_articles()]
    train_texts = [t for i, t in enumerate(articles) if i % HOLDOUT_EVERY != HOLDOUT_EVERY - 1]
    test_texts = [t for i, t in enumerate(articles) if i % HOLDOUT_EVERY == HOLDOUT_EVERY - 1]
    tokenizer = train_bpe(train_texts, vocab_size=vocab_size)

    def ids(texts):
        return torch.tensor(encode_texts(tokenizer, texts), dtype=torch.long)

    return WikiCorpus(tokenizer.to_str(), ids(train_texts), ids(test_texts), ids(lee_corpus()))


def chunk(ids: torch.Tensor, seq_len: int, limit: int | None = None) -> torch.Tensor:
    """Non-overlapping ``[N, seq_len]`` windows of a token stream (the remainder is dropped)."""
    n = ids.numel() // seq_len
    n = n if limit is None else min(n, limit)
    return ids[: n * seq_len].view(n, seq_len)


def calibration_set(ids: torch.Tensor, size: int, seq_len: int, seed: int) -> torch.Tensor:
    """``size`` random ``seq_len`` windows of the train stream; the seed picks the subset."""
    if size < 1:
        raise ValueError(f"calibration size must be positive, got {size}")
    generator = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, ids.numel() - seq_len, (size,), generator=generator)
    return torch.stack([ids[s : s + seq_len] for s in starts.tolist()])


class WikiLMDataModule(pl.LightningDataModule):
    """LM batches of the gensim Wikipedia articles (90% train / 10% held out, by article).

    Args:
        vocab_size: BPE vocabulary.
        seq_len: Tokens per sequence.
        batch_size: Sequences per training batch.
        stage: ``"pretrain"`` (train batches over the train split) or ``"calibration"`` (train batches over the
            calibration set only, for GEMQ's router fine-tuning).
        calib_size: Calibration sequences.
        calib_seed: Seed that picks the calibration subset.
        val_sequences: Held-out sequences used for validation during training (the first ones; None: all).
        train_limit: Use only the first ``train_limit`` training sequences (smoke tests).
    """

    def __init__(
        self,
        vocab_size: int = 4096,
        seq_len: int = 128,
        batch_size: int = 16,
        stage: str = "pretrain",
        calib_size: int = 64,
        calib_seed: int = 0,
        val_sequences: int | None = 128,
        train_limit: int | None = None,
    ) -> None:
        super().__init__()
        if stage not in ("pretrain", "calibration"):
            raise ValueError(f"stage must be 'pretrain' or 'calibration', got {stage!r}")
        self.save_hyperparameters()

    def setup(self, stage: str | None = None) -> None:
        h = self.hparams
        self.corpus = wiki_corpus(h.vocab_size)
        self.tokenizer_json = self.corpus.tokenizer_json
        self.train_sequences = chunk(self.corpus.train, h.seq_len, h.train_limit)
        self.test_sequences = chunk(self.corpus.test, h.seq_len)
        self.calibration = calibration_set(self.corpus.train, h.calib_size, h.seq_len, h.calib_seed)

    def train_dataloader(self) -> DataLoader:
        data = self.train_sequences if self.hparams.stage == "pretrain" else self.calibration
        return DataLoader(TensorDataset(data), batch_size=self.hparams.batch_size, shuffle=True, drop_last=False)

    def val_dataloader(self) -> DataLoader:
        limit = self.hparams.val_sequences
        data = self.test_sequences if limit is None else self.test_sequences[:limit]
        return DataLoader(TensorDataset(data), batch_size=32)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(self.test_sequences), batch_size=32)
