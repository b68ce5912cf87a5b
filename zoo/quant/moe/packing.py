"""Exact low-bit storage: b-bit integer codes packed as b bit-planes of uint8.

A matrix of ``n`` codes in ``[0, 2**b)`` takes exactly ``b * ceil(n / 8)`` bytes: plane ``k`` holds bit ``k``
of every code, eight codes per byte. Bit-planes work for any ``b`` (3 bits included) without straddling
bytes, and unpack with a handful of vectorised shifts.
"""

from __future__ import annotations

import torch

_SHIFTS = torch.arange(8, dtype=torch.uint8)


def packed_nbytes(numel: int, bits: int) -> int:
    """Bytes that :func:`pack_codes` uses for ``numel`` codes of ``bits`` bits."""
    return bits * ((numel + 7) // 8)


def pack_codes(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Pack integer codes into bit-planes.

    Args:
        codes: Integer tensor (any shape) with values in ``[0, 2**bits)``.
        bits: Bits per code, 1 to 8.

    Returns:
        uint8 tensor of shape ``[bits, ceil(numel / 8)]``.
    """
    if not 1 <= bits <= 8:
        raise ValueError(f"pack_codes packs 1 to 8 bits per code, got bits={bits}")
    flat = codes.reshape(-1).to(torch.int32)
    if flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= 1 << bits):
        raise ValueError(f"codes must lie in [0, {1 << bits}) for {bits}-bit packing")
    pad = (-flat.numel()) % 8
    if pad:
        flat = torch.cat([flat, flat.new_zeros(pad)])
    planes = torch.stack([(flat >> k) & 1 for k in range(bits)]).to(torch.uint8)  # [bits, n]
    planes = planes.view(bits, -1, 8) << _SHIFTS.to(planes.device)
    return planes.sum(-1, dtype=torch.uint8)


def unpack_codes(packed: torch.Tensor, numel: int) -> torch.Tensor:
    """Inverse of :func:`pack_codes`: the first ``numel`` codes, as a flat uint8 tensor."""
    bits = packed.shape[0]
    planes = (packed.unsqueeze(-1) >> _SHIFTS.to(packed.device)) & 1  # [bits, n/8, 8]
    planes = planes.reshape(bits, -1)[:, :numel]
    codes = planes[0].clone()
    for k in range(1, bits):
        codes |= planes[k] << k
    return codes
