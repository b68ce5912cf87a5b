"""CIM layers: drop-in replacements of ``nn.Linear`` and ``nn.Conv2d`` that simulate an analog crossbar.

A CIM layer shares the ``weight`` and ``bias`` Parameters of the float layer it replaces, so its state_dict is
the float layer's, and :func:`zoo.quant.cim.convert_from_cim` puts the very same float module (and tensors)
back. It has two regimes:

* **Digital** (not programmed, or in training mode): the float layer's computation on the target weights
  (fake-quantized when ``weight_bits`` is set, straight-through gradient), plus ``perturbation`` noise in
  training, as aihwkit-lightning's hardware-aware training.
* **Analog** (after :meth:`CIMLayer.program`, in eval mode): weights read back from the simulated PCM devices
  (programming noise, then :meth:`CIMLayer.drift`), inputs through a DAC, each tile's partial sums through an
  ADC, outputs rescaled by the global drift compensation, bias added digitally.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zoo.quant.cim.config import CIMConfig
from zoo.quant.cim.noise import (
    apply_drift,
    apply_programming_noise,
    conductances_to_weights,
    mismatch_noise,
    sample_drift_exponents,
    weights_to_conductances,
)


def symmetric_quantize(x: torch.Tensor, bits: int, scale: torch.Tensor) -> torch.Tensor:
    """Round ``x`` to ``2^(bits-1) - 1`` positive levels of ``[-scale, scale]`` (clipping outside)."""
    levels = 2 ** (bits - 1) - 1
    step = scale / levels
    return (x / step).round().clamp(-levels, levels) * step


def fake_quantize_weight(weight: torch.Tensor, bits: int | None, quantizer: str) -> torch.Tensor:
    """Symmetric uniform weight quantization with a straight-through gradient (identity if ``bits`` is None)."""
    if bits is None:
        return weight
    dims = tuple(range(1, weight.ndim)) if quantizer == "per_channel" else tuple(range(weight.ndim))
    scale = weight.detach().abs().amax(dim=dims, keepdim=True).clamp(min=1e-12)
    return weight + (symmetric_quantize(weight.detach(), bits, scale) - weight.detach())


class CIMLayer(nn.Module):
    """Base of :class:`CIMLinear` and :class:`CIMConv2d`.

    Args:
        float_module: The ``nn.Linear`` / ``nn.Conv2d`` to simulate; its Parameters are shared, not copied.
        config: How the layer is mapped and simulated.
    """

    _float_type: type[nn.Module] = nn.Module

    def __init__(self, float_module: nn.Module, config: CIMConfig) -> None:
        super().__init__()
        if not isinstance(float_module, self._float_type):
            raise TypeError(
                f"{type(self).__name__} wraps {self._float_type.__name__}, not {type(float_module).__name__}"
            )
        self.cim_config = config
        self.weight = float_module.weight
        self.bias = float_module.bias
        object.__setattr__(self, "_float_module", float_module)  # kept for the way back, not a submodule
        for name in ("programmed_g", "drift_nu", "conductance_scale", "analog_weight", "weight_range"):
            self.register_buffer(name, None, persistent=False)
        self.register_buffer("readout_baseline", None, persistent=False)
        self.register_buffer("drift_alpha", None, persistent=False)

    # ------------------------------------------------------------------------------------------ digital

    @property
    def is_programmed(self) -> bool:
        return self.analog_weight is not None

    def target_weight(self) -> torch.Tensor:
        """The weights the crossbar is programmed to (fake-quantized when ``weight_bits`` is set)."""
        cfg = self.cim_config
        return fake_quantize_weight(self.weight, cfg.weight_bits, cfg.weight_quantizer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.is_programmed and not self.training:
            return self._analog_forward(x)
        weight = self.target_weight()
        perturbation = self.cim_config.perturbation
        if self.training and perturbation.active:
            weight = weight + mismatch_noise(weight, perturbation.sigma, perturbation.form)
        return self._op(x, weight, self.bias)

    # ------------------------------------------------------------------------------------------- analog

    @torch.no_grad()
    def program(self, generator: torch.Generator | None = None) -> None:
        """Write the target weights into the simulated devices (programming noise, drift exponents).

        Args:
            generator: Random generator of the programming noise and the drift exponents.
        """
        cfg = self.cim_config
        target = self.target_weight().detach()
        self.weight_range = target.abs().max().clamp(min=1e-12)
        if cfg.noise is None:
            programmed = target.clone()
            self.programmed_g = self.drift_nu = self.conductance_scale = None
        else:
            g_plus, g_minus, scale = weights_to_conductances(target, cfg.noise.g_max)
            g_target = torch.stack((g_plus, g_minus))
            self.programmed_g = apply_programming_noise(g_target, cfg.noise, generator)
            self.drift_nu = sample_drift_exponents(g_target, cfg.noise, generator)
            self.conductance_scale = scale
            programmed = conductances_to_weights(self.programmed_g[0], self.programmed_g[1], scale)
        self.analog_weight = programmed
        self.readout_baseline = self._readout(programmed)
        self.drift_alpha = torch.ones((), dtype=programmed.dtype, device=programmed.device)

    @torch.no_grad()
    def drift(self, t_seconds: float, generator: torch.Generator | None = None) -> None:
        """Let the programmed devices drift to ``t_seconds`` after programming, then update the compensation.

        Each call starts again from the programmed conductances (same devices, same drift exponents), so a
        sweep over times follows one chip. ``drift(0)`` gives the programmed weights exactly.

        Args:
            t_seconds: Time since programming, in seconds (>= 0).
            generator: Random generator of the read noise.

        Raises:
            ValueError: If the layer was not programmed first.
        """
        if not self.is_programmed:
            raise ValueError("this CIM layer is not programmed; call zoo.quant.cim.program(model) before drift()")
        cfg = self.cim_config
        if cfg.noise is None:
            if t_seconds < 0:
                raise ValueError(f"t_seconds must be >= 0 (time since programming), not {t_seconds!r}")
            return
        g = apply_drift(self.programmed_g, self.drift_nu, t_seconds, cfg.noise, generator)
        self.analog_weight = conductances_to_weights(g[0], g[1], self.conductance_scale)
        if cfg.drift_compensation == "global":
            self.drift_alpha = self.readout_baseline / self._readout(self.analog_weight)

    def reset_programming(self) -> None:
        """Forget the simulated devices: the layer computes digitally again."""
        for name in ("programmed_g", "drift_nu", "conductance_scale", "analog_weight", "weight_range"):
            setattr(self, name, None)
        self.readout_baseline = self.drift_alpha = None

    @staticmethod
    def _readout(weight: torch.Tensor) -> torch.Tensor:
        # Mean |output| for the one-hot reference inputs of aihwkit's GlobalDriftCompensation, read through an
        # ideal periphery (aihwkit reads it through the tile's noisy periphery; with a perfect one they agree).
        return weight.abs().mean().clamp(min=1e-12)

    def _analog_forward(self, x: torch.Tensor) -> torch.Tensor:
        cfg = self.cim_config
        alpha = self.drift_alpha
        if cfg.dac_bits is None and cfg.adc_bits is None:
            return self._op(x, self.analog_weight * alpha, None) + self._bias_view(x)
        x_scale = self._input_scale(x)
        x_norm = x / x_scale
        if cfg.dac_bits is not None:
            x_norm = symmetric_quantize(x_norm, cfg.dac_bits, torch.ones((), dtype=x.dtype, device=x.device))
        w_norm = self.analog_weight / self.weight_range
        out = None
        for x_tile, w_tile in self._tiles(x_norm, w_norm):
            partial = self._op(x_tile, w_tile, None)
            if cfg.adc_bits is not None:
                bound = torch.as_tensor(cfg.adc_bound, dtype=x.dtype, device=x.device)
                partial = symmetric_quantize(partial, cfg.adc_bits, bound)
            out = partial if out is None else out + partial
        return out * (self._output_scale(x_scale) * self.weight_range * alpha) + self._bias_view(x)

    # ------------------------------------------------------------------------- per-type hooks and helpers

    def _op(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        raise NotImplementedError

    def _input_scale(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _output_scale(self, x_scale: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _bias_view(self, x: torch.Tensor) -> torch.Tensor | float:
        raise NotImplementedError

    def _tiles(self, x: torch.Tensor, weight: torch.Tensor):
        raise NotImplementedError

    def crossbar_shape(self) -> tuple[int, int]:
        """``(rows, columns)`` of the weight matrix as laid out on crossbars (inputs x outputs)."""
        raise NotImplementedError

    def to_float(self) -> nn.Module:
        """The original float module, holding this layer's current weight and bias Parameters."""
        float_module = self._float_module
        float_module.weight = self.weight
        float_module.bias = self.bias
        return float_module

    def extra_repr(self) -> str:
        cfg = self.cim_config
        state = "programmed" if self.is_programmed else "digital"
        return (
            f"{self._float_module.extra_repr()}, weight_bits={cfg.weight_bits}, dac_bits={cfg.dac_bits}, "
            f"adc_bits={cfg.adc_bits}, noise={'pcm' if cfg.noise else None}, {state}"
        )


