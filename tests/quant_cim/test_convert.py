"""convert_to_cim / convert_from_cim, programming and drift of CIM layers, configs through JSON, clipping, energy."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from zoo.quant.cim import (
    CIMConfig,
    CIMConv2d,
    CIMLinear,
    EnergyModel,
    FqnToCIMConfig,
    PCMNoise,
    WeightClip,
    WeightPerturbation,
    cim_layers,
    clip_weights_,
    convert_from_cim,
    convert_to_cim,
    drift,
    energy_report,
    program,
    reset_programming,
)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 40, 3, padding=1)  # 27 rows: one tile; 40 columns
        self.wide = nn.Conv2d(40, 8, 3, padding=1, bias=False)  # 360 rows: two tiles of 28 channels at tile 256
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.head = nn.Linear(8 * 6 * 6, 5)

    def forward(self, x):
        h = torch.relu(self.wide(torch.relu(self.conv(x))))
        seq = h.flatten(2).transpose(1, 2)
        seq = seq + self.attn(seq, seq, seq, need_weights=False)[0]
        return self.head(seq.transpose(1, 2).flatten(1))


def _net(seed: int = 0) -> Net:
    torch.manual_seed(seed)
    return Net().eval()


X = torch.randn(4, 3, 6, 6, generator=torch.Generator().manual_seed(0))


def test_convert_swaps_linear_and_conv_and_keeps_state_dict():
    model = _net()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    reference = model(X)
    convert_to_cim(model, CIMConfig())
    kinds = {name: type(layer) for name, layer in cim_layers(model)}
    assert kinds == {"conv": CIMConv2d, "wide": CIMConv2d, "head": CIMLinear}  # attention projections untouched
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert torch.equal(model(X), reference)  # unprogrammed CIM layers compute exactly like the float ones


def test_round_trip_restores_exact_float_modules():
    model = _net()
    originals = {name: module for name, module in model.named_modules() if isinstance(module, nn.Conv2d | nn.Linear)}
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    convert_to_cim(model, CIMConfig(weight_bits=4))
    program(model, seed=0)
    drift(model, 3600.0, seed=1)
    convert_from_cim(model)
    assert not list(cim_layers(model))
    for name, module in model.named_modules():
        if name in originals:
            assert module is originals[name]
    assert all(torch.equal(weights[k], v) for k, v in model.state_dict().items())


def test_filter_fn_and_fqn_overrides():
    model = convert_to_cim(_net(), CIMConfig(), filter_fn=lambda module, fqn: isinstance(module, nn.Linear))
    assert [name for name, _ in cim_layers(model)] == ["head"]
    per_module = FqnToCIMConfig({"conv": CIMConfig(adc_bits=6), "re:w.*": None}, default=CIMConfig(adc_bits=10))
    model = convert_to_cim(_net(), per_module)
    layers = dict(cim_layers(model))
    assert set(layers) == {"conv", "head"}
    assert layers["conv"].cim_config.adc_bits == 6 and layers["head"].cim_config.adc_bits == 10
    assert isinstance(convert_to_cim(nn.Linear(3, 2), CIMConfig()), CIMLinear)


def test_config_round_trips_through_json():
    config = CIMConfig(
        weight_bits=6,
        dac_bits=7,
        adc_bits=9,
        perturbation=WeightPerturbation("multiplicative", 0.3),
        noise=PCMNoise(g_max=20.0, prog_noise_scale=0.5),
        clip=WeightClip("sigma", 2.0),
    )
    text = json.dumps(config.to_dict())
    assert CIMConfig.from_dict(json.loads(text)) == config
    assert CIMConfig.from_json(config.to_json()) == config
    per_module = FqnToCIMConfig({"re:head": config}, default=CIMConfig(noise=None))
    assert FqnToCIMConfig.from_dict(json.loads(json.dumps(per_module.to_dict()))) == per_module


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"adc_bits": 1}, "adc_bits"),
        ({"weight_quantizer": "per_row"}, "weight_quantizer"),
        ({"drift_compensation": "column"}, "drift_compensation"),
        ({"perturbation": {"form": "uniform"}}, "form"),
        ({"tile_size": 0}, "tile_size"),
    ],
)
def test_bad_config_values_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CIMConfig(**kwargs)
    with pytest.raises(ValueError, match="unknown CIMConfig keys"):
        CIMConfig.from_dict({"adc_bit": 8})


def test_program_and_drift_are_reproducible_from_seeds():
    model = convert_to_cim(_net(), CIMConfig())
    outputs = []
    for _ in range(2):
        program(model, seed=3)
        drift(model, 86400.0, seed=4)
        outputs.append(model(X))
    assert torch.equal(outputs[0], outputs[1])
    program(model, seed=5)
    drift(model, 86400.0, seed=4)
    assert not torch.equal(model(X), outputs[0])


def test_drift_at_zero_equals_programming_noise_only():
    model = convert_to_cim(_net(), CIMConfig(dac_bits=None, adc_bits=None))
    program(model, seed=0)
    programmed = {name: layer.analog_weight.clone() for name, layer in cim_layers(model)}
    out_programmed = model(X)
    drift(model, 0.0, seed=1)
    for name, layer in cim_layers(model):
        assert torch.equal(layer.analog_weight, programmed[name])
        assert layer.drift_alpha.item() == 1.0
    assert torch.equal(model(X), out_programmed)
    drift(model, 1.0, seed=1)
    assert not torch.equal(model(X), out_programmed)


def test_ideal_chip_reproduces_float_outputs():
    model = _net()
    reference = model(X)
    convert_to_cim(model, CIMConfig(noise=None, dac_bits=None, adc_bits=None))
    program(model, seed=0)
    drift(model, 3.15e7, seed=0)
    assert torch.allclose(model(X), reference, atol=1e-5)
    reset_programming(model)
    assert torch.equal(model(X), reference)


def test_periphery_quantization_error_shrinks_with_bits():
    model = _net()
    reference = model(X)
    errors = []
    for bits in (4, 8, 12):
        cim = convert_to_cim(_net(), CIMConfig(noise=None, dac_bits=bits, adc_bits=bits, adc_bound=32.0))
        program(cim, seed=0)
        errors.append((cim(X) - reference).abs().mean().item())
    assert errors[0] > 4 * errors[1] > 16 * errors[2]  # about 16x less error per 4 bits
    # A too-small ADC range clips: more bits do not help.
    clipped = convert_to_cim(_net(), CIMConfig(noise=None, dac_bits=16, adc_bits=16, adc_bound=1.0))
    program(clipped, seed=0)
    assert (clipped(X) - reference).abs().mean().item() > errors[1]


def test_global_drift_compensation_restores_output_scale():
    noise = PCMNoise(prog_noise_scale=0.0, read_noise_scale=0.0)
    compensated = convert_to_cim(_net(), CIMConfig(noise=noise, dac_bits=None, adc_bits=None))
    raw = convert_to_cim(_net(), CIMConfig(noise=noise, dac_bits=None, adc_bits=None, drift_compensation="none"))
    reference = _net()(X)
    for model in (compensated, raw):
        program(model, seed=0)
        drift(model, 3.15e7, seed=1)
    error_compensated = (compensated(X) - reference).norm() / reference.norm()
    error_raw = (raw(X) - reference).norm() / reference.norm()
    assert error_compensated < 0.5 * error_raw


def test_drift_before_program_says_what_to_do():
    model = convert_to_cim(_net(), CIMConfig())
    with pytest.raises(ValueError, match="program"):
        drift(model, 10.0)
    with pytest.raises(ValueError, match="convert_to_cim"):
        program(nn.Sequential(nn.ReLU()))
    with pytest.raises(TypeError, match="CIMConfig"):
        convert_to_cim(_net(), {"adc_bits": 8})


def test_training_perturbation_and_weight_quantization():
    layer = convert_to_cim(nn.Linear(64, 64), CIMConfig(perturbation=WeightPerturbation("additive", 0.2)))
    x = torch.randn(8, 64)
    layer.train()
    assert not torch.equal(layer(x), layer(x))  # fresh noise each training forward
    layer.eval()
    assert torch.equal(layer(x), layer(x))
    quantized = convert_to_cim(nn.Linear(64, 64), CIMConfig(weight_bits=3, weight_quantizer="per_tensor"))
    assert quantized.target_weight().unique().numel() <= 7
    quantized.train()
    quantized(x).sum().backward()
    assert quantized.weight.grad is not None and quantized.weight.grad.abs().sum() > 0  # straight-through


def test_clip_weights():
    model = convert_to_cim(_net(), CIMConfig(clip=WeightClip("fixed", 0.05)))
    assert clip_weights_(model) == 3
    assert all(layer.weight.abs().max().item() <= 0.05 + 1e-7 for _, layer in cim_layers(model))
    model = convert_to_cim(_net(), CIMConfig())
    assert clip_weights_(model) == 0
    stds = {name: layer.weight.std().item() for name, layer in cim_layers(model)}
    clip_weights_(model, WeightClip("sigma", 1.0))
    for name, layer in cim_layers(model):
        assert layer.weight.abs().max().item() == pytest.approx(stds[name], rel=1e-6)


def test_clipping_callback_runs_in_lightning(tmp_path):
    import lightning.pytorch as pl

    from zoo.quant.cim.callbacks import CIMWeightClipping

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = convert_to_cim(nn.Sequential(nn.Linear(4, 4)), CIMConfig(clip=WeightClip("fixed", 0.01)))

        def training_step(self, batch, batch_idx):
            return self.net(batch[0]).pow(2).mean() - 10 * self.net[0].weight.abs().sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=1.0)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4)), batch_size=4)
    trainer = pl.Trainer(
        max_steps=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        callbacks=[CIMWeightClipping()],
    )
    module = Tiny()
    trainer.fit(module, data)
    assert module.net[0].weight.abs().max().item() <= 0.01 + 1e-7


def test_energy_counts_by_hand():
    model = nn.Sequential(nn.Conv2d(40, 8, 3, padding=1, bias=False), nn.Flatten(), nn.Linear(8 * 5 * 5, 300))
    report = energy_report(model, torch.zeros(2, 40, 5, 5), EnergyModel(batch_size=1), tile_size=256)
    conv, linear = report["layers"]
    # conv: 360 rows = 40 channels x 9; 28 channels per 256-row tile -> 2 row tiles; 25 output positions.
    assert (conv["rows"], conv["columns"], conv["row_tiles"], conv["column_tiles"]) == (360, 8, 2, 1)
    assert conv["macs"] == 25 * 360 * 8 and conv["dac"] == 25 * 360 and conv["adc"] == 25 * 8 * 2
    # linear: 200 rows, 300 columns -> 1 row tile, 2 column tiles; one input vector.
    assert (linear["row_tiles"], linear["column_tiles"], linear["dac"], linear["adc"]) == (1, 2, 400, 300)
    macs = 25 * 360 * 8 + 200 * 300
    digital_pj = macs * (4.6 + 5.0) + (360 * 8 + 200 * 300) * 640.0 + (1000 + 200 + 200 + 300) * 5.0
    assert report["energy_digital_uJ"] == pytest.approx(digital_pj * 1e-6)
    cim_pj = (25 * 8 * 2 + 300) * (2.0 + 0.1) + (25 * 360 + 400) * 0.1 + macs * 0.01 + 1700 * 1.25
    assert report["energy_cim_uJ"] == pytest.approx(cim_pj * 1e-6)
    # The same counts from the converted model.
    converted = energy_report(convert_to_cim(model, CIMConfig()), torch.zeros(1, 40, 5, 5), EnergyModel(batch_size=1))
    assert converted["energy_cim_uJ"] == pytest.approx(report["energy_cim_uJ"])
