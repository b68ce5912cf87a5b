"""Energy per inference of a DWP network at matched precision: 8-bit digital against 8-bit CIM (fp32 as a row).

The operation counts (MACs, DAC and ADC conversions, weights and activations moved) come from
:func:`zoo.quant.cim.energy_report`; this module only chooses the per-operation energies. Sources:

Digital side, M. Horowitz, "Computing's energy problem (and what we can do about it)", ISSCC 2014, Fig. 1.1.9
(45 nm, 0.9 V). Published figures:

* 8-bit integer multiply 0.2 pJ, 8-bit add 0.03 pJ, 32-bit integer add 0.1 pJ;
* fp32 multiply 3.7 pJ, fp32 add 0.9 pJ;
* SRAM read of 64 bits from an 8 kB array 10 pJ; DRAM 1.3-2.6 nJ per 64 bits (we take the lower end, 1.28 nJ,
  as zoo.quant.cim's defaults do).

Derived from them (our arithmetic, stated so it can be checked):

* int8 MAC = 8-bit multiply + 32-bit accumulator add = 0.2 + 0.1 = 0.3 pJ (an int8 MAC accumulates in 32 bits);
* fp32 MAC = 3.7 + 0.9 = 4.6 pJ;
* an SRAM word costs 10 pJ / 64 bits per bit: 1.25 pJ per 8-bit word, 5 pJ per 32-bit word;
* a DRAM word: 1.28 nJ / 64 bits = 20 pJ per bit: 160 pJ per 8-bit word, 640 pJ per 32-bit word;
* weights come from DRAM once per batch of 64 inputs, one SRAM operand read per MAC (EnergyModel's defaults).

CIM side, the same counts with :class:`zoo.quant.cim.EnergyModel`'s defaults. These are ASSUMPTIONS, not
measurements of the paper's chip (no figure is published for it):

* 8-bit ADC conversion 2 pJ: a SAR ADC at a Walden figure of merit of about 8 fJ per conversion step (a
  typical value in B. Murmann, "ADC Performance Survey 1997-2023", the survey's FoM_W column) times 2^8 steps;
  this is an estimate from the survey's trend, not a cited measurement of one converter;
* 8-bit DAC per input row drive 0.1 pJ (assumption);
* analog cell MAC 0.01 pJ (assumption: a PCM cell read at about 1 uA and 0.2 V for about 50 ns);
* partial-sum accumulation 0.1 pJ per ADC output (Horowitz's 32-bit add) and 8-bit activations through SRAM at
  1.25 pJ (Horowitz, as above).

Because the CIM side rests on assumptions, the report also gives ``energy_adc_breakeven_pJ``: the energy per
ADC conversion at which CIM would cost as much as 8-bit digital, everything else unchanged.
"""

from __future__ import annotations

import torch

from zoo.quant.cim import EnergyModel, energy_report

SRAM_PJ_PER_BIT = 10.0 / 64  # Horowitz 2014: 64-bit read of an 8 kB SRAM, 10 pJ
DRAM_PJ_PER_BIT = 1280.0 / 64  # Horowitz 2014: DRAM 1.3-2.6 nJ per 64 bits (lower end)
INT8_MAC_PJ = 0.2 + 0.1  # Horowitz 2014: 8-bit multiply 0.2 pJ + 32-bit accumulate add 0.1 pJ
FP32_MAC_PJ = 3.7 + 0.9  # Horowitz 2014: fp32 multiply 3.7 pJ + fp32 add 0.9 pJ


def digital_energy_model(bits: int) -> EnergyModel:
    """Per-operation energies of a digital accelerator at ``bits`` (8: int8 MACs; 32: fp32), Horowitz 2014."""
    if bits not in (8, 32):
        raise ValueError(f"digital precision must be 8 (int8) or 32 (fp32) bits, not {bits}")
    return EnergyModel(
        digital_mac_pj=INT8_MAC_PJ if bits == 8 else FP32_MAC_PJ,
        sram_word_pj=SRAM_PJ_PER_BIT * bits,
        dram_word_pj=DRAM_PJ_PER_BIT * bits,
    )


def matched_precision_energy(net: torch.nn.Module, dac_bits: int = 8, adc_bits: int = 8) -> dict[str, float]:
    """Energy per 28x28 inference on 8-bit CIM, on an 8-bit digital accelerator and on an fp32 one, in uJ.

    Args:
        net: The backbone (float or CIM layers).
        dac_bits: DAC precision of the CIM side.
        adc_bits: ADC precision of the CIM side (the digital side runs at the same 8 bits).

    Returns:
        ``energy_cim_uJ``, ``energy_digital_int8_uJ``, ``energy_digital_fp32_uJ`` and ``energy_adc_breakeven_pJ``.
    """
    example = torch.zeros(1, 1, 28, 28)
    cim = energy_report(net, example, EnergyModel(), dac_bits, adc_bits)  # the CIM side's assumptions
    int8 = energy_report(net, example, digital_energy_model(8), dac_bits, adc_bits)["energy_digital_uJ"]
    fp32 = energy_report(net, example, digital_energy_model(32), dac_bits, adc_bits)["energy_digital_uJ"]
    adc_uj = cim["cim_breakdown_uJ"]["adc"]
    conversions = cim["totals"]["adc_conversions"]
    breakeven = (int8 - (cim["energy_cim_uJ"] - adc_uj)) * 1e6 / conversions if conversions else float("nan")
    return {
        "energy_cim_uJ": cim["energy_cim_uJ"],
        "energy_digital_int8_uJ": int8,
        "energy_digital_fp32_uJ": fp32,
        "energy_adc_breakeven_pJ": breakeven,
    }
