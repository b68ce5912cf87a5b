"""The judge interface, the offline utility judge (EfficientNet-Lite0 + ridge heads) and the cached, batched judge.

A judge answers one question: shown ``first`` and ``second`` under judge prompt ``prompt``, which is chosen? The
answer is the string ``"first"`` or ``"second"`` (a VLM's parsed reply; anything else is rejected by the contest).
Online this is a VLM call; offline it is :class:`UtilityJudge`:

    P(first chosen) = sigmoid((U_p(first) - U_p(second) + b_pos) / T_c),   U_p = head_p(EfficientNet features)

with position bias ``b_pos`` and temperature ``T_c``. Each call is a stochastic draw whose uniform variate is a hash
of (first, second, prompt, nonce, seed): the same request always gets the same answer, as from an API at a fixed
sampling seed, which is what makes caching answers exact. ``nonce`` separates deliberately repeated trials.

:class:`CachedJudge` wraps any judge: it deduplicates (first, second, prompt, nonce) requests, and batches the
image encodings of a round (``prefetch``) so the backbone runs once per new image instead of twice per call.
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np

from zoo.visual_persuasion.attributes import check_image, image_key

ANSWERS = ("first", "second")


def keyed_uniform(*parts) -> float:
    """A uniform variate in [0, 1) determined by ``parts`` (bytes, ints, floats): a hash, not a generator state."""
    digest = hashlib.blake2b(digest_size=8)
    for part in parts:
        digest.update(part if isinstance(part, bytes) else repr(part).encode())
        digest.update(b"|")
    return struct.unpack("<Q", digest.digest())[0] / 2.0**64


class Judge:
    """The judge interface (a VLM online).

    Attributes:
        num_prompts: The number of judge prompts (3 in the paper).
    """

    num_prompts: int = 3

    def answer(self, first: np.ndarray, second: np.ndarray, prompt: int, nonce: int = 0) -> str:
        """``"first"`` or ``"second"``."""
        raise NotImplementedError  # pragma: no cover - interface

    def prefetch(self, images) -> None:
        """Prepare a batch of images that will be judged next (a no-op for judges without encodings)."""


class UtilityJudge(Judge):
    """The offline judge: frozen EfficientNet-Lite0 features, one linear utility head per judge prompt.

    Args:
        weights: ``(P, 1280)`` head weights (one row per judge prompt).
        bias: ``(P,)`` head intercepts.
        position_bias: ``b_pos``, added to the first image's utility.
        temperature: ``T_c``.
        seed: Seed of the keyed draws.
        feature_size: Side the images are resized to for the backbone.
        encoder: ``images (N, H, W, 3) uint8 -> (N, 1280) features``; the EfficientNet-Lite0 by default.
        cache_features: Keep each image's features (by content hash); False makes every call encode both images,
            the naive per-call forward of the benchmark.
    """

    def __init__(
        self,
        weights: np.ndarray,
        bias: np.ndarray,
        position_bias: float = 0.1,
        temperature: float = 0.2,
        seed: int = 0,
        feature_size: int = 64,
        encoder=None,
        cache_features: bool = True,
    ) -> None:
        self.weights = np.asarray(weights, dtype=np.float64)
        self.bias = np.asarray(bias, dtype=np.float64)
        if self.weights.ndim != 2 or self.bias.shape != (len(self.weights),):
            raise ValueError(f"heads must be (P, D) weights and (P,) bias, got {self.weights.shape}, {self.bias.shape}")
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.num_prompts = len(self.weights)
        self.position_bias, self.temperature, self.seed = float(position_bias), float(temperature), int(seed)
        self.feature_size = feature_size
        self.encoder = encoder
        self.cache_features = cache_features
        self._features: dict[bytes, np.ndarray] = {}
        self.encoded = 0  # images sent through the backbone

    def encode(self, images: np.ndarray) -> np.ndarray:
        """Features ``(N, D)`` of uint8 images ``(N, H, W, 3)``."""
        self.encoded += len(images)
        if self.encoder is not None:
            return np.asarray(self.encoder(images), dtype=np.float64)
        from zoo.common.efficientnet import features

        return features(images, size=self.feature_size).astype(np.float64)

    def prefetch(self, images) -> None:
        if not self.cache_features:
            return
        todo, keys = [], set()
        for image in images:
            key = image_key(check_image(image))
            if key not in self._features and key not in keys:
                keys.add(key)
                todo.append((key, image))
        if todo:
            encoded = self.encode(np.stack([image for _, image in todo]))
            for (key, _), row in zip(todo, encoded, strict=True):
                self._features[key] = row

    def features_of(self, images) -> np.ndarray:
        """Features of a list of images (encoded now if not cached)."""
        images = [check_image(image) for image in images]
        if not self.cache_features:
            return self.encode(np.stack(images))
        self.prefetch(images)
        return np.stack([self._features[image_key(image)] for image in images])

    def utilities(self, images, heads=None) -> np.ndarray:
        """``(N, P)`` utilities of the images under every head (or the rows ``heads``)."""
        weights, bias = (self.weights, self.bias) if heads is None else (self.weights[heads], self.bias[heads])
        return self.features_of(images) @ weights.T + bias

    def probability_first(self, first_utility, second_utility) -> np.ndarray:
        """P(first chosen) from the two utilities (arrays broadcast)."""
        from scipy.special import expit

        return expit((np.asarray(first_utility) - np.asarray(second_utility) + self.position_bias) / self.temperature)

    def answer(self, first: np.ndarray, second: np.ndarray, prompt: int, nonce: int = 0) -> str:
        if not 0 <= prompt < self.num_prompts:
            raise ValueError(f"prompt must be in [0, {self.num_prompts}), got {prompt}")
        utility = self.features_of([first, second]) @ self.weights[prompt] + self.bias[prompt]
        p_first = float(self.probability_first(utility[0], utility[1]))
        draw = keyed_uniform(self.seed, image_key(first), image_key(second), prompt, nonce)
        return "first" if draw < p_first else "second"


class CachedJudge(Judge):
    """Deduplicates (first, second, prompt, nonce) requests of any judge and batches its image encodings.

    Args:
        judge: The judge answering new requests.

    Attributes:
        requests: Calls asked of this judge (what an optimiser's ``judge_calls`` counts).
        misses: Calls passed on to the wrapped judge (what an API would bill).
    """

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self.num_prompts = judge.num_prompts
        self._answers: dict[tuple, str] = {}
        self.requests = 0
        self.misses = 0

    def prefetch(self, images) -> None:
        self.judge.prefetch(images)

    def answer(self, first: np.ndarray, second: np.ndarray, prompt: int, nonce: int = 0) -> str:
        self.requests += 1
        key = (image_key(first), image_key(second), int(prompt), int(nonce))
        if key not in self._answers:
            self.misses += 1
            self._answers[key] = self.judge.answer(first, second, prompt, nonce)
        return self._answers[key]


class ConstantJudge(Judge):
    """A judge with a constant utility and a position bias: ``P(first) = sigmoid(b_pos / T_c)`` (a test double).

    Args:
        position_bias: ``b_pos``.
        temperature: ``T_c``.
        num_prompts: Judge prompts.
        seed: Seed of the keyed draws.
    """

    def __init__(self, position_bias: float = 2.0, temperature: float = 0.2, num_prompts: int = 3, seed: int = 0):
        self.p_first = 1.0 / (1.0 + np.exp(-position_bias / temperature))
        self.num_prompts, self.seed = num_prompts, seed

    def answer(self, first, second, prompt, nonce=0) -> str:
        draw = keyed_uniform(self.seed, image_key(first), image_key(second), prompt, nonce)
        return "first" if draw < self.p_first else "second"