class CIMLinear(CIMLayer):
    """``nn.Linear`` on a simulated crossbar (see :class:`CIMLayer`).

    Args:
        float_module: The ``nn.Linear`` to simulate (its Parameters are shared).
        config: How the layer is mapped and simulated.
    """

    _float_type = nn.Linear

    def _op(self, x, weight, bias):
        return F.linear(x, weight, bias)

    def _input_scale(self, x):
        return x.detach().abs().amax(dim=-1, keepdim=True).clamp(min=1e-12)

    def _output_scale(self, x_scale):
        return x_scale

    def _bias_view(self, x):
        return 0.0 if self.bias is None else self.bias

    def _tiles(self, x, weight):
        size = self.cim_config.tile_size
        for start in range(0, weight.shape[1], size):
            yield x[..., start : start + size], weight[:, start : start + size]

    def crossbar_shape(self) -> tuple[int, int]:
        return self.weight.shape[1], self.weight.shape[0]


class CIMConv2d(CIMLayer):
    """``nn.Conv2d`` on a simulated crossbar (see :class:`CIMLayer`); inputs are unrolled into
    ``in_channels / groups * kh * kw`` crossbar rows, split into tiles along the input channels.

    The DAC range is per image (abs-max over channels and pixels) rather than per unrolled patch.

    Args:
        float_module: The ``nn.Conv2d`` to simulate (its Parameters are shared).
        config: How the layer is mapped and simulated.
    """

    _float_type = nn.Conv2d

    def __init__(self, float_module: nn.Conv2d, config: CIMConfig) -> None:
        if float_module.padding_mode != "zeros":
            raise ValueError(f"CIMConv2d supports padding_mode='zeros' only, not {float_module.padding_mode!r}")
        super().__init__(float_module, config)

    def _op(self, x, weight, bias):
        conv = self._float_module
        return F.conv2d(x, weight, bias, conv.stride, conv.padding, conv.dilation, conv.groups)

    def _input_scale(self, x):
        dims = tuple(range(1, x.ndim))
        return x.detach().abs().amax(dim=dims, keepdim=True).clamp(min=1e-12)

    def _output_scale(self, x_scale):
        return x_scale

    def _bias_view(self, x):
        return 0.0 if self.bias is None else self.bias.view(-1, 1, 1)

    def _tiles(self, x, weight):
        conv = self._float_module
        if conv.groups != 1:  # grouped convolutions: one tile per group, as their rows are few
            yield x, weight
            return
        kernel = weight.shape[2] * weight.shape[3]
        channels = max(1, self.cim_config.tile_size // kernel)
        for start in range(0, weight.shape[1], channels):
            yield x[:, start : start + channels], weight[:, start : start + channels]

    def crossbar_shape(self) -> tuple[int, int]:
        out_channels, in_per_group, kh, kw = self.weight.shape
        return in_per_group * kh * kw, out_channels


CIM_LAYER_TYPES: dict[type[nn.Module], type[CIMLayer]] = {nn.Linear: CIMLinear, nn.Conv2d: CIMConv2d}
