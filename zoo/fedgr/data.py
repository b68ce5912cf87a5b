"""``FedNoisyDataModule``: Fashion-MNIST split over clients with per-client label noise.

The federation (partition, noisy labels, true labels) is built by :mod:`zoo.fedgr.federation` from the
datamodule's arguments, so it is reproducible from ``seed`` and identical to what a Flower ClientApp
rebuilds from the same :class:`~zoo.fedgr.federation.FederationSpec`.

Loaders:

* ``train_dataloader``: one item per epoch, a :class:`RoundInput` holding the
  :class:`~zoo.fedgr.federation.Federation`. One epoch is one communication round; the module's client
  trainers slice each client's tensors into mini-batches (no DataLoader workers, no per-sample Python
  overhead).
* ``val_dataloader``: ``val_size`` held-out training images with their true labels (monitoring only).
* ``test_dataloader``: the 10,000 Fashion-MNIST test images (or the first ``test_limit``).
"""

from __future__ import annotations

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from zoo.fedgr.federation import Federation, FederationSpec, fashion_mnist_federation


class RoundInput:
    """The training "batch" of one communication round: a handle on the federation.

    Not a tensor collection, so Lightning hands it to ``training_step`` untouched; the client trainers
    move each client's data to the module's device once.

    Args:
        federation: The clients' data (and, for scoring only, the true labels).
    """

    __slots__ = ("federation",)

    def __init__(self, federation: Federation) -> None:
        self.federation = federation


class FedNoisyDataModule(pl.LightningDataModule):
    """Clients with heterogeneous label noise on real Fashion-MNIST.

    Args:
        num_clients: Number of clients K.
        samples_per_client: Training images per client (``K * samples_per_client`` are drawn from the 60k).
        partition: ``"iid"`` or ``"dirichlet"``.
        dirichlet_alpha: Concentration of the Dirichlet partition.
        noise: ``"symmetric"``, ``"pair"`` (class flips), ``"mixed"`` (per client one of the two) or ``"none"``.
        noise_low: Lower end of the per-client noise rate ε_k ~ U[noise_low, noise_high].
        noise_high: Upper end of the per-client noise rate.
        noisy_client_fraction: Fraction of clients with noisy labels (the rest are clean).
        val_size: Held-out training images with true labels, for monitoring.
        client_val_fraction: Fraction of each client's samples held out (noisy labels) for tuning; 0: none.
        test_limit: Use only the first ``test_limit`` test images (None: all 10,000).
        eval_batch_size: Batch size of the validation and test loaders.
        seed: Seed of the pool, the partition and the noise.
    """

    def __init__(
        self,
        num_clients: int = 10,
        samples_per_client: int = 600,
        partition: str = "iid",
        dirichlet_alpha: float = 0.3,
        noise: str = "symmetric",
        noise_low: float = 0.4,
        noise_high: float = 0.7,
        noisy_client_fraction: float = 1.0,
        val_size: int = 1000,
        client_val_fraction: float = 0.0,
        test_limit: int | None = None,
        eval_batch_size: int = 1000,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.spec = FederationSpec(
            num_clients=num_clients,
            samples_per_client=samples_per_client,
            partition=partition,
            dirichlet_alpha=dirichlet_alpha,
            noise=noise,
            noise_low=noise_low,
            noise_high=noise_high,
            noisy_client_fraction=noisy_client_fraction,
            val_size=val_size,
            client_val_fraction=client_val_fraction,
            seed=seed,
        )
        self.federation: Federation | None = None

    def prepare_data(self) -> None:
        from zoo.common.datasets import fashion_mnist

        fashion_mnist("train")  # fails early, with the apt-get hint, if the Debian package is missing

    def setup(self, stage: str | None = None) -> None:
        if self.federation is None:
            self.federation = fashion_mnist_federation(self.spec)

    def train_dataloader(self) -> DataLoader:
        return DataLoader([RoundInput(self.federation)], batch_size=None, collate_fn=_identity)

    def val_dataloader(self) -> DataLoader | list:
        if self.spec.val_size == 0:
            return []
        return self._loader(self.federation.val_images, self.federation.val_labels)

    def test_dataloader(self) -> DataLoader:
        return self._loader(*fashion_mnist_test(self.hparams.test_limit))

    def predict_dataloader(self) -> DataLoader:
        return self.test_dataloader()

    def _loader(self, images: np.ndarray, labels: np.ndarray) -> DataLoader:
        dataset = TensorDataset(torch.from_numpy(np.array(images)), torch.from_numpy(np.array(labels)))
        return DataLoader(dataset, batch_size=self.hparams.eval_batch_size)


def fashion_mnist_test(limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST test images (uint8 ``[n, 28, 28]``) and labels, optionally the first ``limit``."""
    from zoo.common.datasets import fashion_mnist

    images, labels = fashion_mnist("test")
    if limit is not None:
        if limit < 1:
            raise ValueError(f"test_limit must be a positive number of images, got {limit}")
        images, labels = images[:limit], labels[:limit]
    return images, labels


def _identity(item):
    return item
