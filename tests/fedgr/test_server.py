"""Server strategies: FedAvg aggregation, FedGR's sampling schedule and sieving, and the trainers' determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zoo.fedgr.client import ClientUpdate, make_trainer
from zoo.fedgr.config import BaselineConfig, FedGRConfig, LocalConfig, RunConfig
from zoo.fedgr.federation import ClientData
from zoo.fedgr.net import seeded_model
from zoo.fedgr.server import FedAvgServer, FedGRServer, weighted_average
from zoo.fedgr.sieve import detection_f1


def test_fedavg_of_identical_client_models_is_that_model():
    state = seeded_model(0).state_dict()
    averaged = weighted_average([state, state, state], [600, 300, 100])
    assert all(torch.allclose(averaged[k], v, atol=1e-7) for k, v in state.items())


def test_fedavg_weights_by_client_size():
    averaged = weighted_average([{"w": torch.tensor([0.0])}, {"w": torch.tensor([4.0])}], [3, 1])
    assert averaged["w"].item() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="one weight per state"):
        weighted_average([{"w": torch.zeros(1)}], [1, 2])


def test_fedgr_schedule_sniffing_warmup_uniform():
    server = FedGRServer(RunConfig(fedgr=FedGRConfig(sniff_rounds=10, warmup_rounds=5)), num_clients=10)
    assert server.sample_clients(1) == [0, 1, 2, 3, 4]
    assert server.sample_clients(2) == [5, 6, 7, 8, 9]
    visits = np.bincount(np.concatenate([server.sample_clients(r) for r in range(1, 11)]), minlength=10)
    assert (visits == 5).all()  # every client sniffed 5 times
    server.noise_estimates = {k: (1.0 if k >= 5 else 0.2) for k in range(10)}
    for r in range(11, 16):  # warm-up: probability proportional to 1 - noise estimate
        assert server.sample_clients(r) == [0, 1, 2, 3, 4]
    assert len(set(server.sample_clients(16))) == 5  # uniform afterwards
    assert any(max(server.sample_clients(r)) >= 5 for r in range(16, 31))


def _upload(client, ids, losses):
    state = seeded_model(0).state_dict()
    return ClientUpdate(client, state, len(ids), sample_ids=np.array(ids), loss_mean=np.array(losses, float))


def test_sieving_updates_clean_posteriors_and_noise_estimates_then_freezes():
    server = FedGRServer(RunConfig(clients_per_round=2, fedgr=FedGRConfig(sniff_rounds=1, warmup_rounds=1)), 2)
    low, high = [0.1, 0.12, 0.15, 0.11], [2.0, 2.2, 0.13, 0.14]
    server.aggregate(1, [_upload(0, [0, 1, 2, 3], low), _upload(1, [4, 5, 6, 7], high)])
    assert server.noise_estimates == {0: 0.0, 1: 0.5}
    assert (server.clean_probability[1][:2] < 0.5).all() and (server.clean_probability[1][2:] > 0.5).all()
    task = server.task(2, 1)
    assert task.upload_losses and task.noise_estimate == 0.5 and len(task.clean_probability) == 4
    frozen_gmm = server.gmm
    assert not server.task(3, 1).upload_losses  # after sniffing + warm-up the sieve is frozen
    server.aggregate(3, [_upload(0, [0, 1, 2, 3], high)])
    assert server.gmm is frozen_gmm and server.noise_estimates[0] == 0.0
    np.testing.assert_array_equal(server.flat_clean_probability(8) < 0.5, [0, 0, 0, 0, 1, 1, 0, 0])


def test_too_many_clients_per_round_is_refused():
    with pytest.raises(ValueError, match="exceeds the 3 clients"):
        FedAvgServer(RunConfig(clients_per_round=5), num_clients=3)
    with pytest.raises(ValueError, match="method must be one of"):
        RunConfig(method="scaffold")


def _client(n=20):
    rng = np.random.default_rng(0)
    return ClientData(0, np.arange(n), rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), rng.integers(0, 10, n))


@pytest.mark.parametrize("method", ["fedavg", "fedprox", "coteaching", "fedgr"])
def test_a_client_round_is_a_pure_function_of_the_task(method):
    run = RunConfig(method=method, clients_per_round=1, local=LocalConfig(epochs=1, batch_size=8))
    server = FedAvgServer(run, num_clients=1)
    trainer = make_trainer(_client(), run)
    task = server.task(1, 0)
    first, _ = trainer.fit(server.global_state, task, None)
    second, _ = make_trainer(_client(), run).fit(server.global_state, task, None)
    assert first.state.keys() == server.global_state.keys()
    assert all(torch.equal(first.state[k], second.state[k]) for k in first.state)
    assert not all(torch.equal(first.state[k], server.global_state[k]) for k in first.state)


def test_fedprox_with_zero_mu_is_fedavg():
    base = dict(clients_per_round=1, local=LocalConfig(epochs=1, batch_size=8))
    fedavg, fedprox = RunConfig("fedavg", **base), RunConfig("fedprox", baselines=BaselineConfig(prox_mu=0.0), **base)
    server = FedAvgServer(fedavg, num_clients=1)
    task = server.task(1, 0)
    a, _ = make_trainer(_client(), fedavg).fit(server.global_state, task)
    b, _ = make_trainer(_client(), fedprox).fit(server.global_state, task)
    assert all(torch.allclose(a.state[k], b.state[k], atol=1e-6) for k in a.state)


def _clean_and_noisy_losses(rng, n_clients=5, per_client=600, noise_rates=None):
    """Per client, the global model's losses on clean and on wrong labels; the uploads and which are noisy.

    Clean labels: a model trained on clean clients is confident, its losses a skewed mass near 0 with a tail
    (Gamma(0.3, 1.5); measured on FedAvg at round 10: median 0.14, 90% quantile 1.5). With noisy clients the
    model is less sure of the clean labels too (Gamma(2, 0.15)) and the wrong labels form a mode near 2.3.
    """
    uploads, is_noisy = [], []
    for k in range(n_clients):
        rate = 0.0 if noise_rates is None else noise_rates[k]
        noisy = rng.random(per_client) < rate
        clean = rng.gamma(0.3, 1.5, per_client) if noise_rates is None else rng.gamma(2.0, 0.15, per_client)
        losses = np.where(noisy, rng.normal(2.3, 0.5, per_client).clip(0.5), clean)
        uploads.append(_upload(k, list(range(k * per_client, (k + 1) * per_client)), losses))
        is_noisy.append(noisy)
    return uploads, np.concatenate(is_noisy)


def test_the_sieve_flags_nothing_on_clean_clients():
    """Issue 31: the two components fitted to clean losses overlap (Ashman's D < 2): nothing is flagged."""
    server = FedGRServer(RunConfig(fedgr=FedGRConfig(sniff_rounds=1, warmup_rounds=0)), 5)
    uploads, _ = _clean_and_noisy_losses(np.random.default_rng(0))
    server.aggregate(1, uploads)
    assert server.gmm.separation < 2.0 and not server.separated
    assert server.noise_estimates == {k: 0.0 for k in range(5)}
    assert all((c == 1.0).all() for c in server.clean_probability.values())
    # the dev code's sieve (no separation test) called 30-40% of these clean samples noisy
    unchecked = FedGRServer(RunConfig(fedgr=FedGRConfig(sniff_rounds=1, warmup_rounds=0, min_separation=0.0)), 5)
    unchecked.aggregate(1, uploads)
    assert min(unchecked.noise_estimates.values()) > 0.2
    # a few far outliers are no noisy component either (its weight is under min_noisy_weight)
    outliers = [_upload(0, list(range(600)), np.r_[np.random.default_rng(1).gamma(0.3, 1.5, 598), 40.0, 41.0])]
    server.aggregate(1, outliers)
    assert server.noise_estimates[0] == 0.0


def test_the_sieve_recovers_the_noisy_set_of_mixed_clients():
    server = FedGRServer(RunConfig(fedgr=FedGRConfig(sniff_rounds=1, warmup_rounds=0)), 5)
    rates = [0.0, 0.2, 0.4, 0.5, 0.7]
    uploads, is_noisy = _clean_and_noisy_losses(np.random.default_rng(0), noise_rates=rates)
    server.aggregate(1, uploads)
    assert server.separated and server.gmm.separation > 2.0
    flagged = server.flat_clean_probability(3000) < 0.5
    assert detection_f1(flagged, is_noisy) > 0.95
    estimates = [server.noise_estimates[k] for k in range(5)]
    np.testing.assert_allclose(estimates, rates, atol=0.05)
    assert estimates[0] < 0.05  # the clean client among noisy ones is (almost) untouched
