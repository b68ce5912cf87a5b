"""Server side of FedGR and of the baselines (plain torch / numpy, no Lightning, no Flower).

A server strategy owns the global weights and the server state. Each round it is asked for the round's
tasks (:meth:`FedAvgServer.configure_round`: which clients, with which instructions) and then given the
clients' updates (:meth:`FedAvgServer.aggregate`). The in-process loop (:func:`run_round`, used by the
Lightning module) and the Flower strategy (:mod:`zoo.fedgr.flower`) drive the same object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from zoo.fedgr.client import PEER_PREFIX, ClientTask, ClientTrainer, ClientUpdate, State, task_seed
from zoo.fedgr.config import RunConfig
from zoo.fedgr.net import seeded_model
from zoo.fedgr.sieve import LossGMM, fit_loss_gmm, noise_estimate


def weighted_average(states: Sequence[State], weights: Sequence[float]) -> State:
    """FedAvg: the average of state dicts weighted by ``weights`` (e.g. client data sizes).

    Raises:
        ValueError: If there are no states, the weights do not match, or their sum is not positive.
    """
    if not states or len(states) != len(weights):
        raise ValueError(f"need one weight per state, got {len(states)} states and {len(weights)} weights")
    total = float(sum(weights))
    if total <= 0:
        raise ValueError(f"the aggregation weights must sum to a positive number, got {total}")
    averaged = {}
    for key in states[0]:
        reference = states[0][key]
        if not reference.is_floating_point():
            averaged[key] = reference.clone()  # e.g. integer counters: keep the first client's
            continue
        stacked = torch.stack([s[key].to(reference) for s in states])
        coefficients = torch.tensor([w / total for w in weights], dtype=reference.dtype, device=reference.device)
        averaged[key] = torch.tensordot(coefficients, stacked, dims=1)
    return averaged


class FedAvgServer:
    """FedAvg (McMahan et al., 2017): uniform client sampling, aggregation weighted by data size.

    Args:
        config: The run.
        num_clients: Number of clients K.
        device: Where the global weights live.
    """

    def __init__(self, config: RunConfig, num_clients: int, device: str | torch.device = "cpu") -> None:
        if config.clients_per_round > num_clients:
            raise ValueError(
                f"clients_per_round={config.clients_per_round} exceeds the {num_clients} clients of the federation"
            )
        self.config = config
        self.num_clients = num_clients
        self.device = torch.device(device)
        self.global_state = self.initial_state()

    def initial_state(self) -> State:
        """The round-0 global weights, from the run's seed (co-teaching also gets a peer network)."""
        seed, classes = self.config.seed, self.config.num_classes
        state = {k: v.to(self.device) for k, v in seeded_model(seed, classes).state_dict().items()}
        if self.config.method == "coteaching":
            peer = seeded_model(seed + 10_007, classes).state_dict()
            state.update({PEER_PREFIX + k: v.to(self.device) for k, v in peer.items()})
        return state

    def sample_clients(self, round_idx: int) -> list[int]:
        """Clients of round ``round_idx``: ``clients_per_round`` drawn uniformly without replacement."""
        rng = np.random.default_rng([self.config.seed, round_idx, 1])
        chosen = rng.choice(self.num_clients, size=self.config.clients_per_round, replace=False)
        return sorted(int(k) for k in chosen)

    def configure_round(self, round_idx: int) -> list[ClientTask]:
        """The tasks of round ``round_idx`` (1-based), one per sampled client."""
        return [self.task(round_idx, k) for k in self.sample_clients(round_idx)]

    def task(self, round_idx: int, client_id: int) -> ClientTask:
        return ClientTask(
            client_id=client_id, round_idx=round_idx, seed=task_seed(self.config.seed, round_idx, client_id)
        )

    def aggregate(self, round_idx: int, updates: Sequence[ClientUpdate]) -> State:
        """Average the clients' weights into the new global weights (and return them)."""
        if not updates:
            raise ValueError(f"round {round_idx}: no client update to aggregate")
        states = [{k: v.to(self.device) for k, v in u.state.items()} for u in updates]
        self.global_state = weighted_average(states, [u.num_examples for u in updates])
        return self.global_state

    def summary(self) -> dict:
        """Server facts for logs and config.json."""
        return {"method": self.config.method, "num_clients": self.num_clients}


