"""ArithmeticTraceDataModule: generated reasoning traces with SpecExit's signal labels and probe examples."""

from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from zoo.specexit.grammar import make_trace
from zoo.specexit.tokenizer import TraceTokenizer
from zoo.specexit.traces import Problem, Trace, build_trace, sample_problems

#: Seeds of the problem splits. The test problems exclude every training and validation expression.
TRAIN_SEED, VAL_SEED, TEST_SEED = 0, 1, 2


@dataclass(frozen=True)
class Splits:
    """Disjoint problem splits.

    Args:
        train: Training problems.
        val: Validation problems (threshold and alpha checks).
        test: Held-out problems (``zoo eval``).
    """

    train: list[Problem]
    val: list[Problem]
    test: list[Problem]


def make_splits(n_train: int, n_val: int, n_test: int, seed: int = 0, **problem_kwargs) -> Splits:
    """Deterministic, disjoint train/val/test problems.

    Args:
        n_train: Training problems.
        n_val: Validation problems.
        n_test: Test problems.
        seed: Offset added to the split seeds.
        **problem_kwargs: Passed to :func:`~zoo.specexit.traces.sample_problem` (operand counts, max value).
    """
    train = sample_problems(n_train, TRAIN_SEED + 1000 * seed, **problem_kwargs)
    seen = {p.expression for p in train}
    val = sample_problems(n_val, VAL_SEED + 1000 * seed, exclude=seen, **problem_kwargs)
    seen |= {p.expression for p in val}
    test = sample_problems(n_test, TEST_SEED + 1000 * seed, exclude=seen, **problem_kwargs)
    return Splits(train, val, test)


@functools.cache
def _train_expressions() -> frozenset[str]:
    """The training problems of the recipes (the datamodule's defaults)."""
    return frozenset(p.expression for p in make_splits(20000, 256, 0).train)


def validation_problems(n: int = 100, operands: tuple[int, int] = (3, 6)) -> list[Problem]:
    """Validation problems (disjoint from training and test); the exit calibration's only data."""
    return sample_problems(n, VAL_SEED, _train_expressions(), min_operands=operands[0], max_operands=operands[1])


def test_problems(n: int = 100, operands: tuple[int, int] = (3, 6)) -> list[Problem]:
    """Held-out problems (``zoo eval``), disjoint from training and from the first 1000 validation problems of the
    same lengths."""
    seen = _train_expressions() | {p.expression for p in validation_problems(1000, operands)}
    return sample_problems(n, TEST_SEED, seen, min_operands=operands[0], max_operands=operands[1])


def check_mistakes(grammar: str, p_wrong: float) -> None:
    """Refuse injected mistakes in a grammar that has none (only ``checks`` writes ``Wait,`` corrections)."""
    if grammar != "checks" and p_wrong > 0:
        raise ValueError(f"the {grammar!r} grammar has no injected mistakes; set p_wrong=0 (got {p_wrong})")


class TraceDataset(Dataset):
    """Tokenised traces with signal labels and one probe example each.

    The probe example branches off the trace at a random step delimiter ``b`` inside the thinking block,
    appends ``</think>Answer:`` and is labelled ``b >= L*`` (forcing the answer there gives the right one).

    Args:
        problems: The problems.
        tokenizer: The trace tokenizer.
        p_wrong: Probability of an injected (and corrected) wrong step.
        seed: Seed of the injected mistakes and of the probe boundaries.
        p_all_checks: Probability that a trace writes all its checks (else a uniform 0..all-1 of them); 1 writes all.
        grammar: The trace grammar (``checks``: :func:`~zoo.specexit.traces.build_trace`; ``unmarked``:
            :func:`~zoo.specexit.grammar.build_unmarked_trace`, which has no injected mistakes); ``None``: the
            tokenizer's.
    """

    def __init__(
        self,
        problems: list[Problem],
        tokenizer: TraceTokenizer,
        p_wrong: float,
        seed: int,
        p_all_checks: float = 1.0,
        grammar: str | None = None,
    ) -> None:
        rng = random.Random(seed)
        self.tokenizer = tokenizer
        grammar = grammar or tokenizer.grammar
        check_mistakes(grammar, p_wrong)
        if grammar == "checks":
            self.traces: list[Trace] = [build_trace(p, tokenizer, rng, p_wrong, p_all_checks) for p in problems]
        else:
            self.traces = [make_trace(p, tokenizer, grammar, rng=rng, p_all_checks=p_all_checks) for p in problems]
        self.probe_boundary = [rng.choice(t.delimiter_pos) for t in self.traces]
        self.suffix = [tokenizer.end_think_id, tokenizer.ids["Answer:"]]

    def __len__(self) -> int:
        return len(self.traces)

    def __getitem__(self, index: int) -> dict:
        trace = self.traces[index]
        boundary = self.probe_boundary[index]
        return {
            "ids": trace.ids,
            "prompt_len": trace.prompt_len,
            "noise_pos": trace.noise_pos,
            "labels": trace.signal_labels(),
            "probe_ids": trace.ids[: boundary + 1] + self.suffix,
            "probe_label": float(boundary >= trace.lstar_pos),
        }


