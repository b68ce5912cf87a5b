"""Finding the MoE blocks of a model and reading/writing their experts, whatever the storage.

An :class:`MoELayer` bundles a block's router, its routed experts (behind an :class:`ExpertsAdapter`) and its
shared experts. Two adapters cover the Hugging Face layouts:

* :class:`FusedExperts`: transformers 5.x stores all experts of a block as 3-D parameters, e.g. Mixtral's
  ``experts.gate_up_proj [E, 2I, H]`` and ``experts.down_proj [E, H, I]`` (``is_transposed`` models store
  ``[E, in, out]``). Expert ``e`` is the slice ``[e]`` of each tensor.
* :class:`LinearListExperts`: an ``nn.ModuleList`` of per-expert modules holding ``nn.Linear`` layers
  (transformers 4.x Mixtral ``w1/w2/w3``, many research codebases).

Blocks are found *by parameter*: a module with a router child (``gate`` or ``router``, a 2-D ``weight`` of shape
``[E, hidden]``) and an ``experts`` child that either is a list of ``E`` modules or owns 3-D parameters with leading
dimension ``E``. Any other model plugs in through a detector: a function ``(fqn, module, model) -> MoELayer | None``
passed as ``detectors=`` or registered with :func:`register_moe_detector`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from zoo.quant.moe.modules import PackedExperts, PackedLinear, PackedMatrix

ROUTER_NAMES = ("gate", "router")
EXPERTS_NAMES = ("experts",)


class ExpertsAdapter(ABC):
    """How to read, write, run and pack the routed experts of one MoE block.

    Every expert consists of the same named matrices, each seen as ``[out, in]`` (``in`` is the axis GPTQ works
    along). Subclass this for a new expert layout.
    """

    num_experts: int

    @property
    @abstractmethod
    def names(self) -> tuple[str, ...]:
        """Matrix names of one expert, in the order the forward pass applies them."""

    @abstractmethod
    def weight(self, name: str, expert: int) -> torch.Tensor:
        """Expert ``expert``'s matrix ``name`` as a float ``[out, in]`` tensor (dequantized if packed)."""

    @abstractmethod
    def set_weight(self, name: str, expert: int, value: torch.Tensor) -> None:
        """Overwrite a float matrix in place (used for fake quantization and restoring)."""

    @abstractmethod
    def matrix_inputs(self, expert: int, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """The input each matrix of ``expert`` sees when it processes tokens ``x`` ``[n, hidden]``."""

    @abstractmethod
    def pack(self, name: str, slices: list[PackedMatrix]) -> None:
        """Replace the float storage of matrix ``name`` of every expert by packed matrices."""

    @abstractmethod
    def packed(self, name: str) -> list[PackedMatrix] | None:
        """The packed matrices of ``name`` per expert, or None if still in float."""

    def float_numel(self) -> int:
        """Weights of all experts (for the fp16 byte count)."""
        return sum(self.weight(name, 0).numel() for name in self.names) * self.num_experts


class FusedExperts(ExpertsAdapter):
    """Experts stored as 3-D parameters ``[E, out, in]`` (or ``[E, in, out]`` with ``transposed``).

    Args:
        module: The experts module.
        names: Its fused parameters in forward order; default: every 3-D parameter, ``down``-named ones last.
        transposed: Slices are ``[in, out]``; default: ``module.is_transposed`` (transformers' flag) or False.
    """

    def __init__(self, module: nn.Module, names: tuple[str, ...] | None = None, transposed: bool | None = None):
        self.module = module
        found = [n for n, p in module.named_parameters(recurse=False) if p.dim() == 3]
        found += [n for n, m in module.named_children() if isinstance(m, PackedExperts)]
        self._names = tuple(names or sorted(found, key=lambda n: ("down" in n, n)))
        if not self._names:
            raise ValueError(f"{type(module).__name__} has no 3-D expert parameters")
        self.transposed = bool(getattr(module, "is_transposed", False) if transposed is None else transposed)
        self.num_experts = int(self._tensor(self._names[0]).shape[0])

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    def _tensor(self, name: str):
        return getattr(self.module, name)

    def weight(self, name: str, expert: int) -> torch.Tensor:
        tensor = self._tensor(name)
        slice_ = tensor.expert(expert) if isinstance(tensor, PackedExperts) else tensor[expert].detach()
        return slice_.T if self.transposed else slice_

    def set_weight(self, name: str, expert: int, value: torch.Tensor) -> None:
        tensor = self._tensor(name)
        if isinstance(tensor, PackedExperts):
            raise RuntimeError(f"{name} is already packed; fake quantization works on float experts")
        with torch.no_grad():
            tensor[expert].copy_(value.T if self.transposed else value)

    def _gate(self, projected: torch.Tensor) -> torch.Tensor:
        if hasattr(self.module, "_apply_gate"):
            return self.module._apply_gate(projected)
        gate, up = projected.chunk(2, dim=-1)
        return self.module.act_fn(gate) * up

    def matrix_inputs(self, expert: int, x: torch.Tensor) -> dict[str, torch.Tensor]:
        if len(self._names) != 2:
            raise NotImplementedError(
                f"FusedExperts runs gated [gate_up, down] experts; {self._names} needs its own ExpertsAdapter"
            )
        first, second = self._names
        projected = F.linear(x, self.weight(first, expert))
        if getattr(self.module, "has_bias", False) and hasattr(self.module, f"{first}_bias"):
            projected = projected + getattr(self.module, f"{first}_bias")[expert]
        hidden = self._gate(projected) if getattr(self.module, "has_gate", True) else self.module.act_fn(projected)
        return {first: x, second: hidden}

    def pack(self, name: str, slices: list[PackedMatrix]) -> None:
        dtype = self._tensor(name).dtype
        del self.module._parameters[name]
        self.module.add_module(name, PackedExperts(slices, transposed=self.transposed, dtype=dtype))

    def packed(self, name: str) -> list[PackedMatrix] | None:
        tensor = self._tensor(name)
        return list(tensor.slices) if isinstance(tensor, PackedExperts) else None


class LinearListExperts(ExpertsAdapter):
    """Experts as a list of modules that hold ``nn.Linear`` layers (e.g. Mixtral 4.x ``w1, w3, w2``).

    Args:
        experts: The list of expert modules.
    """

    def __init__(self, experts: nn.ModuleList) -> None:
        self.experts = experts
        self.num_experts = len(experts)
        self._names = self._forward_order()

    def _linears(self, expert: int) -> dict[str, nn.Module]:
        return {n: m for n, m in self.experts[expert].named_modules() if isinstance(m, nn.Linear | PackedLinear) and n}

    def _forward_order(self) -> tuple[str, ...]:
        linears = self._linears(0)
        in_features = next(iter(linears.values())).in_features
        order: list[str] = []

        def record(name: str):
            def hook(_module, _args, _output) -> None:
                order.append(name)

            return hook

        hooks = [m.register_forward_hook(record(n)) for n, m in linears.items()]
        try:
            with torch.no_grad():
                self.experts[0](torch.zeros(1, in_features, device=next(iter(linears.values())).weight.device))
        finally:
            for hook in hooks:
                hook.remove()
        return tuple(dict.fromkeys(order)) or tuple(linears)

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    def weight(self, name: str, expert: int) -> torch.Tensor:
        module = self._linears(expert)[name]
        return module.packed.dequantize() if isinstance(module, PackedLinear) else module.weight.detach()

    def set_weight(self, name: str, expert: int, value: torch.Tensor) -> None:
        module = self._linears(expert)[name]
        if isinstance(module, PackedLinear):
            raise RuntimeError(f"{name} of expert {expert} is already packed")
        with torch.no_grad():
            module.weight.copy_(value)

    def matrix_inputs(self, expert: int, x: torch.Tensor) -> dict[str, torch.Tensor]:
        captured: dict[str, torch.Tensor] = {}
        linears = self._linears(expert)

        def record(name: str):
            def hook(_module, args, _output) -> None:  # returns None: the output is left alone
                captured.setdefault(name, args[0].detach())

            return hook

        hooks = [m.register_forward_hook(record(n)) for n, m in linears.items()]
        try:
            with torch.no_grad():
                self.experts[expert](x)
        finally:
            for hook in hooks:
                hook.remove()
        return captured

    def pack(self, name: str, slices: list[PackedMatrix]) -> None:
        for expert, packed in enumerate(slices):
            parent_name, _, child = name.rpartition(".")
            parent = self.experts[expert].get_submodule(parent_name) if parent_name else self.experts[expert]
            linear = getattr(parent, child)
            setattr(parent, child, PackedLinear(packed, linear.bias))

    def packed(self, name: str) -> list[PackedMatrix] | None:
        modules = [self._linears(e)[name] for e in range(self.num_experts)]
        return [m.packed for m in modules] if all(isinstance(m, PackedLinear) for m in modules) else None


@dataclass
class MoELayer:
    """One MoE block of a model.

    Args:
        name: Fully qualified name of the block.
        block: The block; ``block(x)`` with ``x [batch, seq, hidden]`` is its full forward (router, experts,
            shared experts), used to measure output errors.
        router: The router; its ``weight`` ``[E, hidden]`` gives the routing logits.
        experts: Adapter over the routed experts.
        top_k: Experts per token.
        shared: Shared-expert ``nn.Linear`` layers by fully qualified name (not routed; kept high).
        experts_name: Fully qualified name of the experts container (default ``<name>.experts``); expert ``e`` is
            addressed as ``<experts_name>.<e>`` in per-FQN overrides.
    """

    name: str
    block: nn.Module
    router: nn.Module
    experts: ExpertsAdapter
    top_k: int
    shared: dict[str, nn.Module] = field(default_factory=dict)
    experts_name: str = ""

    def __post_init__(self) -> None:
        if not self.experts_name:
            self.experts_name = f"{self.name}.experts" if self.name else "experts"

    @property
    def num_experts(self) -> int:
        return self.experts.num_experts

    def router_logits(self, x: torch.Tensor) -> torch.Tensor:
        """Routing logits ``[n, E]`` of hidden states ``x [..., hidden]``."""
        weight = self.router.weight
        return F.linear(x.reshape(-1, weight.shape[-1]).to(weight.dtype), weight, getattr(self.router, "bias", None))

    def route(self, x: torch.Tensor) -> torch.Tensor:
        """Indices ``[n, top_k]`` of the experts each token of ``x`` goes to."""
        return self.router_logits(x).topk(self.top_k, dim=-1).indices


Detector = Callable[[str, nn.Module, nn.Module], "MoELayer | None"]
_DETECTORS: list[Detector] = []


def register_moe_detector(detector: Detector) -> Detector:
    """Teach :func:`find_moe_layers` a new MoE layout; usable as a decorator.

    Args:
        detector: ``(fqn, module, model) -> MoELayer | None``; it is tried on every module before the built-in rules.
    """
    _DETECTORS.append(detector)
    return detector


def _top_k(block: nn.Module, router: nn.Module, model: nn.Module) -> int:
    for owner in (router, block, getattr(model, "config", None)):
        for attr in ("top_k", "num_experts_per_tok"):
            value = getattr(owner, attr, None) if owner is not None else None
            if isinstance(value, int) and value > 0:
                return value
    raise ValueError(f"cannot tell how many experts per token {type(block).__name__} uses; pass a detector")


def detect_hf_moe(name: str, module: nn.Module, model: nn.Module) -> MoELayer | None:
    """The built-in rule: a router child with a 2-D weight and an ``experts`` child (fused or list)."""
    router = next((getattr(module, n) for n in ROUTER_NAMES if isinstance(getattr(module, n, None), nn.Module)), None)
    experts = next((getattr(module, n) for n in EXPERTS_NAMES if isinstance(getattr(module, n, None), nn.Module)), None)
    weight = getattr(router, "weight", None)
    if experts is None or not isinstance(weight, torch.Tensor) or weight.dim() != 2 or weight.shape[0] < 2:
        return None
    num_experts = weight.shape[0]
    if isinstance(experts, nn.ModuleList) and len(experts) == num_experts:
        adapter: ExpertsAdapter = LinearListExperts(experts)
    else:
        fused = [p for p in experts.parameters(recurse=False) if p.dim() == 3 and p.shape[0] == num_experts]
        packed = [m for m in experts.children() if isinstance(m, PackedExperts)]
        if not fused and not packed:
            return None
        adapter = FusedExperts(experts)
    prefix = f"{name}." if name else ""
    shared = {
        f"{prefix}{child}.{n}": m
        for child, sub in module.named_children()
        if "shared" in child
        for n, m in sub.named_modules()
        if isinstance(m, nn.Linear | PackedLinear) and n and m.out_features > 1
    }
    shared.update(
        {
            f"{prefix}{child}": sub
            for child, sub in module.named_children()
            if "shared" in child and isinstance(sub, nn.Linear | PackedLinear) and sub.out_features > 1
        }
    )
    return MoELayer(name, module, router, adapter, _top_k(module, router, model), shared)


def find_moe_layers(model: nn.Module, detectors: list[Detector] | None = None) -> list[MoELayer]:
    """Every MoE block of ``model``, in module order.

    Args:
        model: Any torch model.
        detectors: Extra detectors tried before the registered ones and the built-in rule.

    Raises:
        ValueError: If no MoE block is found.
    """
    rules = [*(detectors or []), *_DETECTORS, detect_hf_moe]
    layers, claimed = [], set()
    for name, module in model.named_modules():
        if any(name == c or name.startswith(f"{c}.") for c in claimed):
            continue
        for rule in rules:
            layer = rule(name, module, model)
            if layer is not None:
                layers.append(layer)
                claimed.add(name)
                break
    if not layers:
        raise ValueError(
            f"no MoE block found in {type(model).__name__}: expected a router ('gate'/'router' with a [E, hidden] "
            "weight) next to 'experts'; register a detector with zoo.quant.moe.register_moe_detector"
        )
    return layers
