"""The PCA encoder, the DDPM's sampler and the importance resampling, without a trained checkpoint."""

import pytest
import torch

from zoo.promise import ddpm
from zoo.promise.metrics import kabsch_rmsd


def test_pca_round_trip_and_whitening(adk):
    frames = torch.as_tensor(adk["trajectories"]["dims1"])
    pca = ddpm.fit_pca(frames, 8)
    coefficients = ddpm.encode(frames, pca)
    assert torch.allclose(coefficients.std(dim=0), torch.ones(8, dtype=torch.float64), atol=0.02)
    assert torch.allclose(pca["basis"] @ pca["basis"].T, torch.eye(8, dtype=torch.float64), atol=1e-10)
    # 8 components reconstruct the DIMS frames to well under the coverage radius.
    assert float(kabsch_rmsd(ddpm.decode(coefficients, pca), frames).max()) < 1.0
    with pytest.raises(ValueError, match="n_components"):
        ddpm.fit_pca(frames[:5], 8)


def test_schedule_is_the_cosine_one():
    schedule = ddpm.cosine_schedule(100)
    assert schedule["betas"].shape == (100,) and float(schedule["betas"].max()) <= 0.999
    assert float(schedule["alpha_bars"][0]) > 0.999 and float(schedule["alpha_bars"][-1]) < 1e-3
    assert torch.all(schedule["alpha_bars"][1:] < schedule["alpha_bars"][:-1])


def test_sampling_with_a_fixed_seed_is_deterministic():
    torch.manual_seed(0)
    net = ddpm.EpsilonMLP(8, 16, 32)
    schedule = ddpm.cosine_schedule(20)
    draws = [
        ddpm.sample(net, 6, 0, schedule, 8, guidance=1.0, temperature=0.7, generator=torch.Generator().manual_seed(3))
        for _ in range(2)
    ]
    assert torch.equal(draws[0], draws[1])
    other = ddpm.sample(
        net, 6, 0, schedule, 8, guidance=1.0, temperature=0.7, generator=torch.Generator().manual_seed(4)
    )
    assert not torch.equal(draws[0], other)
    with pytest.raises(ValueError, match="temperature"):
        ddpm.sample(net, 2, 0, schedule, 8, temperature=0.0)


def test_importance_resampling_undoes_the_exposure():
    # A pool with 15% of samples in state 0 (open) and 85% in state 1 (closed), as trained.
    states = torch.tensor([0] * 15 + [1] * 85)
    frequency = torch.tensor([0.15, 0.85], dtype=torch.float64)
    generator = torch.Generator().manual_seed(0)
    kept = torch.cat([states[ddpm.importance_resample(states, frequency, 10, generator)] for _ in range(400)])
    assert float((kept == 0).double().mean()) == pytest.approx(0.5, abs=0.08)  # near 50/50, not 15/85
    with pytest.raises(ValueError, match="pool"):
        ddpm.importance_resample(states[:5], frequency, 10)


def test_unknown_context():
    with pytest.raises(ValueError, match="unknown context 'holo'"):
        ddpm.context_id("holo")
