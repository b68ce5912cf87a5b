"""The Lightning pair: a shared, deterministic PCA encoder, seeded sampling and clear errors."""

import pytest
import torch

from zoo.promise.data import ProMiSEDataModule
from zoo.promise.module import ProMiSEModule


@pytest.fixture(scope="module")
def datamodule():
    data = ProMiSEDataModule()
    data.setup()
    return data


def _module_with_encoder(data) -> ProMiSEModule:
    torch.manual_seed(0)
    module = ProMiSEModule(timesteps=10)
    for key, value in data.encoder().items():
        getattr(module, key).copy_(value)
    return module.eval()


def test_the_encoder_is_bit_identical_across_exposures_and_seeds(datamodule):
    """Every DDPM arm and every exposure of the dose-response decodes with the same PCA encoder."""
    other = ProMiSEDataModule(exposure=0.5, seed=7)
    other.setup()
    for key in ("pca_mean", "pca_basis", "pca_scale", "states"):
        assert torch.equal(datamodule.encoder()[key], other.encoder()[key]), key
    assert not torch.equal(datamodule.encoder()["state_frequency"], other.encoder()["state_frequency"])


def test_exposure_and_context_tags(datamodule):
    frequency = datamodule.state_frequency  # (open, closed)
    assert float(frequency[1]) == pytest.approx(0.85) and float(frequency[0]) == pytest.approx(0.15)
    ligand = datamodule.contexts == 1
    assert 0.3 < float(ligand.double().mean()) < 0.55  # about half of the 85% closed-half items
    assert datamodule.coefficients.shape == (400, 8)


def test_independent_tagging_tags_both_halves_and_keeps_the_exposure(datamodule):
    """The validation study's variant: same items and encoder, tags independent of the state."""
    other = ProMiSEDataModule(tagging="independent")
    other.setup()
    assert (other.items == datamodule.items).all() and torch.equal(other.coefficients, datamodule.coefficients)
    assert torch.equal(other.state_frequency, datamodule.state_frequency)
    # The last 15% of the 400 items are the open-half draws: never ligand under the spec's tagging.
    assert not (datamodule.contexts[-60:] == 1).any() and (other.contexts[-60:] == 1).any()
    assert 0.35 < float((other.contexts == 1).double().mean()) < 0.65
    with pytest.raises(ValueError, match="tagging must be one of state, independent"):
        ProMiSEDataModule(tagging="random")


def test_sampling_with_a_fixed_seed_is_deterministic(datamodule):
    module = _module_with_encoder(datamodule)
    first = module.ensemble("apo", 4, seed=3)
    assert first.shape == (4, 214, 3)
    assert torch.equal(first, module.ensemble("apo", 4, seed=3))
    assert torch.equal(module.ensemble("ligand", 4, seed=3, guidance=3.0, temperature=0.7, reweight=False),
                       module.ensemble("ligand", 4, seed=3, guidance=3.0, temperature=0.7, reweight=False))  # fmt: skip
    assert not torch.equal(first, module.ensemble("apo", 4, seed=4))


def test_module_errors(datamodule):
    with pytest.raises(RuntimeError, match="no PCA encoder"):
        ProMiSEModule(timesteps=10).ensemble("apo", 2, seed=0)
    module = _module_with_encoder(datamodule)
    with pytest.raises(ValueError, match="unknown context 'holo'"):
        module.ensemble("holo", 2, seed=0)
    with pytest.raises(ValueError, match="temperature"):
        ProMiSEModule(temperature=0.0)
    with pytest.raises(ValueError, match="exposure"):
        ProMiSEDataModule(exposure=1.0)
    with pytest.raises(ValueError, match="200 residues"):
        module.encode(torch.zeros(2, 200, 3))