def collate(items: list[dict], pad_id: int = 0) -> dict[str, torch.Tensor]:
    """Right-pad a list of :class:`TraceDataset` items into a batch.

    Returns:
        ``input_ids`` (B, T); ``loss_mask`` (B, T), 1 on completion tokens except injected wrong digits;
        ``signal_mask``, ``confidence``, ``progress``, ``remain`` (B, T); ``probe_ids`` (B, Tp),
        ``probe_last`` (B,), ``probe_label`` (B,).
    """
    length = max(len(item["ids"]) for item in items)
    batch = len(items)
    ids = torch.full((batch, length), pad_id, dtype=torch.long)
    loss_mask = torch.zeros(batch, length)
    labels = {key: torch.zeros(batch, length) for key in ("mask", "confidence", "progress", "remain")}
    probe_length = max(len(item["probe_ids"]) for item in items)
    probe_ids = torch.full((batch, probe_length), pad_id, dtype=torch.long)
    for row, item in enumerate(items):
        n = len(item["ids"])
        ids[row, :n] = torch.tensor(item["ids"])
        loss_mask[row, item["prompt_len"] : n] = 1.0
        loss_mask[row, item.get("noise_pos", [])] = 0.0  # injected wrong digits are context, not targets
        for key in labels:
            labels[key][row, :n] = torch.from_numpy(np.asarray(item["labels"][key]))
        probe_ids[row, : len(item["probe_ids"])] = torch.tensor(item["probe_ids"])
    return {
        "input_ids": ids,
        "loss_mask": loss_mask,
        "signal_mask": labels["mask"],
        "confidence": labels["confidence"],
        "progress": labels["progress"],
        "remain": labels["remain"],
        "probe_ids": probe_ids,
        "probe_last": torch.tensor([len(item["probe_ids"]) - 1 for item in items]),
        "probe_label": torch.tensor([item["probe_label"] for item in items]),
    }


class LengthBucketSampler(Sampler[list[int]]):
    """Batches of similar-length traces (less padding), in random order; a new shuffle every epoch.

    Args:
        lengths: Length of every item.
        batch_size: Items per batch.
        seed: Base seed of the shuffles.
        pool: Batches per sorting pool (larger: less padding, less randomness).
    """

    def __init__(self, lengths: list[int], batch_size: int, seed: int = 0, pool: int = 50) -> None:
        self.lengths, self.batch_size, self.seed, self.pool = lengths, batch_size, seed, pool
        self.epoch = 0

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)

    def __iter__(self):
        rng = random.Random(self.seed + self.epoch)
        self.epoch += 1
        order = list(range(len(self.lengths)))
        rng.shuffle(order)
        size = self.batch_size * self.pool
        batches = []
        for start in range(0, len(order), size):
            chunk = sorted(order[start : start + size], key=self.lengths.__getitem__)
            batches += [chunk[i : i + self.batch_size] for i in range(0, len(chunk), self.batch_size)]
        rng.shuffle(batches)
        return iter(batches)


class CurriculumSampler(Sampler[list[int]]):
    """Batches of one operand count each; the largest count allowed grows over the first ``curriculum_steps`` batches.

    Batch ``b`` of the run (counted across epochs) draws a count among the traces with at most
    ``lo + (hi - lo + 1) * b / curriculum_steps`` operands (in proportion to how many there are), then
    ``batch_size`` random traces of that count (similar lengths, little padding). After the curriculum every
    count is allowed. An epoch is ``ceil(n / batch_size)`` batches.

    Args:
        counts: Operand count of every item.
        batch_size: Items per batch.
        curriculum_steps: Batches until every count is allowed (0: no curriculum).
        seed: Seed of the draws.
    """

    def __init__(self, counts: list[int], batch_size: int, curriculum_steps: int = 0, seed: int = 0) -> None:
        self.counts, self.batch_size, self.curriculum_steps = counts, batch_size, curriculum_steps
        self.rng = random.Random(seed)
        self.by_count: dict[int, list[int]] = {}
        for index, count in enumerate(counts):
            self.by_count.setdefault(count, []).append(index)
        self.lo, self.hi = min(self.by_count), max(self.by_count)
        self.batches_done = 0

    def __len__(self) -> int:
        return math.ceil(len(self.counts) / self.batch_size)

    def allowed(self, batch: int) -> int:
        """The largest operand count batch ``batch`` may draw."""
        if self.curriculum_steps <= 0 or batch >= self.curriculum_steps:
            return self.hi
        return min(self.hi, self.lo + int((self.hi - self.lo + 1) * batch / self.curriculum_steps))

    def __iter__(self):
        for _ in range(len(self)):
            top = self.allowed(self.batches_done)
            pools = [pool for count, pool in sorted(self.by_count.items()) if count <= top]
            pool = self.rng.choices(pools, weights=[len(p) for p in pools])[0]
            self.batches_done += 1
            yield self.rng.sample(pool, min(self.batch_size, len(pool)))


