"""DataModules: the generators' training corpus (stage 1) and the SOCRATES-mini responses (stage 2)."""

from __future__ import annotations

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

from zoo.aporia.corpus import packed_facts, packed_wiki, training_texts


class CountryFactsDataModule(pl.LightningDataModule):
    """Blocks of the facts corpus mixed with Wikipedia blocks, and the byte-level BPE trained on both.

    The BPE (``zoo.common.text.train_bpe``) is deterministic for the same corpus, so every generator
    recipe trains the same tokenizer; the module takes it from here in ``setup`` and publishes it.

    Args:
        vocab_size: BPE vocabulary size (special tokens included).
        block_size: Tokens per training row.
        batch_size: Rows per batch.
        wiki_fraction: Probability that a row is Wikipedia text rather than facts.
        packings: How many differently ordered packings of the facts corpus to draw rows from.
        samples_per_epoch: Rows per epoch (the trainer's ``max_steps`` decides when training ends).
        val_blocks: Facts rows used for the validation loss.
        max_articles: Use only the first Wikipedia articles (None = all; the smoke test uses 2).
        paraphrases: Answer templates per attribute the facts corpus draws from (10; 5 = the first corpus).
        seed: Seed of the corpus order and of the row sampler.
    """

    def __init__(
        self,
        vocab_size: int = 2048,
        block_size: int = 64,
        batch_size: int = 32,
        wiki_fraction: float = 0.2,
        packings: int = 4,
        samples_per_epoch: int = 32_000,
        val_blocks: int = 64,
        max_articles: int | None = None,
        paraphrases: int = 10,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if not 0.0 <= wiki_fraction < 1.0:
            raise ValueError(f"wiki_fraction={wiki_fraction} must be in [0, 1): the facts are what is learned")
        self.save_hyperparameters()
        self.tokenizer = None

    def setup(self, stage: str | None = None) -> None:
        if self.tokenizer is not None:
            return
        from zoo.common.text import train_bpe

        h = self.hparams
        lines, articles = training_texts(seed=h.seed, max_articles=h.max_articles, paraphrases=h.paraphrases)
        self.tokenizer = train_bpe(lines + articles, vocab_size=h.vocab_size)
        self.facts = torch.from_numpy(packed_facts(self.tokenizer, lines, h.block_size, h.packings, seed=h.seed))
        self.wiki = torch.from_numpy(packed_wiki(self.tokenizer, articles, h.block_size))

    def train_dataloader(self) -> DataLoader:
        h = self.hparams
        rows = torch.cat([self.facts, self.wiki])
        weights = torch.cat(
            [
                torch.full((len(self.facts),), (1 - h.wiki_fraction) / len(self.facts)),
                torch.full((len(self.wiki),), h.wiki_fraction / len(self.wiki)),
            ]
        )
        generator = torch.Generator().manual_seed(h.seed)
        sampler = WeightedRandomSampler(weights, h.samples_per_epoch, replacement=True, generator=generator)
        return DataLoader(TensorDataset(rows), batch_size=h.batch_size, sampler=sampler)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(self.facts[: self.hparams.val_blocks]), batch_size=self.hparams.batch_size)


