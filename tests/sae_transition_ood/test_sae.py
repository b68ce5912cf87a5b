"""TopK SAEs: top-K sets, normalisation, training on synthetic sparse data, shape errors, SAELens parity."""

import numpy as np
import pytest
import torch

from zoo.sae_transition_ood.detector import raw_top_indices
from zoo.sae_transition_ood.sae import SAEStack, sae_quality, train_saes


def test_topk_sets_have_exactly_k_members():
    torch.manual_seed(0)
    stack = SAEStack(3, 16, 64, 8)
    indices = stack.top_indices(torch.randn(50, 3, 16), 5)
    assert indices.shape == (50, 3, 5) and indices.dtype == np.int16
    assert all(len(set(row)) == 5 for row in indices.reshape(-1, 5))
    raw = raw_top_indices(np.random.default_rng(0).normal(size=(20, 3, 16)), np.zeros((3, 16)), np.ones(3), 4)
    assert raw.shape == (20, 3, 4) and all(len(set(row)) == 4 for row in raw.reshape(-1, 4))


def test_top_k_above_k_sae_raises():
    with pytest.raises(ValueError, match="top-K"):
        SAEStack(2, 8, 32, 4).top_indices(torch.randn(3, 2, 8), 5)


@pytest.mark.parametrize("shape", [(4, 3, 16), (4, 2, 15), (2, 16)])
def test_wrong_layer_count_or_width_raises(shape):
    with pytest.raises(ValueError, match="2 layers of width 16"):
        SAEStack(2, 16, 32, 4).top_indices(torch.randn(*shape), 2)


def test_normaliser_gives_unit_mean_square_per_dimension():
    states = torch.randn(2000, 2, 8) * torch.tensor([1.0, 30.0])[:, None] + 5.0
    stack = SAEStack(2, 8, 16, 2)
    stack.fit_normaliser(states)
    x = stack.normalise(states)
    assert torch.allclose(x.pow(2).sum(-1).mean(0), torch.tensor([8.0, 8.0]), rtol=1e-4)
    assert torch.allclose(x.mean(0), torch.zeros(2, 8), atol=1e-4)


def test_sae_learns_a_sparse_dictionary():
    # data made of 4-sparse combinations of 32 unit atoms in 16-d: a TopK SAE with k = 4 must fit it well
    generator = torch.Generator().manual_seed(0)
    atoms = torch.nn.functional.normalize(torch.randn(32, 16, generator=generator), dim=1)
    codes = torch.zeros(2000, 32)
    codes.scatter_(1, torch.rand(2000, 32, generator=generator).topk(4, dim=1).indices, 1.0)
    codes *= torch.rand(2000, 32, generator=generator) + 0.5
    states = torch.stack([codes @ atoms, codes @ atoms], dim=1)
    stack = SAEStack(2, 16, 64, 4, tied=False)
    quality = train_saes(stack, states, epochs=20, batch_size=64, lr=1e-2, dead_after=2000, seed=0)
    assert max(quality["fvu"]) < 0.2
    assert quality["fvu"] == pytest.approx(sae_quality(stack, states)["fvu"])
    assert max(quality["dead_fraction"]) < 0.2


def test_parity_with_sae_lens(tmp_path):
    """Our encode/decode equals SAELens' on the weights written by export_sae_lens."""
    sae_lens = pytest.importorskip("sae_lens", reason="sae-lens is not installed (its footprint: see module.py)")
    from zoo.sae_transition_ood.module import SAETransitionOODModule

    module = SAETransitionOODModule(features=64, k_sae=8, top_k=4, num_layers=2, width=16)
    with torch.no_grad():
        module.saes.norm_mean.normal_()
        module.saes.b_enc.normal_(std=0.1)
    folders = module.export_sae_lens(tmp_path)
    states = torch.randn(10, 2, 16)
    for layer, folder in enumerate(folders):
        sae = sae_lens.SAE.load_from_disk(str(folder), device="cpu")
        ours = module.saes.encode(module.saes.normalise(states))[:, layer]
        torch.testing.assert_close(sae.encode(states[:, layer]), ours, rtol=1e-4, atol=1e-4)
        recon = module.saes.decode(module.saes.encode(module.saes.normalise(states)))[:, layer]
        raw = recon * module.saes.norm_scale[layer] + module.saes.norm_mean[layer]
        torch.testing.assert_close(sae.decode(sae.encode(states[:, layer])), raw, rtol=1e-4, atol=1e-4)
