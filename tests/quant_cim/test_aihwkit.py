"""A whole CIM layer against aihwkit's inference tile: programmed and drifted weights, and the global drift
compensation factor. Skipped (with the reason) when aihwkit is not importable."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from zoo.quant.cim import CIMConfig, convert_to_cim, drift, program


def _aihwkit_layer(weight: torch.Tensor):
    try:
        from aihwkit.inference.compensation.drift import GlobalDriftCompensation
        from aihwkit.inference.noise.pcm import PCMLikeNoiseModel
        from aihwkit.nn.conversion import convert_to_analog
        from aihwkit.simulator.configs import TorchInferenceRPUConfig
    except Exception as error:  # optional: pip install --no-deps aihwkit==1.1.0
        pytest.skip(f"aihwkit is not importable ({type(error).__name__}: {error})")
    config = TorchInferenceRPUConfig()
    config.noise_model = PCMLikeNoiseModel(g_max=25.0)
    config.drift_compensation = GlobalDriftCompensation()
    config.forward.is_perfect = True  # our compensation reads out through an ideal periphery
    model = convert_to_analog(nn.Sequential(nn.Linear(*weight.shape[::-1], bias=False)), config)
    model[0].set_weights(weight, None)
    return model.eval(), next(model.analog_tiles())


def test_layer_drift_and_compensation_match_aihwkit():
    weight = torch.randn(256, 256, generator=torch.Generator().manual_seed(0)) * 0.05
    theirs, tile = _aihwkit_layer(weight)
    ours = convert_to_cim(nn.Sequential(nn.Linear(256, 256, bias=False)), CIMConfig(dac_bits=None, adc_bits=None))
    ours[0].weight.data.copy_(weight)
    torch.manual_seed(1)
    theirs.program_analog_weights()
    program(ours, seed=2)
    for t_seconds in (1.0, 86400.0, 3.15e7):  # both drift the same programmed chip to each time
        theirs.drift_analog_weights(t_seconds)
        drift(ours, t_seconds, seed=3)
        their_alpha, our_alpha = tile.alpha.item(), ours[0].drift_alpha.item()
        their_error = (tile.get_weights()[0] * their_alpha - weight).std() / weight.std()
        our_error = (ours[0].analog_weight * our_alpha - weight).std() / weight.std()
        assert our_alpha == pytest.approx(their_alpha, rel=0.03), f"alpha at t = {t_seconds} s"
        assert our_error.item() == pytest.approx(their_error.item(), rel=0.05), f"weight error at t = {t_seconds} s"
