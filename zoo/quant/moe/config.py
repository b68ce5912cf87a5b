"""The quantization config: a dataclass that round-trips through JSON (and so through ``config.json``)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from zoo.quant.moe.modules import FP_BITS
from zoo.quant.moe.quantizers import check_bits

METHODS = ("rtn", "gptq")


@dataclass
class MoEQuantConfig:
    """Weight-only quantization of a mixture-of-experts model, expert by expert.

    Precedence for a routed expert: ``fqn_bits`` > ``allocation`` > ``expert_bits``. Routers and embeddings are
    never quantized; other ``nn.Linear`` layers follow ``fqn_bits`` > ``shared_expert_bits`` (shared experts) >
    ``linear_bits``. A width of 16 keeps a matrix in fp16.

    Args:
        expert_bits: Default width of the routed experts.
        group_size: Input columns per fp16 scale/zero group (``None`` or -1: one group per row).
        method: ``"rtn"`` (data-free) or ``"gptq"`` (needs calibration inputs).
        allocation: Mixed precision per MoE block: block FQN -> width of each expert (what GEMQ's ILP outputs).
        shared_expert_bits: Width of shared experts (Qwen-MoE / DeepSeek); 16 keeps them at full precision.
        linear_bits: Width of every other ``nn.Linear`` (attention, dense MLPs); 16 keeps them.
        fqn_bits: Overrides by fully qualified name, or ``"re:<regex>"`` matched with ``re.fullmatch``. For a routed
            expert the name is ``<experts FQN>.<index>``, e.g. ``model.layers.0.mlp.experts.3``.
        skip: Linear layers never quantized unless ``fqn_bits`` names them (FQN or ``re:`` regex).
        damp: GPTQ dampening, a fraction of the mean Hessian diagonal.
        block_size: GPTQ lazy-update block, in columns.
    """

    expert_bits: int = 4
    group_size: int | None = 128
    method: str = "rtn"
    allocation: dict[str, list[int]] = field(default_factory=dict)
    shared_expert_bits: int = FP_BITS
    linear_bits: int = FP_BITS
    fqn_bits: dict[str, int] = field(default_factory=dict)
    skip: list[str] = field(default_factory=lambda: ["re:(.*\\.)?lm_head"])
    damp: float = 0.01
    block_size: int = 128

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        for bits in [self.expert_bits, self.shared_expert_bits, self.linear_bits, *self.fqn_bits.values()]:
            _check_width(bits)
        for name, widths in self.allocation.items():
            for bits in widths:
                _check_width(bits, where=f"allocation[{name!r}]")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (inverse: :meth:`from_dict`)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> MoEQuantConfig:
        """Rebuild from :meth:`to_dict` output; unknown keys are errors."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown MoEQuantConfig keys {unknown}; known keys: {sorted(known)}")
        return cls(**values)

    def override(self, fqn: str) -> int | None:
        """The ``fqn_bits`` width that applies to ``fqn``, if any (exact names win over regexes)."""
        if fqn in self.fqn_bits:
            return self.fqn_bits[fqn]
        for pattern, bits in self.fqn_bits.items():
            if pattern.startswith("re:") and re.fullmatch(pattern[3:], fqn):
                return bits
        return None

    def skipped(self, fqn: str) -> bool:
        """Whether ``skip`` keeps this Linear layer unquantized."""
        return any(fqn == p or (p.startswith("re:") and re.fullmatch(p[3:], fqn)) for p in self.skip)

    def expert_widths(self, block: str, experts_fqn: str, num_experts: int) -> list[int]:
        """Width of each routed expert of a block."""
        widths = list(self.allocation.get(block, [self.expert_bits] * num_experts))
        if len(widths) != num_experts:
            raise ValueError(f"allocation[{block!r}] has {len(widths)} widths but the block has {num_experts} experts")
        for e in range(num_experts):
            bits = self.override(f"{experts_fqn}.{e}")
            if bits is not None:
                widths[e] = bits
        return widths


def _check_width(bits: int, where: str = "MoEQuantConfig") -> None:
    if bits != FP_BITS:
        try:
            check_bits(bits)
        except ValueError:
            raise ValueError(f"{where}: widths are 1..8 bits or 16 (unquantized), got {bits}") from None
