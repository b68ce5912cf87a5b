"""A noisy-label federation over Fashion-MNIST: client partitions and per-client label noise (plain numpy).

Everything is a pure function of a :class:`FederationSpec` (its ``seed`` included), so the Lightning
datamodule, a Flower ClientApp on another machine and the evaluation all rebuild the same clients,
the same noisy labels and the same true labels. The true labels never reach a client; they are kept
beside the noisy ones so that noise detection can be scored.

Noise models (a noisy client gets its own rate ``ε_k ~ U[noise_low, noise_high]``):

* ``symmetric``: ``round(ε_k · n_k)`` samples get a uniformly random *other* class;
* ``pair``: the class flips T-shirt→Shirt, Pullover→Coat, Coat→Pullover, Sandal→Sneaker, Sneaker→Sandal,
  Ankle boot→Sneaker, applied to ``round(ε_k · m_k)`` of the client's ``m_k`` samples of those six classes;
* ``mixed``: each noisy client draws ``symmetric`` or ``pair`` with probability 1/2;
* ``none``: clean labels.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import lru_cache

import numpy as np

PARTITIONS = ("iid", "dirichlet")
NOISE_TYPES = ("symmetric", "pair", "mixed", "none")
#: Pair-flip noise of Fashion-MNIST: T-shirt→Shirt, Pullover→Coat, Coat→Pullover, Sandal→Sneaker,
#: Sneaker→Sandal, Ankle boot→Sneaker.
PAIR_FLIPS = {0: 6, 2: 4, 4: 2, 5: 7, 7: 5, 9: 7}
NUM_CLASSES = 10


@dataclass(frozen=True)
class FederationSpec:
    """How to build the federation; every field is a primitive so it travels in configs and messages.

    Args:
        num_clients: Number of clients K.
        samples_per_client: Training images per client (the pool holds ``K * samples_per_client``).
        partition: ``"iid"`` (equal random shares) or ``"dirichlet"`` (per-class shares ~ Dir(alpha)).
        dirichlet_alpha: Concentration of the Dirichlet partition.
        noise: ``"symmetric"``, ``"pair"``, ``"mixed"`` or ``"none"``.
        noise_low: Lower end of the per-client noise rate.
        noise_high: Upper end of the per-client noise rate.
        noisy_client_fraction: Fraction of clients that are noisy (the others keep clean labels).
        val_size: Held-out training images with their true labels (monitoring only; never used to select).
        client_val_fraction: Fraction of each client's own samples (with their noisy labels) held out of its
            training data as a validation split: what FedGR's loss weights and the baselines' hyperparameters
            are chosen on (``python -m zoo.fedgr.tune``). 0 in the recipes.
        seed: Seed of the pool, the partition and the noise.
    """

    num_clients: int = 10
    samples_per_client: int = 600
    partition: str = "iid"
    dirichlet_alpha: float = 0.3
    noise: str = "symmetric"
    noise_low: float = 0.4
    noise_high: float = 0.7
    noisy_client_fraction: float = 1.0
    val_size: int = 1000
    client_val_fraction: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.partition not in PARTITIONS:
            raise ValueError(f"partition must be one of {PARTITIONS}, not {self.partition!r}")
        if self.noise not in NOISE_TYPES:
            raise ValueError(f"noise must be one of {NOISE_TYPES}, not {self.noise!r}")
        if not 0.0 <= self.noise_low <= self.noise_high <= 1.0:
            raise ValueError(
                f"noise rates need 0 <= noise_low <= noise_high <= 1, got [{self.noise_low}, {self.noise_high}]"
            )
        if not 0.0 <= self.noisy_client_fraction <= 1.0:
            raise ValueError(f"noisy_client_fraction must be in [0, 1], got {self.noisy_client_fraction}")
        if self.num_clients < 1 or self.samples_per_client < 1:
            raise ValueError("num_clients and samples_per_client must be positive")
        if not 0.0 <= self.client_val_fraction < 1.0:
            raise ValueError(f"client_val_fraction must be in [0, 1), got {self.client_val_fraction}")
        if self.partition == "dirichlet" and self.dirichlet_alpha <= 0:
            raise ValueError(f"dirichlet_alpha must be positive, got {self.dirichlet_alpha}")

    @property
    def num_samples(self) -> int:
        return self.num_clients * self.samples_per_client


@dataclass
class ClientData:
    """What one client holds: its images and its (possibly noisy) labels; never the true labels.

    Args:
        client_id: Index of the client in the federation.
        sample_ids: Federation-wide ids of the client's samples (what FedGR uploads with its losses).
        images: ``[n, 28, 28]`` uint8 images.
        labels: ``[n]`` int64 observed (noisy) labels.
        noise_rate: Fraction of the client's labels that are wrong. Only the co-teaching baseline reads
            it (co-teaching assumes the noise rate is known); FedGR estimates it instead.
    """

    client_id: int
    sample_ids: np.ndarray
    images: np.ndarray
    labels: np.ndarray
    noise_rate: float = 0.0

    def __len__(self) -> int:
        return len(self.sample_ids)


@dataclass
class Federation:
    """The built federation: a pool of training images split over clients, with noisy and true labels.

    Args:
        spec: How it was built.
        images: ``[N, 28, 28]`` uint8 pool; the sample id is the row.
        true_labels: ``[N]`` correct labels.
        noisy_labels: ``[N]`` labels the clients see.
        client_samples: Sample ids of each client.
        noise_types: Noise model of each client (``"none"`` for a clean client).
        val_images: Held-out training images (not in any client).
        val_labels: Their true labels.
        client_val_samples: Per client, the sample ids of its own held-out validation split (noisy labels,
            never trained on); empty arrays without ``spec.client_val_fraction``.
    """

    spec: FederationSpec
    images: np.ndarray
    true_labels: np.ndarray
    noisy_labels: np.ndarray
    client_samples: list[np.ndarray]
    noise_types: list[str]
    val_images: np.ndarray
    val_labels: np.ndarray
    client_val_samples: list[np.ndarray] = field(default_factory=list)
    noise_rates: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        wrong = self.noisy_labels != self.true_labels
        self.noise_rates = np.array([wrong[ids].mean() if len(ids) else 0.0 for ids in self.client_samples])

    @property
    def num_clients(self) -> int:
        return len(self.client_samples)

    @property
    def is_noisy(self) -> np.ndarray:
        """``[N]`` bool: the observed label is wrong."""
        return self.noisy_labels != self.true_labels

    def client(self, client_id: int) -> ClientData:
        """The data of one client (observed labels only)."""
        if not 0 <= client_id < self.num_clients:
            raise ValueError(f"client_id must be in [0, {self.num_clients}), got {client_id}")
        ids = self.client_samples[client_id]
        return ClientData(
            client_id=client_id,
            sample_ids=ids,
            images=self.images[ids],
            labels=self.noisy_labels[ids],
            noise_rate=float(self.noise_rates[client_id]),
        )

    def client_validation(self) -> tuple[np.ndarray, np.ndarray]:
        """The clients' held-out samples pooled: images and their observed (noisy) labels."""
        ids = np.concatenate([np.asarray(v, dtype=np.int64) for v in self.client_val_samples] or [np.zeros(0, int)])
        return self.images[ids], self.noisy_labels[ids]

    def summary(self) -> dict:
        """Facts about the federation for logs and configs (spec, sizes, realised noise rates)."""
        return {
            "spec": asdict(self.spec),
            "client_sizes": [len(ids) for ids in self.client_samples],
            "noise_types": list(self.noise_types),
            "noise_rates": [round(float(r), 4) for r in self.noise_rates],
        }


