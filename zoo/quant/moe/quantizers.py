"""Weight quantizers in plain torch: round-to-nearest (RTN) with groups, 1-bit sign*mean, and GPTQ.

All quantizers share one affine format per group of ``group_size`` input columns of a ``[out, in]`` matrix:
``w_hat = (q - zero) * scale`` with integer codes ``q`` in ``[0, 2**bits)`` and an fp16 ``scale`` and ``zero``
per (row, group). The scale is rounded to fp16 *before* the codes are chosen, so the fake-quantized weights
computed here and the ones a packed model dequantizes from its fp16 buffers are the same floats.

* ``bits >= 2``: asymmetric min-max, ``scale = (max - min) / (2**bits - 1)``, ``zero = round(-min / scale)``,
  ``q = clamp(round(w / scale) + zero)``. The range always contains 0 (as in GPTQ's own quantizer), which keeps
  ``zero`` inside the code range; for groups of zero-mean weights this changes nothing in practice.
* ``bits == 1``: ``q = 1[w > 0]``, ``scale = 2 * mean|w|``, ``zero = 0.5``, i.e. ``w_hat = +-mean|w|``.
* GPTQ (Frantar et al., 2023): columns are quantized one at a time and the rounding error of each is spread over
  the columns not yet quantized through the inverse-Hessian Cholesky factor; lazy block updates, damping of
  ``damp * mean(diag H)``; group parameters are fitted on the error-updated weights when a group starts.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

SUPPORTED_BITS = tuple(range(1, 9))


@dataclass
class QuantizedMatrix:
    """Integer codes and fp16 affine parameters of one ``[out, in]`` matrix.

    Args:
        codes: uint8 ``[out, in]`` codes in ``[0, 2**bits)``.
        scale: fp16 ``[out, groups]`` step sizes.
        zero: fp16 ``[out, groups]`` zero points (integers, or 0.5 for 1 bit).
        bits: Bits per code.
        group_size: Input columns per group (the last group may be shorter).
    """

    codes: torch.Tensor
    scale: torch.Tensor
    zero: torch.Tensor
    bits: int
    group_size: int

    def dequantize(self) -> torch.Tensor:
        """The float32 weights ``(q - zero) * scale``."""
        return dequantize(self.codes, self.scale, self.zero, self.group_size)


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Run the block with ``count`` intra-op threads, then restore the previous setting.

    Small-tensor loops (GPTQ's column loop, a small model's forward) are bound by per-operation overhead; on a
    shared 2-core machine, two intra-op threads made them 10-16x *slower* than one (thread hand-off under load).
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def check_bits(bits: int) -> int:
    """Validate a bit-width (1 to 8) and return it as int."""
    if int(bits) != bits or int(bits) not in SUPPORTED_BITS:
        raise ValueError(f"bit-width must be an integer in 1..8 (use 16 to keep a matrix unquantized), got {bits}")
    return int(bits)


def group_width(in_features: int, group_size: int | None) -> int:
    """Columns per group; ``None``, 0 or -1 mean one group per row."""
    if group_size is None or group_size <= 0 or group_size >= in_features:
        return in_features
    return int(group_size)


def _group_index(in_features: int, width: int, device) -> torch.Tensor:
    return torch.arange(in_features, device=device) // width


def dequantize(codes: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, group_size: int) -> torch.Tensor:
    """``(codes - zero) * scale`` with per-group parameters broadcast over their columns (float32)."""
    out_features, in_features = codes.shape
    width = group_width(in_features, group_size)
    if in_features % width == 0:  # equal groups: broadcast over a [out, groups, width] view
        grouped = codes.float().view(out_features, -1, width)
        return ((grouped - zero.float()[..., None]) * scale.float()[..., None]).view(out_features, in_features)
    index = _group_index(in_features, width, codes.device)
    return (codes.float() - zero.float()[:, index]) * scale.float()[:, index]


def fit_params(weight: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row scale and zero for a block of columns ``[out, cols]`` (scale already rounded to fp16).

    Returns:
        ``(scale, zero)``, float32 ``[out]`` each, exactly representable in fp16.
    """
    if bits == 1:
        scale = (2.0 * weight.abs().mean(dim=1)).half().float()
        return scale, torch.full_like(scale, 0.5)
    low = weight.min(dim=1).values.clamp(max=0.0)
    high = weight.max(dim=1).values.clamp(min=0.0)
    scale = ((high - low) / (2**bits - 1)).clamp(min=1e-6).half().float()
    zero = torch.round(-low / scale).clamp(0, 2**bits - 1)
    return scale, zero