class ArithmeticTraceDataModule(pl.LightningDataModule):
    """Generated arithmetic reasoning traces (see :mod:`zoo.specexit.traces`), split into train/val/test.

    Args:
        n_train: Training traces.
        n_val: Validation traces.
        n_test: Test traces (the held-out problems ``zoo eval`` decodes).
        batch_size: Batch size.
        p_wrong: Probability that a step line is written wrong first and then corrected (0: none; see
            :mod:`zoo.specexit.traces` for why the recipes keep it at 0 under position coupling).
        p_all_checks: Probability that a training/validation trace writes all its checks; otherwise it writes a
            uniform 0..all-1 of them, so that ``</think>`` after any check is in distribution for the target.
        min_operands: Fewest operands per problem.
        max_operands: Most operands per problem.
        max_value: Largest operand.
        max_running: Largest running value.
        curriculum_steps: Training batches over which the largest operand count grows from ``min_operands`` to
            ``max_operands`` (0: every count from the start).
        seed: Seed of the problems and the injected mistakes.
        grammar: The trace grammar: ``checks`` (the published recipes': bare answer line, then ``Check:`` lines) or
            ``unmarked`` (issue 62, :mod:`zoo.specexit.grammar`: no surface marker at the exit point). The module's
            ``grammar`` must match (it decides the position ids).
    """

    def __init__(
        self,
        n_train: int = 20000,
        n_val: int = 256,
        n_test: int = 200,
        batch_size: int = 64,
        p_wrong: float = 0.0,
        p_all_checks: float = 0.5,
        min_operands: int = 2,
        max_operands: int = 6,
        max_value: int = 9,
        max_running: int = 49,
        curriculum_steps: int = 0,
        seed: int = 0,
        grammar: str = "checks",
    ) -> None:
        super().__init__()
        if min_operands < 2 or max_operands < min_operands:
            raise ValueError(f"need 2 <= min_operands <= max_operands, got {min_operands} and {max_operands}")
        if not 0.0 <= p_wrong < 1.0:
            raise ValueError(f"p_wrong is a probability in [0, 1), got {p_wrong}")
        if not 0.0 <= p_all_checks <= 1.0:
            raise ValueError(f"p_all_checks is a probability in [0, 1], got {p_all_checks}")
        self.tokenizer = TraceTokenizer(grammar=grammar)  # refuses an unknown grammar
        check_mistakes(grammar, p_wrong)
        self.save_hyperparameters()
        self.datasets: dict[str, TraceDataset] = {}

    def setup(self, stage: str | None = None) -> None:
        if self.datasets:
            return
        h = self.hparams
        splits = make_splits(
            h.n_train, h.n_val, h.n_test, h.seed,
            min_operands=h.min_operands, max_operands=h.max_operands, max_value=h.max_value,
            max_running=h.max_running,
        )  # fmt: skip
        self.splits = splits
        self.datasets = {
            "train": TraceDataset(splits.train, self.tokenizer, h.p_wrong, h.seed, h.p_all_checks),
            "val": TraceDataset(splits.val, self.tokenizer, h.p_wrong, h.seed + 1, h.p_all_checks),
            "test": TraceDataset(splits.test, self.tokenizer, 0.0, h.seed + 2),
        }

    def _loader(self, split: str) -> DataLoader:
        return DataLoader(self.datasets[split], batch_size=self.hparams.batch_size, collate_fn=collate)

    def train_dataloader(self) -> DataLoader:
        dataset, h = self.datasets["train"], self.hparams
        counts = [len(t.problem.operands) for t in dataset.traces]
        sampler = CurriculumSampler(counts, h.batch_size, h.curriculum_steps, seed=h.seed)
        return DataLoader(dataset, batch_sampler=sampler, collate_fn=collate)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._loader("test")
