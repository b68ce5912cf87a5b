"""The Flower engine: the same server strategy and client trainers, over Flower messages.

The default test runs a 2-client FedGR federation for 2 rounds over an in-process Grid that serialises
every message through Flower's protobuf codec, and checks that it gives bit-identical global weights and
sieving state to the in-process loop. The Ray-backed simulation runtime is exercised by a slow test.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("flwr")

from zoo.fedgr.client import ClientTask, ClientUpdate, make_trainer  # noqa: E402
from zoo.fedgr.config import FedGRConfig, LocalConfig, RunConfig  # noqa: E402
from zoo.fedgr.federation import FederationSpec, fashion_mnist_federation  # noqa: E402
from zoo.fedgr.flower import (  # noqa: E402
    content_to_task,
    content_to_update,
    run_loopback,
    task_to_content,
    update_to_content,
)
from zoo.fedgr.net import seeded_model  # noqa: E402
from zoo.fedgr.server import make_server, run_round  # noqa: E402

SPEC = FederationSpec(num_clients=2, samples_per_client=24, val_size=0, seed=1)
RUN = RunConfig(
    method="fedgr",
    clients_per_round=2,
    seed=1,
    local=LocalConfig(epochs=1, batch_size=8),
    fedgr=FedGRConfig(sniff_rounds=1, warmup_rounds=1, soft_silent_round=2),  # round 2 uses all three modules
)


def _in_process(rounds):
    federation = fashion_mnist_federation(SPEC)
    server = make_server(RUN, SPEC.num_clients)
    trainers = {k: make_trainer(federation.client(k), RUN) for k in range(SPEC.num_clients)}
    states = {}
    for round_idx in range(1, rounds + 1):
        run_round(server, trainers, states, round_idx)
    return server


def test_flower_round_trip_with_two_clients_matches_the_in_process_loop():
    expected = _in_process(2)
    flower = run_loopback(RUN, SPEC, num_rounds=2)
    assert flower.global_state.keys() == expected.global_state.keys()
    for key, value in expected.global_state.items():
        assert torch.equal(flower.global_state[key], value), key
    assert flower.server.noise_estimates == expected.noise_estimates
    for client, clean in expected.clean_probability.items():
        np.testing.assert_array_equal(flower.server.clean_probability[client], clean)
    assert sorted(flower.history) == [1, 2] and flower.history[2]["num-examples"] == 48


def test_task_and_update_survive_the_record_codec():
    task = ClientTask(3, 7, 12345, upload_losses=True, clean_probability=np.array([0.2, 0.9]), noise_estimate=0.5)
    state = seeded_model(0).state_dict()
    decoded, weights, run = content_to_task(task_to_content(task, state, RUN))
    assert run == RUN and decoded.round_idx == 7 and decoded.seed == 12345 and decoded.noise_estimate == 0.5
    np.testing.assert_array_equal(decoded.clean_probability, task.clean_probability)
    assert all(torch.equal(weights[k], v) for k, v in state.items())
    update = ClientUpdate(3, state, 24, np.arange(2), np.array([0.1, 2.0]), {"loss": 1.5})
    back = content_to_update(update_to_content(update))
    assert (back.client_id, back.num_examples, back.metrics) == (3, 24, {"loss": 1.5})
    np.testing.assert_array_equal(back.loss_mean, update.loss_mean)


@pytest.mark.slow
def test_flower_simulation_runtime_matches_the_in_process_loop():
    from zoo.fedgr.flower import run_simulation

    expected = _in_process(2)
    flower = run_simulation(RUN, SPEC, num_rounds=2)
    for key, value in expected.global_state.items():
        assert torch.equal(flower.global_state[key], value), key


def test_privacy_variant_keeps_per_sample_losses_on_the_clients():
    run = RunConfig(
        method="fedgr",
        clients_per_round=2,
        seed=1,
        local=LocalConfig(epochs=1, batch_size=8),
        fedgr=FedGRConfig(sniff_rounds=1, warmup_rounds=0, client_sieve=True),
    )
    flower = run_loopback(run, SPEC, num_rounds=1)
    assert flower.server.sample_ids == {} and flower.server.clean_probability == {}
    assert sorted(flower.server.noise_estimates) == [0, 1]
    assert all(0.0 <= v <= 1.0 for v in flower.server.noise_estimates.values())