class SocratesMiniDataModule(pl.LightningDataModule):
    """SOCRATES-mini responses: per pair, the labelled draw for fitting and the held-out fold for validation.

    With ``published=True`` (the recipe) the data is the shipped SOCRATES-mini artifact of dataset seed ``seed``
    (sha256-checked against the registry pin); otherwise ``prepare_data`` builds the dataset with the published
    generators (sampling, labelling, MiniLM embeddings; minutes on 2 cores) and caches it. Each training
    "batch" is one pair's labelled responses: the class-balanced draw of ``label_budget`` labels from
    the training part of fold ``split`` (the evaluation protocol's draw 0 of that fold); each
    validation batch is the pair's held-out fold.

    Args:
        published: Use the shipped artifact (the other dataset settings are then ignored).
        generators: Registry names of the generator LMs.
        prompts_per_model: Pairs kept per generator at most.
        samples: Well-formed answers per pair.
        max_samples: Answers drawn per candidate pair to find them.
        min_per_class: Both classes need this many answers for a pair to be kept.
        probe_samples: Answers per fact in the screening probe.
        candidates_per_model: Prompts (fact, question template) probed per generator at most.
        min_near_miss_share: Least share of near-miss hallucinations for a pair to be kept (0 = every pair).
        label_budget: Labels per pair for the fit.
        splits: Folds of the protocol.
        split: The fold whose training part provides the labels (a pair whose fold ``split`` has no F1 in the
            protocol, :func:`zoo.aporia.folds.evaluable`, takes its next fold that has one; a pair with no
            such grouped fold, e.g. a single hallucinated string, takes the stratified folds).
        grouped: Answer-grouped folds, as ``zoo eval aporia`` (no held-out answer is a copy of a labelled one);
            False = stratified folds.
        draws: Label draws per fold in the protocol (to reproduce its draw 0 of fold ``split``).
        seed: Seed of the dataset and of the folds/draws.
        cache_dir: Cache root; ``"default"`` = the zoo's data cache (``zoo._paths.cache_dir("aporia")``), None = no
            cache.
    """

    def __init__(
        self,
        published: bool = True,
        generators: list[str] | None = None,
        prompts_per_model: int = 60,
        samples: int = 50,
        max_samples: int = 64,
        min_per_class: int = 6,
        probe_samples: int = 12,
        candidates_per_model: int = 8080,
        min_near_miss_share: float = 0.5,
        label_budget: int = 40,
        splits: int = 5,
        split: int = 0,
        draws: int = 2,
        seed: int = 0,
        cache_dir: str | None = "default",
        grouped: bool = True,
    ) -> None:
        super().__init__()
        if not 0 <= split < splits:
            raise ValueError(f"split={split} must be in [0, splits={splits})")
        self.save_hyperparameters()
        self.dataset = None

    def config(self):
        from zoo.aporia.dataset import DEFAULT_GENERATORS, SocratesConfig

        h = self.hparams
        return SocratesConfig(
            generators=tuple(h.generators or DEFAULT_GENERATORS),
            prompts_per_model=h.prompts_per_model,
            samples=h.samples,
            max_samples=h.max_samples,
            min_per_class=h.min_per_class,
            probe_samples=h.probe_samples,
            candidates_per_model=h.candidates_per_model,
            min_near_miss_share=h.min_near_miss_share,
            seed=h.seed,
        )

    def prepare_data(self) -> None:
        if self.hparams.cache_dir is not None and not self.hparams.published:
            from zoo.aporia.cache import socrates_mini

            socrates_mini(self.config(), cache_dir=self.hparams.cache_dir)

    def setup(self, stage: str | None = None) -> None:
        if self.dataset is not None:
            return
        from zoo.aporia.cache import socrates_mini
        from zoo.aporia.folds import answer_groups, balanced_labels, evaluable, folds_of

        h = self.hparams
        if h.published:
            from zoo.aporia.artifact import published

            self.dataset = published(h.seed)
        else:
            self.dataset = socrates_mini(self.config(), cache_dir=h.cache_dir)
        if len(self.dataset) == 0:
            raise ValueError("SOCRATES-mini has no pairs with both classes; probe more facts (candidates_per_model)")
        self.fits, self.heldout = [], []
        for index in range(len(self.dataset)):
            x, y = self.dataset.pair_arrays(index)
            y = y.astype(np.int64)
            groups = answer_groups(self.dataset.pair_responses(index)) if h.grouped else None
            folds = folds_of(y, h.splits, pair_seed(h.seed, index), groups)
            if not any(evaluable(y, *fold) for fold in folds):  # one hallucinated string, say: stratified folds
                groups, folds = None, folds_of(y, h.splits, pair_seed(h.seed, index))
            usable = [k for k, fold in enumerate(folds) if evaluable(y, *fold)]
            chosen = next((k for k in usable if k >= h.split), usable[-1])  # the protocol's fold, or the nearest
            rng = np.random.default_rng(pair_seed(h.seed, index))
            for fold in usable:  # the protocol draws labels in evaluable folds only: keep the generator in step
                train, test = folds[fold]
                if fold == chosen:
                    labelled = train[balanced_labels(y[train], [h.label_budget], rng)[0]]
                    self.fits.append({"pair": index, "x": x[labelled], "y": y[labelled]})
                    self.heldout.append({"pair": index, "x": x[test], "y": y[test], "rows": test})
                    break
                for _ in range(h.draws):
                    balanced_labels(y[train], [h.label_budget], rng)

    def pair_records(self) -> list[dict]:
        """Per pair: generator, prompt, fact and its held-out responses with labels (published with the detector)."""
        self.setup()
        records = []
        for index, held in enumerate(self.heldout):
            responses = self.dataset.pair_responses(index)
            meta = {k: v for k, v in self.dataset.pairs[index].items()}
            meta["heldout"] = [responses[i] for i in held["rows"]]
            meta["heldout_labels"] = held["y"].tolist()
            records.append(meta)
        return records

    def train_dataloader(self) -> DataLoader:
        return DataLoader(_ListDataset(self.fits), batch_size=None, shuffle=False)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(_ListDataset(self.heldout), batch_size=None, shuffle=False)


def pair_seed(seed: int, index: int) -> int:
    """Seed of pair ``index``'s folds and label draws (shared by the protocol and the datamodule)."""
    return seed * 100_003 + index


class _ListDataset(torch.utils.data.Dataset):
    def __init__(self, items: list[dict]) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> dict:
        item = self.items[index]
        return {k: (torch.from_numpy(np.asarray(v)) if k in ("x", "y") else v) for k, v in item.items() if k != "rows"}