def _rng(seed: int, stream: str) -> np.random.Generator:
    # Independent streams, so that e.g. the noise of a client does not depend on how the pool was drawn.
    return np.random.default_rng([seed, sum(ord(c) * 31**i for i, c in enumerate(stream)) % (2**31)])


def partition_iid(labels: np.ndarray, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Equal random shares of ``range(len(labels))`` (the remainder goes to the first clients)."""
    order = rng.permutation(len(labels))
    return [np.sort(part) for part in np.array_split(order, num_clients)]


def partition_dirichlet(
    labels: np.ndarray, num_clients: int, alpha: float, rng: np.random.Generator, min_size: int = 10
) -> list[np.ndarray]:
    """Per class, shares over clients ~ Dir(alpha); redrawn until every client has ``min_size`` samples.

    Args:
        labels: Labels of the pool.
        num_clients: Number of clients.
        alpha: Dirichlet concentration (small = skewed label distributions).
        rng: Random generator.
        min_size: Smallest acceptable client.
    """
    min_size = min(min_size, len(labels) // num_clients)
    for _ in range(1000):
        parts: list[list[int]] = [[] for _ in range(num_clients)]
        for c in np.unique(labels):
            members = rng.permutation(np.flatnonzero(labels == c))
            shares = rng.dirichlet(np.full(num_clients, alpha))
            cuts = (np.cumsum(shares)[:-1] * len(members)).astype(int)
            for client, chunk in enumerate(np.split(members, cuts)):
                parts[client].extend(chunk.tolist())
        if min(len(p) for p in parts) >= min_size:
            return [np.sort(np.array(p, dtype=np.int64)) for p in parts]
    raise ValueError(f"could not draw a Dirichlet(alpha={alpha}) partition with {min_size} samples per client")


def symmetric_noise(labels: np.ndarray, rate: float, rng: np.random.Generator, num_classes: int) -> np.ndarray:
    """``round(rate * n)`` labels replaced by a uniformly random other class."""
    noisy = labels.copy()
    flip = rng.choice(len(labels), size=int(round(rate * len(labels))), replace=False)
    noisy[flip] = (labels[flip] + rng.integers(1, num_classes, size=len(flip))) % num_classes
    return noisy


def pair_noise(labels: np.ndarray, rate: float, rng: np.random.Generator, flips: dict[int, int] = PAIR_FLIPS):
    """``round(rate * m)`` of the ``m`` labels of the classes in ``flips`` replaced by their pair class."""
    noisy = labels.copy()
    candidates = np.flatnonzero(np.isin(labels, list(flips)))
    flip = rng.choice(candidates, size=int(round(rate * len(candidates))), replace=False)
    noisy[flip] = np.array([flips[int(y)] for y in labels[flip]], dtype=labels.dtype)
    return noisy


def build_federation(spec: FederationSpec, images: np.ndarray, labels: np.ndarray) -> Federation:
    """Draw the pool, split it over clients and corrupt the labels, all from ``spec.seed``.

    Args:
        spec: The federation to build.
        images: ``[M, H, W]`` training images to draw from.
        labels: ``[M]`` their labels.
    """
    needed = spec.num_samples + spec.val_size
    if needed > len(labels):
        raise ValueError(
            f"the federation needs {needed} images (num_clients * samples_per_client + val_size) but the training "
            f"split has {len(labels)}; lower samples_per_client or val_size"
        )
    order = _rng(spec.seed, "pool").permutation(len(labels))[:needed]
    val_ids, pool_ids = order[: spec.val_size], np.sort(order[spec.val_size :])
    pool_images, true_labels = images[pool_ids], labels[pool_ids].astype(np.int64)

    part_rng = _rng(spec.seed, "partition")
    if spec.partition == "iid":
        clients = partition_iid(true_labels, spec.num_clients, part_rng)
    else:
        clients = partition_dirichlet(true_labels, spec.num_clients, spec.dirichlet_alpha, part_rng)

    noise_rng = _rng(spec.seed, "noise")
    noisy_labels = true_labels.copy()
    noise_types = ["none"] * spec.num_clients
    if spec.noise != "none":
        num_noisy = int(round(spec.noisy_client_fraction * spec.num_clients))
        noisy_clients = np.sort(noise_rng.choice(spec.num_clients, size=num_noisy, replace=False))
        rates = noise_rng.uniform(spec.noise_low, spec.noise_high, size=spec.num_clients)
        kinds = noise_rng.choice(["symmetric", "pair"], size=spec.num_clients)
        for k in noisy_clients:
            kind = str(kinds[k]) if spec.noise == "mixed" else spec.noise
            ids = clients[k]
            if kind == "symmetric":
                noisy_labels[ids] = symmetric_noise(true_labels[ids], rates[k], noise_rng, NUM_CLASSES)
            else:
                noisy_labels[ids] = pair_noise(true_labels[ids], rates[k], noise_rng)
            noise_types[k] = kind
    client_val = []
    if spec.client_val_fraction > 0:  # after the noise: a client's validation labels are as noisy as its own
        split_rng = _rng(spec.seed, "client-validation")
        for k, ids in enumerate(clients):
            held = split_rng.permutation(len(ids))[: int(round(spec.client_val_fraction * len(ids)))]
            mask = np.zeros(len(ids), bool)
            mask[held] = True
            clients[k], client_val = ids[~mask], [*client_val, ids[mask]]
    return Federation(
        spec=spec,
        images=pool_images,
        true_labels=true_labels,
        noisy_labels=noisy_labels,
        client_samples=clients,
        noise_types=noise_types,
        val_images=images[val_ids],
        val_labels=labels[val_ids].astype(np.int64),
        client_val_samples=client_val,
    )


@lru_cache(maxsize=4)
def fashion_mnist_federation(spec: FederationSpec) -> Federation:
    """:func:`build_federation` over the Fashion-MNIST training split (cached per spec and process)."""
    from zoo.common.datasets import fashion_mnist

    images, labels = fashion_mnist("train")
    return build_federation(spec, images, labels)
