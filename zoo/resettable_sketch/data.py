"""``ResettableStreamDataModule``: resettable update streams as chunks, with the exact statistics alongside.

Kinds (see :mod:`zoo.resettable_sketch.streams`): ``"churn"``, ``"bursty"``, ``"words"`` (gensim's
Wikipedia test data with unlearning resets) and ``"adversarial"``. A chunk is a dict of tensors ``ops``,
``keys``, ``deltas`` plus, for every statistic, the exact value at the chunk's end (``truth_card``,
``truth_sum``, ``truth_lp``) and its prefix maximum over every update so far (``peak_*``). The adversarial
stream needs feedback, so its chunks hold only fresh ``probe_keys``; the module plays them against itself
through :attr:`ResettableStreamDataModule.adversary`, which also keeps the true count (and is saved in
Lightning checkpoints through ``state_dict``).
"""

from __future__ import annotations

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader

from zoo.resettable_sketch.sketches import ExactSketch
from zoo.resettable_sketch.streams import Adversary, bursty_stream, churn_stream, word_stream

KINDS = ("churn", "bursty", "words", "adversarial")


def make_stream(kind: str, length: int | None, seed: int, unlearn_prob: float = 0.5):
    """``(ops, keys, deltas)`` of a procedural or word stream, truncated to ``length`` updates if given."""
    if kind == "churn":
        stream = churn_stream(length or 100_000, seed=seed)
    elif kind == "bursty":
        stream = bursty_stream(seed=seed)
    elif kind == "words":
        stream = word_stream(seed=seed, unlearn_prob=unlearn_prob)
    else:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return tuple(part[:length] for part in stream) if length else stream


def _chunk_list(lst, size):
    return [lst[i : i + size] for i in range(0, len(lst), size)]


class _Chunks(torch.utils.data.Dataset):
    def __init__(self, chunks: list[dict]):
        self.chunks = chunks

    def __len__(self) -> int:
        return len(self.chunks)

    def __getitem__(self, index: int) -> dict:
        return self.chunks[index]


class ResettableStreamDataModule(pl.LightningDataModule):
    """Chunks of a resettable stream for ``validate`` / ``test``.

    Args:
        kind: ``"churn"``, ``"bursty"``, ``"words"`` or ``"adversarial"``.
        length: Updates (procedural streams; None: the kind's default), or probes of the adversarial stream.
            For ``"words"``, None keeps the whole corpus.
        chunk_size: Updates (or probes) per batch.
        seed: Seed of the stream (the word stream's unlearning coins).
        lp_q: Exponent of the exact L_q statistic shipped with every chunk.
        unlearn_prob: Word stream: probability that an eligible word is reset after its article.
        attack_threshold: Adversarial stream: a probe moved the estimate if it rose by more than this.
        attack: Adversarial stream: ``"hide"`` (reset the probes that moved the estimate) or ``"inflate"``
            (reset those that did not).
    """

    def __init__(
        self,
        kind: str = "churn",
        length: int | None = 100_000,
        chunk_size: int = 4096,
        seed: int = 0,
        lp_q: float = 0.5,
        unlearn_prob: float = 0.5,
        attack_threshold: float = 0.0,
        attack: str = "hide",
    ):
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if chunk_size < 1 or (length is not None and length < 1):
            raise ValueError("chunk_size and length must be >= 1")
        if kind == "adversarial" and length is None:
            raise ValueError("the adversarial stream needs a number of probes: set length")
        self.save_hyperparameters()
        self.adversary = Adversary(threshold=attack_threshold, mode=attack) if kind == "adversarial" else None
        self._chunks: list[dict] | None = None

    def setup(self, stage: str | None = None) -> None:
        if self._chunks is not None:
            return
        h = self.hparams
        if h.kind == "adversarial":
            probes = self.adversary.next_key + np.arange(h.length, dtype=np.int64)
            self._chunks = [{"probe_keys": torch.from_numpy(p)} for p in _chunk_list(probes, h.chunk_size)]
            return
        ops, keys, deltas = make_stream(h.kind, h.length, h.seed, h.unlearn_prob)
        truths = {}
        for stat in ("card", "sum", "lp"):
            trajectory = ExactSketch(stat, q=h.lp_q).update_batch(ops, keys, deltas, trajectory=True)
            truths[stat] = (trajectory, np.maximum.accumulate(trajectory))
        self._chunks = []
        for start in range(0, len(ops), h.chunk_size):
            stop = min(start + h.chunk_size, len(ops))
            chunk = {
                "ops": torch.from_numpy(ops[start:stop].astype(np.int64)),
                "keys": torch.from_numpy(keys[start:stop]),
                "deltas": torch.from_numpy(deltas[start:stop]),
                "lp_q": torch.tensor(h.lp_q, dtype=torch.float64),
            }
            for stat, (trajectory, peak) in truths.items():
                chunk[f"truth_{stat}"] = torch.tensor(trajectory[stop - 1], dtype=torch.float64)
                chunk[f"peak_{stat}"] = torch.tensor(peak[stop - 1], dtype=torch.float64)
            self._chunks.append(chunk)

    def _loader(self) -> DataLoader:
        self.setup()
        return DataLoader(_Chunks(self._chunks), batch_size=None, shuffle=False)

    def val_dataloader(self) -> DataLoader:
        return self._loader()

    def test_dataloader(self) -> DataLoader:
        return self._loader()

    def state_dict(self) -> dict:
        return {"adversary": self.adversary.state_dict()} if self.adversary is not None else {}

    def load_state_dict(self, state_dict: dict) -> None:
        if self.adversary is not None and "adversary" in state_dict:
            self.adversary.load_state_dict(state_dict["adversary"])
