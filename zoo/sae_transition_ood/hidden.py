"""The ``hidden_states`` adapter: per-token hidden states of every layer from any Hugging Face encoder or decoder.

:class:`HiddenStates` wraps ``transformers.AutoModel`` (called with ``output_hidden_states=True``) and its
tokenizer; :meth:`HiddenStates.forward_ids` returns, per text, an array ``(L + 1, T, d)`` of the states after
the embeddings and after each block, with special and padding tokens dropped. MiniLM-L6 (the default, from
:func:`zoo.common.minilm.model_path`) gives 7 states of width 384.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache

import numpy as np
import torch

MINILM = "minilm"
MINILM_LAYERS, MINILM_WIDTH = 7, 384


def _model_path(name: str) -> str:
    if name == MINILM:
        from zoo.common.minilm import model_path

        return model_path()
    return name


@lru_cache(maxsize=2)
def tokenizer(name: str = MINILM):
    """The model's tokenizer (offline)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(_model_path(name), local_files_only=True)


@lru_cache(maxsize=2)
def _model(name: str):
    from transformers import AutoModel

    model = AutoModel.from_pretrained(_model_path(name), local_files_only=True)
    return model.eval()


class HiddenStates:
    """Hidden states of every layer, special and padding tokens dropped.

    Args:
        model: ``"minilm"`` (all-MiniLM-L6-v2 from the installed package) or a local Hugging Face model folder.
        max_tokens: Longest text in word pieces (longer texts are cut).
    """

    def __init__(self, model: str = MINILM, max_tokens: int = 128) -> None:
        self.name = model
        self.max_tokens = max_tokens
        self.tokenizer = tokenizer(model)
        self.model = _model(model)
        config = self.model.config
        self.num_states = config.num_hidden_layers + 1
        self.width = config.hidden_size
        self.special_ids = set(self.tokenizer.all_special_ids)

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Word-piece ids of each text without special tokens; a text with none left raises ValueError."""
        out = []
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"text {i} is {type(text).__name__}, expected str")
            ids = self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
            ids = [t for t in ids if t not in self.special_ids][: self.max_tokens - 2]
            if not ids:
                raise ValueError(f"text {i} ({text[:40]!r}) has no tokens left once special tokens are dropped")
            out.append(ids)
        return out

    @torch.no_grad()
    def forward_ids(self, ids: Sequence[Sequence[int]], batch_size: int = 64) -> Iterator[np.ndarray]:
        """Yield, per text in order, float32 ``(num_states, T, width)`` (T = that text's word pieces).

        Texts are batched in the given order and each batch is yielded as soon as it is computed, so only one
        batch of hidden states is alive at a time (sort by length before calling to save padding).
        """
        tok = self.tokenizer
        offset = 1 if tok.cls_token_id is not None else 0
        for start in range(0, len(ids), batch_size):
            batch = [list(x) for x in ids[start : start + batch_size]]
            length = max(len(x) for x in batch) + 2 * offset
            input_ids = torch.full((len(batch), length), tok.pad_token_id, dtype=torch.long)
            mask = torch.zeros((len(batch), length), dtype=torch.long)
            for row, piece in enumerate(batch):
                full = [tok.cls_token_id, *piece, tok.sep_token_id] if offset else piece
                input_ids[row, : len(full)] = torch.tensor(full)
                mask[row, : len(full)] = 1
            states = self.model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True).hidden_states
            stacked = torch.stack(states, dim=1).float().numpy()  # (B, L+1, length, d)
            for row, piece in enumerate(batch):
                yield stacked[row, :, offset : offset + len(piece)]

    def map_ids(self, ids: Sequence[Sequence[int]], reduce, batch_size: int = 64) -> list:
        """``[reduce(states of text i) for i]`` in the input order, computed in length-sorted batches.

        Only ``reduce``'s (small) results are kept, so memory stays at one batch of hidden states.
        """
        order = np.argsort([len(x) for x in ids], kind="stable")
        results: list = [None] * len(ids)
        for position, states in zip(order, self.forward_ids([ids[i] for i in order], batch_size), strict=True):
            results[position] = reduce(states)
        return results

    def __call__(self, texts: Sequence[str], batch_size: int = 64) -> list[np.ndarray]:
        """Hidden states of each text: a list of ``(num_states, T, width)`` arrays."""
        return list(self.forward_ids(self.encode(texts), batch_size))


def check_states(states: np.ndarray, num_states: int, width: int) -> None:
    """Raise a ValueError unless ``states`` is ``(num_states, T, width)`` with T >= 1."""
    shape = tuple(getattr(states, "shape", ()))
    if len(shape) != 3 or shape[0] != num_states or shape[2] != width or shape[1] < 1:
        raise ValueError(
            f"hidden states have shape {shape}; expected ({num_states}, tokens >= 1, {width}): "
            f"{num_states} layers of width {width}"
        )
