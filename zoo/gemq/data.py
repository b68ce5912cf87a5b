"""Wikipedia text from gensim's test data, tokenized with our byte-level BPE, as LM batches and calibration sets.

Two splits of the 105 articles (by index in dump order):

* ``split="v1"`` (the published ``gemq.wiki_*`` checkpoints): 90% train / 10% held out (article ``i`` with
  ``i % 10 == 9``); calibration windows are drawn from the *train* stream (the text the fp model was trained on).
* ``split="v2"`` (issue 32, :func:`wiki_splits`): five disjoint slices, by article and by corpus:

  ====================  ===========================  ===================================================
  slice                 articles                     use
  ====================  ===========================  ===================================================
  ``train``             ``i % 10`` in 0-2, 4-6, 8    pretraining of the fp base; the BPE is trained on it
  ``calibration``       ``i % 10 == 7``              GEMQ's importance, GPTQ Hessians, router fine-tuning
  ``validation``        ``i % 10 == 3``              early stopping (base and routers), every grid
  ``test``              ``i % 10 == 9``              held-out perplexity (the same articles as v1's test)
  ``lee``               Lee background corpus        out-of-domain perplexity (news; never trained on)
  ====================  ===========================  ===================================================

  Token counts (v2 BPE, vocab 4096, articles joined by ``<|endoftext|>``): train 670,749; calibration 115,107
  (899 windows of 128); validation 53,032 (414 windows); test 68,911 (538); Lee 106,957 (835). A calibration set
  of ``size`` sequences is a seeded subset of the calibration slice's non-overlapping 128-token windows
  (:func:`calibration_windows`): 640 sequences = 81,920 tokens, 10x v1's 64 x 128 = 8,192 (each token used once;
  seeds 0 and 1 share 460 of their 640 windows).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from zoo._paths import cache_dir

HOLDOUT_EVERY = 10  # every 10th article (in dump order) is held out: 10% of the articles
# split v2: the slice of article i is V2_SLICES.get(i % 10, "train")
V2_SLICES = {9: "test", 7: "calibration", 3: "validation"}


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
    path = cache_dir("gemq", create=False) / f"wiki-{key}.safetensors"
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


@dataclass(frozen=True)
class WikiSplits:
    """The five disjoint token streams of split v2 (see the module docstring) and the BPE trained on ``train``."""

    tokenizer_json: str
    train: torch.Tensor
    calibration: torch.Tensor
    validation: torch.Tensor
    test: torch.Tensor
    lee: torch.Tensor

    SLICES = ("train", "calibration", "validation", "test", "lee")


def v2_slice(index: int) -> str:
    """The v2 slice of the article at ``index`` (dump order)."""
    return V2_SLICES.get(index % HOLDOUT_EVERY, "train")


def build_wiki_splits(vocab_size: int = 4096) -> WikiSplits:
    """Train the BPE on the v2 train articles and tokenize every slice."""
    from zoo.common.text import encode_texts, lee_corpus, train_bpe, wikipedia_articles

    texts: dict[str, list[str]] = {name: [] for name in ("train", "calibration", "validation", "test")}
    for i, article in enumerate(wikipedia_articles()):
        texts[v2_slice(i)].append(article.text)
    tokenizer = train_bpe(texts["train"], vocab_size=vocab_size)

    def ids(items):
        return torch.tensor(encode_texts(tokenizer, items), dtype=torch.long)

    return WikiSplits(tokenizer.to_str(), **{k: ids(v) for k, v in texts.items()}, lee=ids(lee_corpus()))


@lru_cache(maxsize=2)
def wiki_splits(vocab_size: int = 4096) -> WikiSplits:
    """Split v2, from the on-disk cache when present (as :func:`wiki_corpus`), else built and cached."""
    from safetensors.torch import load_file, safe_open, save_file

    from zoo.common.text import WIKI_DUMP

    source = _gensim_test_file(WIKI_DUMP)
    key = hashlib.sha256(f"v2|{CACHE_VERSION}|{vocab_size}|{source.stat().st_size}|{source.name}".encode())
    path = cache_dir("gemq", create=False) / f"wiki-v2-{key.hexdigest()[:16]}.safetensors"
    if path.is_file():
        try:
            tensors = load_file(str(path))
            with safe_open(str(path), framework="pt") as handle:
                tokenizer_json = handle.metadata()["tokenizer_json"]
            return WikiSplits(tokenizer_json, **{name: tensors[name] for name in WikiSplits.SLICES})
        except Exception:  # a truncated or foreign file: rebuild it
            pass
    splits = build_wiki_splits(vocab_size)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        save_file(
            {name: getattr(splits, name) for name in WikiSplits.SLICES},
            str(partial),
            metadata={"tokenizer_json": splits.tokenizer_json},
        )
        partial.replace(path)
    except OSError:
        pass
    return splits


def calibration_windows(ids: torch.Tensor, size: int, seq_len: int, seed: int) -> torch.Tensor:
    """A seeded subset of ``size`` non-overlapping ``seq_len`` windows of a stream (each token used at most once).

    Raises:
        ValueError: ``size`` is not positive or exceeds the windows the stream holds.
    """
    windows = chunk(ids, seq_len)
    if not 1 <= size <= len(windows):
        raise ValueError(f"calibration size must be in [1, {len(windows)}] (windows of {seq_len} tokens), got {size}")
    order = torch.randperm(len(windows), generator=torch.Generator().manual_seed(seed))
    return windows[order[:size].sort().values]


def offset_chunk(ids: torch.Tensor, seq_len: int, offset: int, limit: int | None = None) -> torch.Tensor:
    """:func:`chunk` of the stream shifted by ``offset`` tokens (a fresh window grid each epoch)."""
    return chunk(ids[offset % seq_len :], seq_len, limit)


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
        split: ``"v1"`` (the published checkpoints: 90/10 articles, calibration from the train stream) or
            ``"v2"`` (disjoint train / calibration / validation / test / Lee slices, see the module docstring;
            validation batches come from the validation slice, calibration from the calibration slice).
        random_offset: Shift the train windows by a random offset each epoch (needs the trainer's
            ``reload_dataloaders_every_n_epochs: 1``); epoch 0 starts at offset 0, later offsets come from the global
            torch RNG (seeded by ``seed_everything``).
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
        split: str = "v1",
        random_offset: bool = False,
    ) -> None:
        super().__init__()
        if stage not in ("pretrain", "calibration"):
            raise ValueError(f"stage must be 'pretrain' or 'calibration', got {stage!r}")
        if split not in ("v1", "v2"):
            raise ValueError(f"split must be 'v1' or 'v2', got {split!r}")
        self.save_hyperparameters()
        self._epochs_served = 0

    def setup(self, stage: str | None = None) -> None:
        h = self.hparams
        if h.split == "v2":
            splits = wiki_splits(h.vocab_size)
            self.corpus = splits
            self.tokenizer_json = splits.tokenizer_json
            self.train_sequences = chunk(splits.train, h.seq_len, h.train_limit)
            self.validation_sequences = chunk(splits.validation, h.seq_len)
            self.test_sequences = chunk(splits.test, h.seq_len)
            self.calibration = calibration_windows(splits.calibration, h.calib_size, h.seq_len, h.calib_seed)
            return
        self.corpus = wiki_corpus(h.vocab_size)
        self.tokenizer_json = self.corpus.tokenizer_json
        self.train_sequences = chunk(self.corpus.train, h.seq_len, h.train_limit)
        self.test_sequences = chunk(self.corpus.test, h.seq_len)
        self.validation_sequences = self.test_sequences  # v1 validated on the first held-out sequences
        self.calibration = calibration_set(self.corpus.train, h.calib_size, h.seq_len, h.calib_seed)

    def train_dataloader(self) -> DataLoader:
        h = self.hparams
        data = self.train_sequences if h.stage == "pretrain" else self.calibration
        if h.random_offset and h.stage == "pretrain":
            offset = int(torch.randint(0, h.seq_len, (1,))) if self._epochs_served else 0  # global RNG: seeded
            data = offset_chunk(self.corpus.train, h.seq_len, offset, h.train_limit)
        self._epochs_served += 1
        return DataLoader(TensorDataset(data), batch_size=self.hparams.batch_size, shuffle=True, drop_last=False)

    def val_dataloader(self) -> DataLoader:
        limit = self.hparams.val_sequences
        data = self.validation_sequences if limit is None else self.validation_sequences[:limit]
        return DataLoader(TensorDataset(data), batch_size=32)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(self.test_sequences), batch_size=32)