class FedGRServer(FedAvgServer):
    """FedGR's server: the sniffing / warm-up / uniform sampling schedule and the GMM sieving.

    * Rounds ``1..sniff_rounds``: clients ``{m(r-1), ..., m(r-1)+m-1} mod K`` (every client visited equally).
    * The next ``warmup_rounds``: ``m`` clients without replacement with probability ∝ 1 − ε̂_k.
    * Afterwards: uniform.

    In every round up to ``sniff_rounds + warmup_rounds`` (all rounds if ``freeze_sniffing`` is off) the
    sampled clients upload the running-mean losses of their samples; the server fits a 2-component GMM on
    the round's uploads and updates those clients' clean posteriors c_i and noise estimates ε̂_k. A split that
    fails the separation test (:meth:`~zoo.fedgr.sieve.LossGMM.is_separated`) flags nothing: c_i = 1, ε̂_k = 0.

    Args:
        config: The run.
        num_clients: Number of clients K.
        device: Where the global weights live.
    """

    def __init__(self, config: RunConfig, num_clients: int, device: str | torch.device = "cpu") -> None:
        super().__init__(config, num_clients, device)
        self.clean_probability: dict[int, np.ndarray] = {}
        self.sample_ids: dict[int, np.ndarray] = {}
        self.noise_estimates: dict[int, float] = {}
        self.gmm: LossGMM | None = None
        self.separated = False
        self.last_sieve_round = 0

    def sample_clients(self, round_idx: int) -> list[int]:
        cfg, m, k = self.config.fedgr, self.config.clients_per_round, self.num_clients
        if round_idx <= cfg.sniff_rounds:
            return sorted({(m * (round_idx - 1) + i) % k for i in range(m)})
        if round_idx <= cfg.sniff_rounds + cfg.warmup_rounds:
            rng = np.random.default_rng([self.config.seed, round_idx, 2])
            clean_share = np.array([1.0 - self.noise_estimates.get(c, 0.0) for c in range(k)]) + 1e-6
            chosen = rng.choice(k, size=m, replace=False, p=clean_share / clean_share.sum())
            return sorted(int(c) for c in chosen)
        return super().sample_clients(round_idx)

    def task(self, round_idx: int, client_id: int) -> ClientTask:
        task = super().task(round_idx, client_id)
        task.upload_losses = self.config.fedgr.sieve and round_idx <= self.config.fedgr.sieve_until
        task.clean_probability = self.clean_probability.get(client_id)
        task.noise_estimate = self.noise_estimates.get(client_id)
        return task

    def aggregate(self, round_idx: int, updates: Sequence[ClientUpdate]) -> State:
        state = super().aggregate(round_idx, updates)
        if round_idx > self.config.fedgr.sieve_until:
            return state
        uploads = [u for u in updates if u.loss_mean is not None]
        if uploads:
            self.sieve(round_idx, uploads)
        for update in updates:  # the privacy variant: clients sieve themselves and report only ε̂_k
            if "noise_estimate" in update.metrics:
                self.noise_estimates[update.client_id] = float(update.metrics["noise_estimate"])
                self.last_sieve_round = round_idx
        return state

    def sieve(self, round_idx: int, uploads: Sequence[ClientUpdate]) -> None:
        """Fit the GMM on this round's uploaded losses; update c_i and ε̂_k of the uploading clients."""
        cfg = self.config.fedgr
        values = np.concatenate([u.loss_mean for u in uploads])
        self.gmm = fit_loss_gmm(
            values, max_iter=cfg.gmm_max_iter, tol=cfg.gmm_tol, reg_covar=cfg.gmm_reg_covar, seed=self.config.seed
        )
        self.separated = self.gmm.is_separated(cfg.min_separation, cfg.min_noisy_weight)
        for update in uploads:
            # no real split (the separation test fails): every sample of the round counts as clean
            clean = self.gmm.clean_probability(update.loss_mean) if self.separated else np.ones(len(update.loss_mean))
            self.clean_probability[update.client_id] = clean
            self.sample_ids[update.client_id] = np.asarray(update.sample_ids)
            self.noise_estimates[update.client_id] = noise_estimate(clean, cfg.clean_threshold)
        self.last_sieve_round = round_idx

    def flat_clean_probability(self, num_samples: int) -> np.ndarray:
        """c_i of every sample of the federation by sample id (1.0 for samples never sieved)."""
        flat = np.ones(num_samples)
        for client, ids in self.sample_ids.items():
            flat[ids] = self.clean_probability[client]
        return flat

    def summary(self) -> dict:
        return {
            **super().summary(),
            "noise_estimates": {int(k): round(float(v), 4) for k, v in sorted(self.noise_estimates.items())},
            "gmm": self.gmm.as_dict() if self.gmm is not None else None,
            "gmm_separated": self.separated,
            "last_sieve_round": self.last_sieve_round,
        }


SERVERS: dict[str, type[FedAvgServer]] = {"fedgr": FedGRServer}


def make_server(config: RunConfig, num_clients: int, device: str | torch.device = "cpu") -> FedAvgServer:
    """The server strategy of ``config.method`` (the baselines all use FedAvg's)."""
    return SERVERS.get(config.method, FedAvgServer)(config, num_clients, device)


def run_round(
    server: FedAvgServer,
    trainers: Mapping[int, ClientTrainer],
    client_states: dict[int, State],
    round_idx: int,
) -> list[ClientUpdate]:
    """One communication round in this process: configure, train each sampled client, aggregate.

    Args:
        server: The server strategy (its ``global_state`` is updated).
        trainers: Client trainers by client id.
        client_states: Client-side state by client id (updated in place).
        round_idx: Round number (1-based).

    Returns:
        The clients' updates.
    """
    updates = []
    for task in server.configure_round(round_idx):
        update, client_states[task.client_id] = trainers[task.client_id].fit(
            server.global_state, task, client_states.get(task.client_id)
        )
        updates.append(update)
    server.aggregate(round_idx, updates)
    return updates
