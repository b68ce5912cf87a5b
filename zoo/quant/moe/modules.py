"""Packed storage with dequantize-on-the-fly forward.

* :class:`PackedMatrix`: one ``[out, in]`` matrix as bit-planes (:mod:`.packing`) + fp16 scale and zero per group,
  or plain fp16 when ``bits == 16``. Its buffers are what a saved quantized model holds.
* :class:`PackedLinear`: an ``nn.Linear`` replacement (per-expert Linear experts, attention, dense MLPs).
* :class:`PackedExperts`: replaces a fused 3-D expert parameter ``[E, out, in]`` (transformers 5.x layout). It is a
  *tensor-like* module: ``experts.gate_up_proj[e]`` dequantizes expert ``e`` only (what the eager expert loop
  does), and any torch function applied to it (``grouped_mm``, ``bmm``, ...) sees the full dequantized tensor
  through ``__torch_function__``. Each expert keeps its own bit-width.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from zoo.quant.moe.packing import pack_codes, packed_nbytes, unpack_codes
from zoo.quant.moe.quantizers import QuantizedMatrix, dequantize, group_width

FP_BITS = 16


class PackedMatrix(nn.Module):
    """A quantized ``[out, in]`` matrix in packed form.

    Args:
        out_features: Rows.
        in_features: Columns.
        bits: 1..8, or 16 for fp16 storage (not quantized).
        group_size: Columns per scale/zero group (``None`` or -1: one per row).
    """

    def __init__(self, out_features: int, in_features: int, bits: int, group_size: int | None = 128) -> None:
        super().__init__()
        self.out_features, self.in_features, self.bits = out_features, in_features, int(bits)
        self.group_size = group_width(in_features, group_size)
        if self.bits == FP_BITS:
            self.register_buffer("weight", torch.zeros(out_features, in_features, dtype=torch.float16))
            return
        groups = math.ceil(in_features / self.group_size)
        self.register_buffer(
            "qweight", torch.zeros(self.bits, packed_nbytes(out_features * in_features, 1), dtype=torch.uint8)
        )
        self.register_buffer("scale", torch.zeros(out_features, groups, dtype=torch.float16))
        self.register_buffer("zero", torch.zeros(out_features, groups, dtype=torch.float16))

    @classmethod
    def from_quantized(cls, quantized: QuantizedMatrix) -> PackedMatrix:
        """Pack the codes of a :class:`QuantizedMatrix`."""
        out_features, in_features = quantized.codes.shape
        packed = cls(out_features, in_features, quantized.bits, quantized.group_size).to(quantized.codes.device)
        packed.qweight.copy_(pack_codes(quantized.codes, quantized.bits))
        packed.scale.copy_(quantized.scale)
        packed.zero.copy_(quantized.zero)
        return packed

    @classmethod
    def from_float(cls, weight: torch.Tensor) -> PackedMatrix:
        """Keep ``weight`` unquantized, stored in fp16."""
        packed = cls(*weight.shape, FP_BITS).to(weight.device)
        packed.weight.copy_(weight.detach())
        return packed

    def codes(self) -> torch.Tensor:
        """The uint8 integer codes ``[out, in]`` (unpacked)."""
        return unpack_codes(self.qweight, self.out_features * self.in_features).view(
            self.out_features, self.in_features
        )

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The weights the model computes with, ``[out, in]``."""
        if self.bits == FP_BITS:
            return self.weight.to(dtype)
        return dequantize(self.codes(), self.scale, self.zero, self.group_size).to(dtype)

    def nbytes(self) -> int:
        """Measured bytes of the stored buffers (codes + scales + zeros)."""
        return sum(b.numel() * b.element_size() for b in self.buffers())

    def _apply(self, fn, recurse=True):
        # Device moves apply; dtype casts (model.float(), model.half()) must not change the storage format.
        dtypes = {name: buf.dtype for name, buf in self._buffers.items() if buf is not None}
        super()._apply(fn, recurse)
        for name, dtype in dtypes.items():
            if self._buffers[name].dtype != dtype:
                self._buffers[name] = self._buffers[name].to(dtype)
        return self

    def extra_repr(self) -> str:
        return f"{self.out_features}x{self.in_features}, bits={self.bits}, group_size={self.group_size}"


