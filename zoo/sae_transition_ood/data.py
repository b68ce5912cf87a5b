"""The ID-setting DataModule: MiniLM once over the ID texts, keeping only the token sample the SAEs need."""

from __future__ import annotations

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from zoo.sae_transition_ood import domains as D
from zoo.sae_transition_ood.detector import sample_tokens
from zoo.sae_transition_ood.features import token_positions


class SAEOODDataModule(pl.LightningDataModule):
    """Chunks of one ID setting, run through the ``hidden_states`` adapter once.

    Only ``tokens_per_text`` evenly spaced tokens of each text are kept (float16); the SAEs train on at most
    ``train_tokens`` of the ID train tokens, and the transitions are counted over all kept ID train tokens.
    Validation batches hold the ID validation texts (domain 0) and ``val_ood``'s; the test batch holds the ID
    test texts and every other test domain's.

    Args:
        id_domain: ``docstrings``, ``countries`` or ``wikipedia``.
        val_ood: The validation OOD domain (WordNet glosses; never a test domain).
        tokens_per_text: Tokens kept per text.
        train_tokens: Size of the SAE training sample.
        batch_size: SAE training batch (tokens).
        limit_texts: Use at most this many texts per domain and split (smoke runs).
        hidden_model: The ``hidden_states`` adapter's model.
        seed: Seed of the training sample and of the shuffling.
    """

    def __init__(
        self,
        id_domain: str = "docstrings",
        val_ood: str = "wordnet",
        tokens_per_text: int = 20,
        train_tokens: int = 40_000,
        batch_size: int = 512,
        limit_texts: int | None = None,
        hidden_model: str = "minilm",
        seed: int = 0,
    ):
        super().__init__()
        D.check_domain(id_domain, D.ID_DOMAINS)
        D.check_domain(val_ood)
        if val_ood == id_domain:
            raise ValueError("val_ood must differ from the ID domain")
        if tokens_per_text < 1 or train_tokens < 1 or batch_size < 1:
            raise ValueError("tokens_per_text, train_tokens and batch_size must be >= 1")
        self.save_hyperparameters()
        self._tokens: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def _group(self, domain: str, split: str) -> tuple[np.ndarray, np.ndarray]:
        """Kept token states ``(tokens, layers, d)`` float16 and text offsets of one domain's split."""
        key = f"{domain}/{split}"
        if key not in self._tokens:
            from zoo.sae_transition_ood.hidden import HiddenStates

            pieces = D.chunks(domain, split, self.hparams.limit_texts)
            if not pieces:
                raise ValueError(f"{domain} has no {split} texts")
            model = HiddenStates(self.hparams.hidden_model)
            per_text = self.hparams.tokens_per_text

            def keep(states: np.ndarray) -> np.ndarray:
                positions = token_positions(states.shape[1], per_text)
                return states[:, positions].transpose(1, 0, 2).astype(np.float16)

            kept = model.map_ids([p.ids for p in pieces], keep)
            counts = [len(k) for k in kept]
            self._tokens[key] = (np.concatenate(kept), np.concatenate([[0], np.cumsum(counts)]))
        return self._tokens[key]

    def sae_tokens(self) -> torch.Tensor:
        """The SAE training sample (float32)."""
        tokens, _ = self._group(self.hparams.id_domain, "train")
        return sample_tokens(tokens, self.hparams.train_tokens, self.hparams.seed)

    def count_tokens(self) -> np.ndarray:
        """All kept ID train token states (the transition counts)."""
        return self._group(self.hparams.id_domain, "train")[0]

    def _batch(self, domains: list[str], split: str) -> dict:
        tokens, offsets, labels = [], [0], []
        for index, domain in enumerate(domains):
            group_tokens, group_offsets = self._group(domain, split)
            tokens.append(group_tokens)
            offsets += list(group_offsets[1:] + offsets[-1])
            labels += [index] * (len(group_offsets) - 1)
        return {
            "tokens": torch.from_numpy(np.concatenate(tokens).astype(np.float32)),
            "offsets": torch.tensor(offsets),
            "domain": torch.tensor(labels),
            "names": list(domains),
        }

    def setup(self, stage: str | None = None) -> None:
        if stage in (None, "fit"):
            self._group(self.hparams.id_domain, "train")

    def train_dataloader(self) -> DataLoader:
        generator = torch.Generator().manual_seed(self.hparams.seed)
        return DataLoader(TensorDataset(self.sae_tokens()), self.hparams.batch_size, shuffle=True, generator=generator)

    def val_dataloader(self) -> DataLoader:
        batch = self._batch([self.hparams.id_domain, self.hparams.val_ood], "validation")
        return DataLoader([batch], batch_size=None)

    def test_dataloader(self) -> DataLoader:
        others = [d for d in D.TEST_DOMAINS if d != self.hparams.id_domain]
        return DataLoader([self._batch([self.hparams.id_domain, *others], "test")], batch_size=None)
