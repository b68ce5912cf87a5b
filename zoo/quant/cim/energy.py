"""Energy per inference of a model on CIM crossbars versus a GPU-style digital baseline.

The model counts, for every Linear/Conv2d (float or CIM) layer, the MACs, the crossbar tiles, the DAC
conversions (one per active row per input vector, per column tile) and the ADC conversions (one per column
per input vector, per row tile), from one forward pass, and multiplies them by per-operation energies.
Only the layers that a CIM chip would map onto crossbars are counted; normalisation, activations and
pooling run digitally on both sides and are left out of both totals.

Digital side, Horowitz, "Computing's energy problem (and what we can do about it)", ISSCC 2014 (45 nm,
0.9 V): fp32 multiply 3.7 pJ + fp32 add 0.9 pJ = 4.6 pJ per MAC; 64-bit read of an 8 kB SRAM 10 pJ, so
5 pJ per 32-bit word; DRAM 1.3-2.6 nJ per 64 bits, so 640 pJ per 32-bit word; 32-bit integer add 0.1 pJ.

CIM side: no measured figures are public for the paper's chip, so these defaults are documented guesses,
to be replaced by a user's own device numbers:

* ADC: 2 pJ per 8-bit conversion. A SAR ADC at a Walden figure of merit of about 8 fJ per conversion
  step (typical of the 2015-2020 entries of B. Murmann's "ADC Performance Survey") spends
  2^8 * 8 fJ ~ 2 pJ; other precisions scale as 2^(bits - 8).
* DAC: 0.1 pJ per input per row drive at 8 bits, scaling as 2^(bits - 8) (a guess).
* Analog MAC: 0.01 pJ per cell read (a PCM cell read at ~1 uA and 0.2 V for ~50 ns; a guess).
* Partial sums of tiles are added digitally at 0.1 pJ per ADC output (Horowitz's 32-bit integer add);
  activations move through SRAM at 8 bits, a quarter of the 5 pJ 32-bit read.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from zoo.quant.cim.layers import CIMLayer


@dataclass
class EnergyModel:
    """Per-operation energies in picojoules; see the module docstring for their sources.

    Args:
        digital_mac_pj: One fp32 multiply-accumulate (Horowitz 2014: 3.7 + 0.9).
        sram_word_pj: One 32-bit SRAM read (Horowitz 2014: 10 pJ per 64 bits, 8 kB array).
        dram_word_pj: One 32-bit DRAM read (Horowitz 2014: 1.3-2.6 nJ per 64 bits).
        digital_operand_reads_per_mac: SRAM words read per digital MAC (one operand; the other is reused
            from registers).
        batch_size: Inputs per weight fetch from DRAM on the digital side (weights are read once per batch).
        adc_pj_8bit: One 8-bit ADC conversion (guess, see module docstring).
        dac_pj_8bit: One 8-bit DAC conversion (guess).
        cell_mac_pj: One analog multiply-accumulate in a crossbar cell (guess).
        accumulate_pj: Digital addition of one tile partial sum (Horowitz 2014, 32-bit integer add).
        activation_bits_cim: Bits of the activations the CIM side stores in SRAM.
    """

    digital_mac_pj: float = 4.6
    sram_word_pj: float = 5.0
    dram_word_pj: float = 640.0
    digital_operand_reads_per_mac: float = 1.0
    batch_size: int = 64
    adc_pj_8bit: float = 2.0
    dac_pj_8bit: float = 0.1
    cell_mac_pj: float = 0.01
    accumulate_pj: float = 0.1
    activation_bits_cim: int = 8


@dataclass
class LayerCount:
    """Operation counts of one layer for one inference."""

    name: str
    kind: str
    rows: int
    columns: int
    row_tiles: int
    column_tiles: int
    vectors: int
    macs: int
    weights: int
    inputs: int
    outputs: int

    @property
    def dac_conversions(self) -> int:
        return self.vectors * self.rows * self.column_tiles

    @property
    def adc_conversions(self) -> int:
        return self.vectors * self.columns * self.row_tiles


def _geometry(module: nn.Module) -> tuple[str, int, int, int]:
    """``(kind, rows, columns, rows per row-tile unit)`` of a Linear/Conv2d or its CIM layer."""
    float_module = module._float_module if isinstance(module, CIMLayer) else module
    weight = float_module.weight
    if isinstance(float_module, nn.Conv2d):
        out_channels, in_per_group, kh, kw = weight.shape
        return "conv2d", in_per_group * kh * kw, out_channels, kh * kw
    return "linear", weight.shape[1], weight.shape[0], 1


def count_operations(model: nn.Module, example_input: Any, tile_size: int = 256) -> list[LayerCount]:
    """Per-layer operation counts for one inference, from one forward pass of ``example_input``.

    Args:
        model: A float or CIM-converted model.
        example_input: A batch (tensor, or tuple of positional arguments); counts are divided by its size.
        tile_size: Rows and columns of one crossbar.
    """
    records: list[LayerCount] = []
    batch = (example_input[0] if isinstance(example_input, tuple | list) else example_input).shape[0]

    def hook(name: str):
        def record(module: nn.Module, args: tuple, output: torch.Tensor) -> None:
            kind, rows, columns, unit = _geometry(module)
            vectors = output.numel() // columns // batch
            units_per_tile = max(1, tile_size // unit)  # conv tiles hold whole kernels of input channels
            row_tiles = math.ceil((rows // unit) / units_per_tile)
            records.append(
                LayerCount(
                    name=name,
                    kind=kind,
                    rows=rows,
                    columns=columns,
                    row_tiles=row_tiles,
                    column_tiles=math.ceil(columns / tile_size),
                    vectors=vectors,
                    macs=vectors * rows * columns,
                    weights=rows * columns,
                    inputs=args[0].numel() // batch,
                    outputs=output.numel() // batch,
                )
            )

        return record

    handles = []
    for name, module in model.named_modules():
        if isinstance(module, CIMLayer | nn.Linear | nn.Conv2d):  # a CIM layer's float module is not a child
            handles.append(module.register_forward_hook(hook(name)))
    try:
        with torch.no_grad():
            model(*example_input) if isinstance(example_input, tuple | list) else model(example_input)
    finally:
        for handle in handles:
            handle.remove()
    return records


def energy_report(
    model: nn.Module,
    example_input: Any,
    energy: EnergyModel | None = None,
    dac_bits: int = 8,
    adc_bits: int = 8,
    tile_size: int = 256,
) -> dict[str, Any]:
    """Energy of one inference on CIM crossbars and on the digital baseline, with the counts behind it.

    Args:
        model: A float or CIM-converted model.
        example_input: A batch to trace (counts are per input).
        energy: Per-operation energies (default :class:`EnergyModel`).
        dac_bits: DAC precision on the CIM side.
        adc_bits: ADC precision on the CIM side.
        tile_size: Rows and columns of one crossbar.

    Returns:
        ``energy_cim_uJ``, ``energy_digital_uJ``, their ratio, the breakdown of both in uJ, the totals of
        MACs, tiles and conversions, the per-layer counts (for NeuroSim-style tools) and the energy model.
    """
    energy = energy or EnergyModel()
    layers = count_operations(model, example_input, tile_size)
    total = {
        key: sum(getattr(layer, key) for layer in layers)
        for key in ("macs", "weights", "inputs", "outputs", "dac_conversions", "adc_conversions")
    }
    total["tiles"] = sum(layer.row_tiles * layer.column_tiles for layer in layers)
    adc_pj = energy.adc_pj_8bit * 2.0 ** (adc_bits - 8)
    dac_pj = energy.dac_pj_8bit * 2.0 ** (dac_bits - 8)
    activation_pj_cim = energy.sram_word_pj * energy.activation_bits_cim / 32
    activations = total["inputs"] + total["outputs"]
    cim = {
        "adc": total["adc_conversions"] * adc_pj,
        "dac": total["dac_conversions"] * dac_pj,
        "analog_mac": total["macs"] * energy.cell_mac_pj,
        "accumulate": total["adc_conversions"] * energy.accumulate_pj,
        "activations": activations * activation_pj_cim,
    }
    digital = {
        "mac": total["macs"] * energy.digital_mac_pj,
        "operands": total["macs"] * energy.digital_operand_reads_per_mac * energy.sram_word_pj,
        "weights_dram": total["weights"] * energy.dram_word_pj / energy.batch_size,
        "activations": activations * energy.sram_word_pj,
    }
    cim_uj = sum(cim.values()) * 1e-6
    digital_uj = sum(digital.values()) * 1e-6
    return {
        "energy_cim_uJ": cim_uj,
        "energy_digital_uJ": digital_uj,
        "cim_over_digital": cim_uj / digital_uj if digital_uj else math.nan,
        "cim_breakdown_uJ": {k: v * 1e-6 for k, v in cim.items()},
        "digital_breakdown_uJ": {k: v * 1e-6 for k, v in digital.items()},
        "totals": total,
        "layers": [
            {**dataclasses.asdict(layer), "dac": layer.dac_conversions, "adc": layer.adc_conversions}
            for layer in layers
        ],
        "energy_model": dataclasses.asdict(energy),
        "dac_bits": dac_bits,
        "adc_bits": adc_bits,
        "tile_size": tile_size,
    }
