"""``NegLabelOODDataModule``: the inputs of a zero-shot negative-label OOD detector, tier 1 or tier 2.

``fit``: one batch (a dict) with everything the detector is fitted from: the bridge's training pairs
(text embeddings and image-space class vectors), the ID label embeddings, the candidate negatives (nouns and
adjectives, with their words), and the validation images (held-out ID images and the validation OOD set)
that tune the score. ``validate``/``test``: one batch per OOD set, ``{"name", "id", "ood"}`` image features.

* Tier 2: EfficientNet-Lite0 features and MiniLM text embeddings (cached, :mod:`.sources`); the bridge maps
  MiniLM prompts of the ImageNet classes onto EfficientNet-Lite0's classifier rows. Validation = 2,000
  held-out Fashion-MNIST training images + skimage colour-photo crops; test = Fashion-MNIST test against
  MNIST, textures, Crafter, Atari.
* Tier 1: the synthetic world of :mod:`.synthetic`; text and image spaces coincide, so the bridge's pairs
  are a set of random unit vectors mapped to themselves.
"""

from __future__ import annotations

import lightning.pytorch as pl
import numpy as np
from torch.utils.data import DataLoader

from zoo._errors import ZooError


def _first(items):
    return items[0]


class NegLabelOODDataModule(pl.LightningDataModule):
    """Fit, validation and test inputs of the Renyi negative-label detector.

    Args:
        tier: 1 (synthetic embeddings) or 2 (real images through the stand-in VLM).
        seed: Negative sampling seed (which candidates the vocabulary holds) and tier 1's world seed.
        test_limit: Use only the first ``test_limit`` images of each test set (None = all).
        tier1_dim: Tier 1 embedding width.
        tier1_kappa: Tier 1 vMF concentration of the images.
        tier1_images: Tier 1 images per class (ID and OOD) and split.
    """

    def __init__(
        self,
        tier: int = 2,
        seed: int = 0,
        test_limit: int | None = None,
        tier1_dim: int = 512,
        tier1_kappa: float = 90.0,
        tier1_images: int = 1000,
    ) -> None:
        super().__init__()
        if tier not in (1, 2):
            raise ZooError(f"tier must be 1 or 2, got {tier}")
        self.save_hyperparameters()
        self.fit_batch: dict | None = None
        self.eval_batches: list[dict] = []

    # ------------------------------------------------------------------------------------------ tier 2

    def _tier2(self) -> None:
        from zoo.renyi_neglabel_ood import sources
        from zoo.renyi_neglabel_ood.pipeline import id_label_embeddings

        h = self.hparams
        images, text = sources.image_features(), sources.text_embeddings()
        keep = np.random.default_rng([h.seed, 7])
        nouns = np.sort(keep.choice(len(text["nouns"]), size=int(0.8 * len(text["nouns"])), replace=False))
        adjs = np.sort(keep.choice(len(text["adjs"]), size=int(0.8 * len(text["adjs"])), replace=False))
        self.fit_batch = {
            "bridge_text": text["imagenet"],
            "bridge_rows": text["imagenet_fc"],
            "id_text": id_label_embeddings(text, range(10)),
            "nouns": text["nouns"][nouns],
            "noun_words": [str(w) for w in text["noun_words"][nouns]],
            "adjs": text["adjs"][adjs],
            "adj_words": [str(w) for w in text["adj_words"][adjs]],
            "val_id": images["fmnist_val"],
            "val_ood": images["photos_val"],
        }
        limit = h.test_limit
        self.eval_batches = [
            {"name": name, "id": images["fmnist_test"][:limit], "ood": images[name][:limit]}
            for name in sources.TEST_OOD_SETS
        ]

    # ------------------------------------------------------------------------------------------ tier 1

    def _tier1(self) -> None:
        from zoo.renyi_neglabel_ood.synthetic import SyntheticWorld

        h = self.hparams
        n = h.tier1_images
        world = SyntheticWorld(dim=h.tier1_dim, kappa=h.tier1_kappa, id_images=2 * n, ood_images=2 * n)
        test = world.draw(h.seed)  # the first half of its images tunes, the second half tests
        val = {"id_images": test["id_images"][:n], "ood_images": test["ood_images"][:n]}
        test = {**test, "id_images": test["id_images"][n:], "ood_images": test["ood_images"][n:]}
        rng = np.random.default_rng(h.seed)
        pairs = rng.standard_normal((4 * h.tier1_dim, h.tier1_dim))
        pairs /= np.linalg.norm(pairs, axis=1, keepdims=True)
        negs = test["neg_labels"]
        self.fit_batch = {
            "bridge_text": pairs,
            "bridge_rows": pairs,
            "id_text": test["id_labels"],
            "nouns": negs,
            "noun_words": [f"negative_{i}" for i in range(len(negs))],
            "adjs": negs[:0],
            "adj_words": [],
            "val_id": val["id_images"],
            "val_ood": val["ood_images"],
        }
        self.eval_batches = [{"name": "synthetic", "id": test["id_images"], "ood": test["ood_images"]}]

    def setup(self, stage: str | None = None) -> None:
        if self.fit_batch is None:
            self._tier1() if self.hparams.tier == 1 else self._tier2()

    def train_dataloader(self):
        return DataLoader([self.fit_batch], batch_size=1, collate_fn=_first)

    def val_dataloader(self):
        return DataLoader(self.eval_batches, batch_size=1, collate_fn=_first)

    def test_dataloader(self):
        return DataLoader(self.eval_batches, batch_size=1, collate_fn=_first)
