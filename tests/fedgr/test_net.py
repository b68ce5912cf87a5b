"""The SmallCNN's fast pooling (issue 31, fit speed) is exact: the same numbers as Conv-ReLU-MaxPool2d(2).

The reference is the original network: the same parameters in ``nn.Sequential`` order Conv, ReLU,
``nn.MaxPool2d(2)``. Forward values, gradients and whole client rounds must agree bit for bit (torch.equal).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import zoo.fedgr.client as client_module
from zoo.fedgr.client import ClientTask, ClientTrainer, make_trainer, task_seed
from zoo.fedgr.config import FedGRConfig, LocalConfig, RunConfig
from zoo.fedgr.federation import ClientData
from zoo.fedgr.net import MaxPool2x2, SmallCNN, seeded_model
from zoo.fedgr.server import FedAvgServer


class ReferenceCNN(SmallCNN):
    """The network before the speed-up: Conv-ReLU-MaxPool2d(2) twice (same parameter names)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        f = self.features
        self.features = nn.Sequential(f[0], nn.ReLU(), nn.MaxPool2d(2), f[3], nn.ReLU(), nn.MaxPool2d(2), *f[6:])


def _tied(shape, seed=0) -> torch.Tensor:
    """Values on a coarse grid with constant regions, so that pooling windows hold ties (as image backgrounds do)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-3, 4, shape, generator=g).float() / 4
    x[..., : shape[-2] // 3, :] = 0.25
    return x


@pytest.mark.parametrize("shape", [(4, 16, 28, 28), (3, 5, 14, 14), (2, 3, 7, 9)])
def test_pooling_equals_maxpool2d_with_ties(shape):
    x = _tied(shape)
    grad = torch.randn(shape[0], shape[1], shape[2] // 2, shape[3] // 2, generator=torch.Generator().manual_seed(1))
    ours, ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    out, expected = MaxPool2x2()(ours), F.max_pool2d(ref, 2)
    out.backward(grad)
    expected.backward(grad)
    assert out.is_contiguous()
    assert torch.equal(out, expected)
    assert torch.equal(ours.grad, ref.grad)  # the gradient goes to the same (first) maximum of each window
    with torch.no_grad():
        assert torch.equal(MaxPool2x2()(x), expected)


def test_small_cnn_equals_the_conv_relu_pool_network():
    model = seeded_model(3)
    reference = ReferenceCNN()
    reference.load_state_dict(model.state_dict())
    assert list(model.state_dict()) == list(reference.state_dict())  # checkpoints load either way
    images = (_tied((6, 1, 28, 28), seed=2).clamp(0, 1) * 255).to(torch.uint8)
    labels = torch.arange(6) % 10
    outputs = []
    for net in (model, reference):
        logits, embedding = net(images, return_embedding=True)
        (F.cross_entropy(logits, labels) + embedding.square().mean()).backward()
        outputs.append([logits, embedding, *(p.grad for p in net.parameters())])
    assert all(torch.equal(a, b) for a, b in zip(*outputs))


@pytest.mark.parametrize("method", ["fedavg", "coteaching", "fedgr"])
def test_a_client_round_is_unchanged_by_the_speed_up(method, monkeypatch):
    """A whole local round (weak/strong views, EMA teacher, L_reg, L_ema, SGD with momentum) gives the same
    weights and client state as with the reference network and the per-parameter SGD loop."""
    rng = np.random.default_rng(0)
    data = ClientData(0, np.arange(40), rng.integers(0, 256, (40, 28, 28), dtype=np.uint8), rng.integers(0, 10, 40))
    fedgr = FedGRConfig(sniff_rounds=1, soft_silent_round=1)  # round 2: sieved, distilled, regularised
    run = RunConfig(method=method, clients_per_round=1, local=LocalConfig(epochs=2, batch_size=8), fedgr=fedgr)
    global_state = FedAvgServer(run, num_clients=1).global_state
    clean = rng.uniform(0, 1, 40)
    task = ClientTask(0, 2, task_seed(0, 2, 0), upload_losses=True, clean_probability=clean, noise_estimate=0.4)
    fast_update, fast_state = make_trainer(data, run).fit(global_state, task, None)

    def loop_sgd(self, model):
        local = self.config.local
        return torch.optim.SGD(
            model.parameters(), lr=local.lr, momentum=local.momentum, weight_decay=local.weight_decay, foreach=False
        )

    monkeypatch.setattr(client_module, "SmallCNN", ReferenceCNN)
    monkeypatch.setattr(ClientTrainer, "_optimizer", loop_sgd)
    reference = make_trainer(data, run)
    assert isinstance(reference.model.features[2], nn.MaxPool2d)
    ref_update, ref_state = reference.fit(global_state, task, None)
    assert fast_update.state.keys() == ref_update.state.keys()
    assert all(torch.equal(fast_update.state[k], ref_update.state[k]) for k in ref_update.state)
    assert fast_state.keys() == ref_state.keys()
    assert all(torch.equal(fast_state[k], ref_state[k]) for k in ref_state)
    assert fast_update.metrics == ref_update.metrics


def test_scoring_in_chunks_gives_the_same_logits():
    model = seeded_model(0).eval()
    images = np.random.default_rng(0).integers(0, 256, (700, 28, 28), dtype=np.uint8)
    with torch.no_grad():
        whole = model(torch.from_numpy(images))
        chunked = torch.cat([model(torch.from_numpy(c)) for c in np.array_split(images, [250, 500])])
    assert torch.equal(whole, chunked)


def test_round_scoring_is_the_predict_path():
    """The per-round test curve and ``zoo eval``'s accuracy use one path: the last curve point is the final score."""
    from zoo.fedgr.module import SCORE_CHUNK, FedGRModule

    module = FedGRModule(num_clients=2, samples_per_client=20)
    module.model.load_state_dict(seeded_model(0).state_dict())
    images = np.random.default_rng(1).integers(0, 256, (600, 28, 28), dtype=np.uint8)
    with torch.no_grad():
        logits = module.model.eval()(torch.from_numpy(images))
    labels = np.random.default_rng(2).integers(0, 10, 600)
    assert torch.equal(module.predict(images, batch_size=SCORE_CHUNK), logits.argmax(1))
    assert module._score(images, labels) == float((logits.argmax(1).numpy() == labels).mean())