def quantize_with(weight: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, bits: int) -> torch.Tensor:
    """Codes of ``weight`` ``[out, cols]`` (or ``[out]``) under per-row ``scale``/``zero`` (float codes)."""
    if weight.dim() == 2:
        scale, zero = scale[:, None], zero[:, None]
    if bits == 1:
        return (weight > 0).float()
    return torch.clamp(torch.round(weight / scale) + zero, 0, 2**bits - 1)


def rtn_quantize(weight: torch.Tensor, bits: int, group_size: int | None = 128) -> QuantizedMatrix:
    """Round-to-nearest quantization of a ``[out, in]`` matrix.

    Args:
        weight: The matrix (any float dtype).
        bits: 1 (sign * mean) to 8.
        group_size: Input columns per group; ``None`` or -1 for one group per row.
    """
    bits = check_bits(bits)
    weight = weight.detach().float()
    out_features, in_features = weight.shape
    width = group_width(in_features, group_size)
    groups = math.ceil(in_features / width)
    scale = weight.new_empty(out_features, groups)
    zero = weight.new_empty(out_features, groups)
    codes = torch.empty_like(weight)
    for g in range(groups):
        cols = slice(g * width, min((g + 1) * width, in_features))
        scale[:, g], zero[:, g] = fit_params(weight[:, cols], bits)
        codes[:, cols] = quantize_with(weight[:, cols], scale[:, g], zero[:, g], bits)
    return QuantizedMatrix(codes.to(torch.uint8), scale.half(), zero.half(), bits, width)


def fake_quantize(weight: torch.Tensor, bits: int, group_size: int | None = 128) -> torch.Tensor:
    """RTN quantize-dequantize: the float weights an RTN-quantized model computes with (same dtype as input)."""
    return rtn_quantize(weight, bits, group_size).dequantize().to(weight.dtype)


def gptq_quantize(
    weight: torch.Tensor,
    hessian: torch.Tensor,
    bits: int,
    group_size: int | None = 128,
    block_size: int = 128,
    damp: float = 0.01,
) -> QuantizedMatrix:
    """GPTQ: quantize column by column, compensating each rounding error on the remaining columns.

    Args:
        weight: ``[out, in]`` matrix.
        hessian: ``[in, in]`` proxy Hessian ``2/n * X^T X`` of the layer inputs (see :func:`input_hessian`).
        bits: 1 to 8.
        group_size: Input columns per group; ``None`` or -1 for one group per row.
        block_size: Columns per lazy-update block (rounded to a multiple of the group width).
        damp: Dampening added to the diagonal, as a fraction of its mean.
    """
    if weight.dim() != 2:
        raise ValueError(f"weight must be a [out, in] matrix, got shape {tuple(weight.shape)}")
    if hessian.shape != (weight.shape[1], weight.shape[1]):
        raise ValueError(
            f"hessian must be [{weight.shape[1]}, {weight.shape[1]}] for a weight of shape {tuple(weight.shape)}"
        )
    return gptq_quantize_batched(weight[None], hessian[None], [bits], group_size, block_size, damp)[0]


def gptq_quantize_batched(
    weights: torch.Tensor,
    hessians: torch.Tensor,
    bits: list[int],
    group_size: int | None = 128,
    block_size: int = 128,
    damp: float = 0.01,
) -> list[QuantizedMatrix]:
    """GPTQ on a stack of same-shape matrices at once (e.g. the experts of one MoE block), each at its own width.

    The matrices are independent (each has its own Hessian); batching only runs the column loop once for all of
    them, which matters on CPU where that loop is bound by per-operation overhead. Results equal
    :func:`gptq_quantize` on each matrix.

    Args:
        weights: ``[E, out, in]`` matrices.
        hessians: ``[E, in, in]`` proxy Hessians, one per matrix.
        bits: Width of each matrix (1 to 8).
        group_size: Input columns per group; ``None`` or -1 for one group per row.
        block_size: Columns per lazy-update block (rounded to a multiple of the group width).
        damp: Dampening added to each diagonal, as a fraction of its mean.
    """
    bits = [check_bits(b) for b in bits]
    W = weights.detach().clone().float()
    count, out_features, in_features = W.shape
    if hessians.shape != (count, in_features, in_features) or len(bits) != count:
        raise ValueError(
            f"need {count} hessians of shape [{in_features}, {in_features}] and {count} bit-widths, "
            f"got hessians {tuple(hessians.shape)} and {len(bits)} widths"
        )
    upper = _inverse_hessian_factor(hessians.detach().clone().float(), damp)
    levels = torch.tensor([2**b - 1 for b in bits], dtype=W.dtype)[:, None]  # [E, 1]: highest code
    one_bit = torch.tensor([b == 1 for b in bits])[:, None]
    with torch_threads(1):  # the column loop is per-operation overhead: one thread is fastest (see torch_threads)
        return _gptq_columns(W, upper, bits, levels, one_bit, group_size, block_size)


