"""A DWP module on CIM layers: published to the (test) Hub and reloaded, it computes identically under the same
seeds; the ideal chip reproduces the digital network; the energy report favours CIM."""

from __future__ import annotations

import json

import pytest
import torch

import zoo
from zoo.dwp.module import DWPModule
from zoo.quant.cim import CIMConfig, PCMNoise, cim_layers, drift, energy_report, program

X = torch.randn(6, 1, 28, 28, generator=torch.Generator().manual_seed(0))


def _cim_module() -> DWPModule:
    torch.manual_seed(0)
    config = CIMConfig(dac_bits=7, adc_bits=9, adc_bound=10.0, noise=PCMNoise(g_max=20.0))
    return DWPModule(mode="dwp", backbone="mlp", channels=(48, 24), cim=config).eval()


def _simulate(module: DWPModule) -> torch.Tensor:
    program(module.net, seed=7)
    drift(module.net, 86400.0, seed=8)
    with torch.no_grad():
        return module(X)


@pytest.mark.hub
def test_cim_model_published_and_reloaded_gives_identical_outputs(tmp_path, hub):
    from huggingface_hub import HfApi, snapshot_download

    module = _cim_module()
    expected = _simulate(module)
    folder = zoo.save_pretrained(module, tmp_path / "export")
    config = json.loads((folder / "config.json").read_text())
    assert config["init_args"]["cim"]["adc_bits"] == 9 and config["init_args"]["cim"]["noise"]["g_max"] == 20.0
    api = HfApi()
    api.create_repo("icml26-zoo/dwp-cim-roundtrip", exist_ok=True)
    commit = api.upload_folder(repo_id="icml26-zoo/dwp-cim-roundtrip", folder_path=str(folder))
    local = snapshot_download("icml26-zoo/dwp-cim-roundtrip", revision=commit.oid, cache_dir=tmp_path / "cache")
    reloaded = zoo.load_folder(local)
    assert reloaded.hparams.cim == module.hparams.cim
    assert [name for name, _ in cim_layers(reloaded.net)] == [name for name, _ in cim_layers(module.net)]
    assert torch.equal(_simulate(reloaded), expected)


def test_ideal_chip_at_time_zero_equals_digital_accuracy():
    module = DWPModule(mode="standard", backbone="mlp", channels=(32,)).eval()
    with torch.no_grad():
        digital = module(X)
    chip = module.to_cim(CIMConfig(noise=None, dac_bits=None, adc_bits=None))
    program(chip.net, seed=0)
    drift(chip.net, 0.0)
    with torch.no_grad():
        assert torch.allclose(chip(X), digital, atol=1e-5)
        assert torch.equal(module(X), digital)  # the copy, not the module, was converted


def test_energy_of_the_published_architecture_favours_cim():
    module = DWPModule()
    report = energy_report(module.net.eval(), torch.zeros(1, 1, 28, 28))
    assert 0 < report["energy_cim_uJ"] < report["energy_digital_uJ"]
    assert report["totals"]["macs"] == sum(layer["macs"] for layer in report["layers"])
    assert len(report["layers"]) == len(module.perturbed_names)