class PackedLinear(nn.Module):
    """Drop-in ``nn.Linear`` with a packed weight, dequantized at each forward.

    Args:
        packed: The packed weight.
        bias: Optional bias (kept in float).
    """

    def __init__(self, packed: PackedMatrix, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        self.packed = packed
        self.in_features, self.out_features = packed.in_features, packed.out_features
        self.bias = nn.Parameter(bias.detach().clone(), requires_grad=False) if bias is not None else None

    @property
    def weight(self) -> torch.Tensor:
        """The dequantized weight (computed on access)."""
        return self.packed.dequantize()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.packed.dequantize(x.dtype), None if self.bias is None else self.bias.to(x.dtype))

    def nbytes(self) -> int:
        return self.packed.nbytes()


class PackedExperts(nn.Module):
    """A fused expert parameter ``[E, out, in]`` (or ``[E, in, out]`` when ``transposed``) stored packed per expert.

    Indexing with an expert id returns that expert's dequantized matrix in the original layout; any other torch
    operation receives the full dequantized ``[E, ...]`` tensor.

    Args:
        slices: One :class:`PackedMatrix` per expert, each ``[out, in]``.
        transposed: The original parameter stores ``[in, out]`` per expert.
        dtype: Dtype the dequantized weights are returned in.
    """

    def __init__(self, slices: list[PackedMatrix], transposed: bool = False, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.slices = nn.ModuleList(slices)
        self.transposed = transposed
        self._dtype = dtype

    @property
    def bits(self) -> list[int]:
        """Bit-width of each expert."""
        return [s.bits for s in self.slices]

    @property
    def shape(self) -> torch.Size:
        out_features, in_features = self.slices[0].out_features, self.slices[0].in_features
        dims = (in_features, out_features) if self.transposed else (out_features, in_features)
        return torch.Size((len(self.slices), *dims))

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    @property
    def ndim(self) -> int:
        return 3

    def dim(self) -> int:
        return 3

    @property
    def dtype(self) -> torch.dtype:
        return self._dtype

    @property
    def device(self) -> torch.device:
        return next(self.buffers()).device

    @property
    def requires_grad(self) -> bool:
        return False

    def __len__(self) -> int:
        return len(self.slices)

    def expert(self, index: int) -> torch.Tensor:
        """Expert ``index``'s dequantized matrix in the original layout."""
        weight = self.slices[int(index)].dequantize(self._dtype)
        return weight.T if self.transposed else weight

    def __getitem__(self, index):
        if isinstance(index, int) or (isinstance(index, torch.Tensor) and index.dim() == 0):
            return self.expert(int(index))
        return self.materialize()[index]

    def materialize(self) -> torch.Tensor:
        """All experts dequantized, ``[E, ...]`` in the original layout."""
        return torch.stack([self.expert(e) for e in range(len(self.slices))])

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("_") or not hasattr(torch.Tensor, name):
                raise
        return getattr(self.materialize(), name)  # tensor methods (.transpose, .view, ...) on the full tensor

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        def unwrap(value):
            if isinstance(value, PackedExperts):
                return value.materialize()
            if isinstance(value, list | tuple):
                return type(value)(unwrap(v) for v in value)
            return value

        return func(*unwrap(args), **{k: unwrap(v) for k, v in (kwargs or {}).items()})

    def nbytes(self) -> int:
        return sum(s.nbytes() for s in self.slices)

    def extra_repr(self) -> str:
        return f"experts={len(self.slices)}, bits={self.bits}, transposed={self.transposed}"


def packed_bytes(module: nn.Module) -> int:
    """Measured bytes of every packed matrix inside ``module``."""
    return sum(m.nbytes() for m in module.modules() if isinstance(m, PackedMatrix))