def _gptq_columns(W, upper, bits, levels, one_bit, group_size, block_size) -> list[QuantizedMatrix]:
    count, out_features, in_features = W.shape

    def fit(block: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # block [E, out, cols] -> [E, out] each
        low = block.amin(dim=-1).clamp(max=0.0)
        high = block.amax(dim=-1).clamp(min=0.0)
        scale = ((high - low) / levels).clamp(min=1e-6).half().float()
        zero = torch.minimum(torch.round(-low / scale).clamp(min=0.0), levels)
        sign_scale = (2.0 * block.abs().mean(dim=-1)).half().float()  # 1 bit: +-mean|w| per row
        return torch.where(one_bit, sign_scale, scale), torch.where(one_bit, 0.5, zero)

    def codes_of(column: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor) -> torch.Tensor:
        affine = torch.minimum((torch.round(column / scale) + zero).clamp(min=0.0), levels)
        return torch.where(one_bit, (column > 0).to(column.dtype), affine)

    width = group_width(in_features, group_size)
    groups = math.ceil(in_features / width)
    block = max(block_size // width, 1) * width  # groups never straddle blocks
    scale = W.new_empty(count, out_features, groups)
    zero = W.new_empty(count, out_features, groups)
    codes = torch.empty_like(W)
    for start in range(0, in_features, block):
        stop = min(start + block, in_features)
        W_block = W[:, :, start:stop].clone()
        errors = torch.zeros_like(W_block)
        U_block = upper[:, start:stop, start:stop]
        for i in range(stop - start):
            col = start + i
            g = col // width
            if col % width == 0:
                scale[:, :, g], zero[:, :, g] = fit(W_block[:, :, i : i + width])
            s, z = scale[:, :, g], zero[:, :, g]
            q = codes_of(W_block[:, :, i], s, z)
            codes[:, :, col] = q
            err = (W_block[:, :, i] - (q - z) * s) / U_block[:, i, i, None]
            W_block[:, :, i:] -= err[:, :, None] * U_block[:, None, i, i:]
            errors[:, :, i] = err
        W[:, :, stop:] -= errors @ upper[:, start:stop, stop:]
    codes, scale, zero = codes.to(torch.uint8), scale.half(), zero.half()
    return [QuantizedMatrix(codes[e], scale[e], zero[e], bits[e], width) for e in range(count)]


def _inverse_hessian_factor(H: torch.Tensor, damp: float) -> torch.Tensor:
    """Upper Cholesky factor of the inverse of each damped Hessian ``[E, in, in]`` (GPTQ's error propagator)."""
    diagonal = H.diagonal(dim1=-2, dim2=-1)
    diagonal.masked_fill_(diagonal <= 0, 1.0)  # inputs never seen in calibration: identity there (weights kept)
    mean = diagonal.mean(dim=-1, keepdim=True)
    diagonal.add_(damp * mean)
    failed = torch.zeros(H.shape[0], dtype=torch.bool)
    for extra in (0.0, 10 * damp, 100 * damp):  # numerically indefinite: retry those with more damping
        if extra:
            diagonal.add_(extra * mean * failed[:, None])
        lower, info = torch.linalg.cholesky_ex(H)
        inverse = torch.cholesky_inverse(lower)
        upper, info_inverse = torch.linalg.cholesky_ex(inverse, upper=True)
        failed = (info != 0) | (info_inverse != 0)
        if not failed.any():
            return upper
    raise ValueError("GPTQ: the calibration Hessian is not positive definite even with 111x damping; raise damp")


def input_hessian(inputs: torch.Tensor) -> torch.Tensor:
    """GPTQ's proxy Hessian ``2/n * X^T X`` of layer inputs ``[..., in]`` (float32, ``[in, in]``)."""
    X = inputs.detach().reshape(-1, inputs.shape[-1]).float()
    return (2.0 / max(X.shape[0], 1)) * X.T @ X


def sqnr_db(reference: torch.Tensor, approximation: torch.Tensor) -> float:
    """Signal-to-quantization-noise ratio ``10 log10(|x|^2 / |x - x_hat|^2)`` in dB."""
    noise = (reference.float() - approximation.float()).pow(2).sum()
    return float(10 * torch.log10(reference.float().pow(2).sum() / noise.clamp(min=1e-30)))
