"""Compute-in-memory (CIM) quantization and noise simulation for any torch model.

Names follow IBM aihwkit and aihwkit-lightning, the API torchao::

    from zoo.quant.cim import CIMConfig, convert_to_cim, program, drift, convert_from_cim

    convert_to_cim(model, CIMConfig(dac_bits=8, adc_bits=8))   # Linear/Conv2d -> CIM layers, in place
    program(model, seed=0)                                     # write the weights into simulated PCM devices
    drift(model, t_seconds=86400, seed=1)                      # one day later, with global drift compensation
    logits = model(x)
    convert_from_cim(model)                                    # the exact float modules back

Configs round-trip through JSON (``CIMConfig.to_dict`` / ``from_dict``), so a module that takes a
``CIMConfig`` init argument stores it in config.json and reloads as the same CIM model. Weight clipping runs
as a Lightning callback (:class:`zoo.quant.cim.callbacks.CIMWeightClipping`, imported from its own module so
that this package needs no Lightning). :func:`energy_report` counts MACs and ADC/DAC conversions.
"""

from zoo.quant.cim.clipping import clip_weights_
from zoo.quant.cim.config import CIMConfig, FqnToCIMConfig, PCMNoise, WeightClip, WeightPerturbation
from zoo.quant.cim.convert import cim_layers, convert_from_cim, convert_to_cim, drift, program, reset_programming
from zoo.quant.cim.energy import EnergyModel, count_operations, energy_report
from zoo.quant.cim.layers import CIMConv2d, CIMLayer, CIMLinear
from zoo.quant.cim.noise import mismatch_noise, perturb

__all__ = [
    "CIMConfig",
    "CIMConv2d",
    "CIMLayer",
    "CIMLinear",
    "EnergyModel",
    "FqnToCIMConfig",
    "PCMNoise",
    "WeightClip",
    "WeightPerturbation",
    "cim_layers",
    "clip_weights_",
    "convert_from_cim",
    "convert_to_cim",
    "count_operations",
    "drift",
    "energy_report",
    "mismatch_noise",
    "perturb",
    "program",
    "reset_programming",
]
