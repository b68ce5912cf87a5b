"""Tier 1: synthetic image and label embeddings on the unit sphere (the mechanism, exactly controlled).

A "world" holds K ID label prototypes and M negative labels spread over R semantic regions (each negative a
von Mises-Fisher draw around its region's centre). ID images are vMF draws around the ID prototypes, OOD
images vMF draws around the region centres. Contamination replaces a fraction of the negatives by near-ID
vectors at cosine ``near_cos`` to a random ID prototype (outlier negatives, as a noisy vocabulary has).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def sample_vmf(mean: np.ndarray, kappa: float, rng: np.random.Generator) -> np.ndarray:
    """One von Mises-Fisher draw per row of ``mean (N, d)`` (unit rows), concentration ``kappa`` (Wood, 1994)."""
    n, d = mean.shape
    b = (d - 1) / (2 * kappa + np.sqrt(4 * kappa**2 + (d - 1) ** 2))
    x0 = (1 - b) / (1 + b)
    c = kappa * x0 + (d - 1) * np.log(1 - x0**2)
    w = np.empty(n)
    todo = np.arange(n)
    while len(todo):  # vectorised rejection sampling of the cosine to the mean
        z = rng.beta((d - 1) / 2, (d - 1) / 2, size=len(todo))
        cand = (1 - (1 + b) * z) / (1 - (1 - b) * z)
        u = rng.uniform(size=len(todo))
        ok = kappa * cand + (d - 1) * np.log(1 - x0 * cand) - c >= np.log(u)
        w[todo[ok]] = cand[ok]
        todo = todo[~ok]
    return _around(mean, w, rng)


def _around(mean: np.ndarray, cosine: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Unit vectors at the given cosine to each row of ``mean``, in a uniformly random orthogonal direction."""
    v = rng.standard_normal(mean.shape)
    v -= (v * mean).sum(axis=1, keepdims=True) * mean
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    cosine = np.asarray(cosine)[:, None]
    return cosine * mean + np.sqrt(np.clip(1 - cosine**2, 0, None)) * v


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@dataclass(frozen=True)
class SyntheticWorld:
    """Settings of a tier 1 world.

    Args:
        dim: Embedding width (512, as CLIP B/16).
        num_id: K ID labels.
        num_neg: M negative labels.
        num_regions: Semantic regions the negatives (and the OOD images) come from.
        kappa: vMF concentration of the images around their label or region.
        label_kappa: vMF concentration of the negative labels around their region centre.
        near_cos: Cosine of a contaminating negative to its ID prototype.
        hit_fraction: Fraction of the ID classes the contaminating negatives sit near.
        id_images: ID images per draw.
        ood_images: OOD images per draw.
    """

    dim: int = 512
    num_id: int = 100
    num_neg: int = 2000
    num_regions: int = 40
    kappa: float = 60.0
    label_kappa: float = 300.0
    near_cos: float = 0.9
    hit_fraction: float = 0.2
    id_images: int = 2000
    ood_images: int = 2000

    def draw(self, seed: int, contamination: float = 0.0) -> dict[str, np.ndarray]:
        """One world and its images: ``id_labels``, ``neg_labels``, ``id_images``, ``ood_images``.

        The same seed gives the same world, images and clean negatives at any contamination; the
        contamination draw uses its own stream.
        """
        rng = np.random.default_rng(seed)
        id_labels = _unit(rng.standard_normal((self.num_id, self.dim)))
        centres = _unit(rng.standard_normal((self.num_regions, self.dim)))
        region = rng.integers(self.num_regions, size=self.num_neg)
        neg_labels = sample_vmf(centres[region], self.label_kappa, rng)
        id_images = sample_vmf(id_labels[rng.integers(self.num_id, size=self.id_images)], self.kappa, rng)
        ood_images = sample_vmf(centres[rng.integers(self.num_regions, size=self.ood_images)], self.kappa, rng)
        if contamination > 0:
            crng = np.random.default_rng([seed, 1])
            count = int(round(contamination * self.num_neg))
            rows = crng.choice(self.num_neg, size=count, replace=False)
            neg_labels = neg_labels.copy()
            # the outliers sit near a few ID classes (as synonyms of a few classes in a noisy vocabulary do)
            hit = crng.choice(self.num_id, size=max(1, int(round(self.hit_fraction * self.num_id))), replace=False)
            near = _around(id_labels[hit[crng.integers(len(hit), size=count)]], np.full(count, self.near_cos), crng)
            neg_labels[rows] = near
        return {"id_labels": id_labels, "neg_labels": neg_labels, "id_images": id_images, "ood_images": ood_images}
