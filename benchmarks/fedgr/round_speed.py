"""Speed of one federated round: the zoo's vectorised client trainer against a DataLoader pipeline.

Baseline (same process, same data, same model, same SGD): the usual per-sample pipeline, a
``torch.utils.data.DataLoader`` (batch 32, no workers) over a Dataset that applies torchvision v2
transforms image by image (random shift by padding + crop, horizontal flip). The zoo's trainer draws the
views of a whole client at once and slices mini-batches from tensors. Also reported: FedGR's round (three
extra forward passes per sample and the EMA updates) and the overhead of running that round through
Flower's message codec (``LoopbackGrid``) instead of in-process.

Run:  python benchmarks/fedgr/round_speed.py   (``--smoke``: 2 clients x 60 images, one repeat, in seconds)
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F


def dataloader_fedavg_round(clients, run) -> None:
    """The baseline: FedAvg local training of each client through a per-sample DataLoader."""
    from torch.utils.data import DataLoader, Dataset
    from torchvision.transforms import v2

    from zoo.fedgr.net import SmallCNN

    transform = v2.Compose([v2.RandomCrop(28, padding=2), v2.RandomHorizontalFlip()])

    class ClientDataset(Dataset):
        def __init__(self, data):
            self.images = torch.from_numpy(data.images).unsqueeze(1).float() / 255.0
            self.labels = torch.from_numpy(data.labels)

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, i):
            return transform(self.images[i]), self.labels[i]

    model = SmallCNN()
    for data in clients:
        loader = DataLoader(ClientDataset(data), batch_size=run.local.batch_size, shuffle=True)
        optimizer = torch.optim.SGD(model.parameters(), lr=run.local.lr, momentum=run.local.momentum)
        for _ in range(run.local.epochs):
            for x, y in loader:
                optimizer.zero_grad()
                F.cross_entropy(model(x), y).backward()
                optimizer.step()


def zoo_round(clients, run, round_idx: int = 1) -> None:
    from zoo.fedgr.client import make_trainer
    from zoo.fedgr.server import FedAvgServer

    server = FedAvgServer(run, num_clients=max(len(clients) * 2, run.clients_per_round))
    for data in clients:
        make_trainer(data, run).fit(server.global_state, server.task(round_idx, data.client_id))


def timed(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--smoke", action="store_true", help="2 clients x 60 images, one repeat: checks it runs")
    args = parser.parse_args()
    if args.smoke:
        args.repeats = 1
    if args.threads:
        torch.set_num_threads(args.threads)

    from zoo.fedgr.config import RunConfig
    from zoo.fedgr.federation import FederationSpec, fashion_mnist_federation

    spec = FederationSpec(num_clients=2, samples_per_client=60) if args.smoke else FederationSpec()
    federation = fashion_mnist_federation(spec)
    clients = [federation.client(k) for k in range(spec.num_clients if args.smoke else 5)]  # 5 clients x 600 images
    per_round = 2 if args.smoke else 5
    fedavg = RunConfig(method="fedavg", clients_per_round=per_round)
    fedgr = RunConfig(method="fedgr", clients_per_round=per_round)
    rows = {
        "FedAvg round, DataLoader + torchvision (baseline)": timed(
            lambda: dataloader_fedavg_round(clients, fedavg), args.repeats
        ),
        "FedAvg round, zoo vectorised trainer": timed(lambda: zoo_round(clients, fedavg), args.repeats),
        "FedGR round (sieving round 1), zoo": timed(lambda: zoo_round(clients, fedgr, 1), args.repeats),
        "FedGR round (all modules, round 16), zoo": timed(lambda: zoo_round(clients, fedgr, 16), args.repeats),
    }
    try:
        from zoo.fedgr.flower import run_loopback

        small = FederationSpec(num_clients=2, samples_per_client=60) if args.smoke else FederationSpec(num_clients=5)
        fedgr_all = fedgr
        rows["FedGR round 1 over Flower LoopbackGrid"] = timed(lambda: run_loopback(fedgr_all, small, 1), args.repeats)
    except ImportError:
        pass
    baseline = next(iter(rows.values()))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; best of {args.repeats}")
    for name, seconds in rows.items():
        print(f"{name:<55} {seconds:7.2f} s   x{baseline / seconds:5.2f} vs baseline")
    print(f"(numpy {np.__version__})")


if __name__ == "__main__":
    main()
