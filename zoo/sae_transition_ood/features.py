"""The evaluation's one pass of MiniLM over every text, cached to a file and shared by all arms and seeds.

Per text it keeps (float16) the hidden states of ``tokens_per_text`` evenly spaced tokens at every layer (SAE
training, transition counts and token-level scores), and the mean- and max-pooled hidden states over all of
its tokens at every layer (the black-box baselines). Texts are the chunks of :mod:`.domains`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zoo.sae_transition_ood import domains as D

CACHE_VERSION = 1
SPLITS_NEEDED = {
    "train": D.ID_DOMAINS,
    "validation": (*D.ID_DOMAINS, D.VALIDATION_OOD),
    "test": D.TEST_DOMAINS,
}


def token_positions(length: int, tokens_per_text: int) -> np.ndarray:
    """Evenly spaced token positions of a text of ``length`` tokens (all of them if it is shorter)."""
    if length <= tokens_per_text:
        return np.arange(length)
    return np.unique(np.linspace(0, length - 1, tokens_per_text).round().astype(int))


@dataclass
class Features:
    """Cached features of every (domain, split) group of texts.

    Attributes:
        tokens: ``(tokens, layers, d)`` float16, the sampled tokens of all texts, group by group.
        offsets: ``(texts + 1,)`` token offsets of each text into ``tokens``.
        mean_pool, max_pool: ``(texts, layers, d)`` float16.
        groups: ``{"domain/split": (first_text, last_text + 1)}``.
        labels: Sub-label of each text.
    """

    tokens: np.ndarray
    offsets: np.ndarray
    mean_pool: np.ndarray
    max_pool: np.ndarray
    groups: dict
    labels: np.ndarray

    def texts(self, domain: str, split: str) -> slice:
        key = f"{domain}/{split}"
        if key not in self.groups:
            raise KeyError(f"no cached texts for {key}; cached: {', '.join(self.groups)}")
        start, stop = self.groups[key]
        return slice(start, stop)

    def token_slice(self, domain: str, split: str) -> tuple[np.ndarray, np.ndarray]:
        """The sampled tokens of one group ``(tokens, layers, d)`` and their offsets starting at 0."""
        texts = self.texts(domain, split)
        offsets = self.offsets[texts.start : texts.stop + 1]
        return self.tokens[offsets[0] : offsets[-1]], offsets - offsets[0]


def default_cache_dir() -> Path:
    """The paper's data-cache folder (``$ZOO_CACHE_DIR/sae_transition_ood``): MiniLM features and SAE stacks."""
    from zoo._paths import cache_dir

    return cache_dir("sae_transition_ood")


def build_features(tokens_per_text: int = 20, batch_size: int = 64, cache_dir: Path | None = None) -> Features:
    """Run MiniLM once over every text the evaluation needs (or read the cached file)."""
    from zoo.sae_transition_ood.hidden import HiddenStates

    cache_dir = Path(cache_dir or default_cache_dir())
    spec = json.dumps({"v": CACHE_VERSION, "tokens_per_text": tokens_per_text, "sizes": D.SIZES}, sort_keys=True)
    path = cache_dir / f"features-{hashlib.sha256(spec.encode()).hexdigest()[:12]}.npz"
    if path.is_file():
        with np.load(path, allow_pickle=False) as data:
            return Features(
                data["tokens"], data["offsets"], data["mean_pool"], data["max_pool"],
                json.loads(str(data["groups"])), data["labels"],
            )  # fmt: skip
    model = HiddenStates()
    tokens, counts, means, maxes, labels, groups = [], [], [], [], [], {}
    for split, domains in SPLITS_NEEDED.items():
        for domain in domains:
            pieces = D.chunks(domain, split)
            groups[f"{domain}/{split}"] = (len(labels), len(labels) + len(pieces))
            labels += [piece.label for piece in pieces]

            def reduce(states: np.ndarray) -> tuple:
                positions = token_positions(states.shape[1], tokens_per_text)
                kept = states[:, positions].transpose(1, 0, 2).astype(np.float16)
                return kept, states.mean(1).astype(np.float16), states.max(1).astype(np.float16)

            for kept, mean, peak in model.map_ids([piece.ids for piece in pieces], reduce, batch_size):
                tokens.append(kept)
                counts.append(len(kept))
                means.append(mean)
                maxes.append(peak)
    features = Features(
        np.concatenate(tokens), np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), np.stack(means),
        np.stack(maxes), groups, np.asarray(labels),
    )  # fmt: skip
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial.npz")
    np.savez(
        partial, tokens=features.tokens, offsets=features.offsets, mean_pool=features.mean_pool,
        max_pool=features.max_pool, groups=json.dumps(groups), labels=features.labels,
    )  # fmt: skip
    partial.replace(path)
    return features
