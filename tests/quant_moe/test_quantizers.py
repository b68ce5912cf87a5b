"""Packing, RTN, 1-bit sign*mean and GPTQ against hand-computed values and each other."""

from __future__ import annotations

import pytest
import torch

from zoo.quant.moe.modules import PackedMatrix
from zoo.quant.moe.packing import pack_codes, packed_nbytes, unpack_codes
from zoo.quant.moe.quantizers import gptq_quantize, gptq_quantize_batched, input_hessian, rtn_quantize, sqnr_db


@pytest.mark.parametrize("bits", range(1, 9))
@pytest.mark.parametrize("numel", [1, 7, 8, 130])
def test_pack_round_trip_is_exact_and_sized(bits, numel):
    codes = torch.randint(0, 2**bits, (numel,), generator=torch.Generator().manual_seed(bits))
    packed = pack_codes(codes, bits)
    assert packed.dtype == torch.uint8 and packed.numel() == packed_nbytes(numel, bits) == bits * ((numel + 7) // 8)
    assert torch.equal(unpack_codes(packed, numel).long(), codes)


def test_pack_rejects_out_of_range_codes():
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        pack_codes(torch.tensor([0, 4]), 2)


def test_rtn_hand_computed_two_bit_row():
    # range [-1, 2] -> scale 1, zero 1; codes round(w) + 1 clamped to [0, 3]
    weight = torch.tensor([[-1.0, 0.4, 0.6, 2.0]])
    q = rtn_quantize(weight, 2, group_size=None)
    assert q.scale.item() == 1.0 and q.zero.item() == 1.0
    assert q.codes.tolist() == [[0, 1, 2, 3]]
    assert q.dequantize().tolist() == [[-1.0, 0.0, 1.0, 2.0]]


def test_one_bit_is_plus_minus_mean_abs_per_row():
    weight = torch.randn(6, 40, generator=torch.Generator().manual_seed(0))
    deq = rtn_quantize(weight, 1, group_size=None).dequantize()
    mean_abs = weight.abs().mean(1, keepdim=True).half().float()
    expected = torch.where(weight > 0, mean_abs, -mean_abs)
    torch.testing.assert_close(deq, expected, rtol=1e-3, atol=1e-6)


def test_rtn_eight_bit_relative_error_below_one_percent():
    weight = torch.randn(64, 256, generator=torch.Generator().manual_seed(1))
    deq = rtn_quantize(weight, 8, group_size=128).dequantize()
    assert (deq - weight).norm() / weight.norm() < 1e-2


# Gaussian weights, group 128, fp16 scale and zero. Measured: 1b 4.45, 2b 6.00, 3b 13.37, 4b 19.99, 8b 44.57 dB
# (about 6 dB per bit from 3 bits on; min-max 2-bit wastes levels on the tails, sign*mean 1-bit is close behind).
SQNR_FLOORS_DB = {1: 4.2, 2: 5.7, 3: 13.0, 4: 19.5, 8: 44.0}


@pytest.mark.parametrize("bits", sorted(SQNR_FLOORS_DB))
def test_sqnr_floor_per_bit_width(bits):
    weight = torch.randn(256, 512, generator=torch.Generator().manual_seed(2))
    assert sqnr_db(weight, rtn_quantize(weight, bits, group_size=128).dequantize()) > SQNR_FLOORS_DB[bits]


def test_groups_beat_per_row_scaling():
    weight = torch.randn(64, 512, generator=torch.Generator().manual_seed(3)) * torch.linspace(0.1, 3, 512)
    assert sqnr_db(weight, rtn_quantize(weight, 3, 64).dequantize()) > sqnr_db(
        weight, rtn_quantize(weight, 3, None).dequantize()
    )


@pytest.mark.parametrize("bits", [1, 2, 3, 4])
def test_gptq_beats_rtn_in_output_error(bits):
    generator = torch.Generator().manual_seed(4)
    weight = torch.randn(96, 128, generator=generator)
    mixing = torch.randn(128, 128, generator=generator) / 8
    inputs = torch.randn(2048, 128, generator=generator) @ mixing + 0.3 * torch.randn(2048, 128, generator=generator)
    reference = inputs @ weight.T
    rtn = rtn_quantize(weight, bits, 64).dequantize()
    gptq = gptq_quantize(weight, input_hessian(inputs), bits, group_size=64).dequantize()
    rtn_error = (inputs @ rtn.T - reference).pow(2).mean()
    gptq_error = (inputs @ gptq.T - reference).pow(2).mean()
    assert gptq_error < 0.9 * rtn_error


def _same(a, b) -> bool:
    return torch.equal(a.codes, b.codes) and torch.equal(a.scale, b.scale) and torch.equal(a.zero, b.zero)


def test_gptq_with_a_diagonal_hessian_is_rtn():
    """A diagonal Hessian propagates no error to other columns, so GPTQ must reduce to RTN (every width, batched)."""
    weights = torch.randn(4, 24, 64, generator=torch.Generator().manual_seed(6))
    bits = [1, 2, 3, 4]
    quantized = gptq_quantize_batched(weights, torch.eye(64).expand(4, 64, 64), bits, group_size=32)
    assert all(_same(q, rtn_quantize(w, b, 32)) for q, w, b in zip(quantized, weights, bits, strict=True))


def test_batched_gptq_equals_one_matrix_at_a_time():
    generator = torch.Generator().manual_seed(7)
    weights = torch.randn(5, 32, 48, generator=generator)
    hessians = torch.stack([input_hessian(torch.randn(200, 48, generator=generator)) for _ in range(5)])
    hessians[2, :, 7] = hessians[2, 7, :] = 0.0  # an input column never seen in calibration
    bits = [3, 1, 2, 1, 3]
    batched = gptq_quantize_batched(weights, hessians, bits, group_size=16, block_size=32)
    for e in range(5):
        alone = gptq_quantize(weights[e], hessians[e], bits[e], group_size=16, block_size=32)
        assert _same(batched[e], alone)


def test_gptq_rejects_mismatched_hessian():
    with pytest.raises(ValueError, match="hessian must be"):
        gptq_quantize(torch.randn(4, 8), torch.eye(4), 2)


def test_packed_matrix_dequantizes_to_the_fake_quantized_weights_and_measures_bytes():
    weight = torch.randn(48, 256, generator=torch.Generator().manual_seed(5))
    for bits in (1, 2, 3, 4):
        q = rtn_quantize(weight, bits, 128)
        packed = PackedMatrix.from_quantized(q)
        assert torch.equal(packed.dequantize(), q.dequantize())
        assert torch.equal(packed.codes(), q.codes)
        # bits per weight + fp16 scale and zero per group of 128: (b + 32/128) / 16 of fp16
        assert packed.nbytes() == weight.numel() * (bits + 32 / 128) / 8
    with pytest.raises(ValueError, match="1..8"):
        rtn_quantize(weight, 0)
