"""Configuration of compute-in-memory (CIM) layers: dataclasses that round-trip through JSON.

The split follows IBM aihwkit's ``InferenceRPUConfig`` and aihwkit-lightning's ``TorchInferenceRPUConfig``
(weight noise for hardware-aware training, input/output periphery, a device noise model, drift compensation,
weight clipping), in torchao's shape: one config dataclass handed to one in-place entry point,
:func:`zoo.quant.cim.convert_to_cim`. Every field is a primitive, a tuple or a nested dataclass, so a config is
stored in ``config.json`` (``CIMConfig.to_dict``) and rebuilt exactly (``CIMConfig.from_dict``).
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any

PERTURBATION_FORMS = ("none", "additive", "multiplicative")
WEIGHT_QUANTIZERS = ("per_channel", "per_tensor")
CLIP_TYPES = ("none", "fixed", "sigma")
DRIFT_COMPENSATIONS = ("none", "global")


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, not {value!r}")


def _check_bits(name: str, value: int | None) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 2 <= value <= 16):
        raise ValueError(f"{name} must be an integer from 2 to 16 or None (no quantization), not {value!r}")


@dataclass
class WeightPerturbation:
    """Training-time weight noise (hardware-aware training), drawn afresh at every training forward.

    ``additive`` is max-scaled per layer, ``w + sigma * max|W| * eps``; ``multiplicative`` is
    ``w * (1 + sigma * eps)``, with ``eps ~ N(0, 1)`` i.i.d. per weight. The bias is never perturbed.

    Args:
        form: ``"none"``, ``"additive"`` or ``"multiplicative"``.
        sigma: The mismatch level (relative standard deviation).
    """

    form: str = "none"
    sigma: float = 0.0

    def __post_init__(self) -> None:
        _check_choice("WeightPerturbation.form", self.form, PERTURBATION_FORMS)
        if not self.sigma >= 0:
            raise ValueError(f"WeightPerturbation.sigma must be >= 0, not {self.sigma!r}")

    @property
    def active(self) -> bool:
        return self.form != "none" and self.sigma > 0


@dataclass
class PCMNoise:
    """Phase-change-memory device model, as in aihwkit's ``PCMLikeNoiseModel`` (Nandakumar et al., ICECS 2019).

    Each weight is a pair of devices (``g+``, ``g-``), the largest target weight mapped to ``g_max``.

    * Programming noise: ``g_prog = max(0, g + prog_noise_scale * s * sigma_prog(g) * eps)`` with
      ``sigma_prog(g) = sum_i prog_coeff[i] (g / g_max)^i`` and ``s = g_max / prog_coeff_g_max_reference``.
    * Drift: ``g(t) = g_prog * ((t + t0) / t0)^(-nu)``; per-device ``nu ~ |N(mu_nu(g), sigma_nu(g))|``,
      ``mu_nu = clip(a ln(g/g_max) + b)`` and ``sigma_nu = clip(c ln(g/g_max) + d)`` (coefficients below).
    * Read (1/f) noise accumulated since programming:
      ``g(t) += |g(t)| * read_noise_scale * q_s * sqrt(ln((t + t0 + t_read) / (2 t_read))) * eps`` with
      ``q_s = min(read_q_max, read_q_coeff / max((g_prog / g_max)^read_q_exponent, 1e-3))``.

    Args:
        g_max: Maximal conductance in microsiemens.
        prog_coeff: Polynomial coefficients of the programming-noise standard deviation (in uS).
        prog_coeff_g_max_reference: The ``g_max`` (uS) at which ``prog_coeff`` were fitted.
        prog_noise_scale: Scale of the programming noise (0 switches it off).
        read_noise_scale: Scale of the 1/f read noise (0 switches it off).
        drift_scale: Scale of the drift exponents (0 switches drift off).
        t0: Time (s) of the first read after programming; drift is measured relative to it.
        t_read: Duration (s) of one read, a parameter of the 1/f fit.
        nu_mean_coeff: ``(a, b)`` of ``mu_nu``.
        nu_mean_clip: ``(low, high)`` clip of ``mu_nu``.
        nu_std_coeff: ``(c, d)`` of ``sigma_nu``.
        nu_std_clip: ``(low, high)`` clip of ``sigma_nu``.
        read_q_coeff: Prefactor of ``q_s``.
        read_q_exponent: Exponent of ``g_prog / g_max`` in ``q_s``.
        read_q_max: Upper clip of ``q_s``.
    """

    g_max: float = 25.0
    prog_coeff: tuple[float, ...] = (0.26348, 1.9650, -1.1731)
    prog_coeff_g_max_reference: float = 25.0
    prog_noise_scale: float = 1.0
    read_noise_scale: float = 1.0
    drift_scale: float = 1.0
    t0: float = 20.0
    t_read: float = 250e-9
    nu_mean_coeff: tuple[float, float] = (-0.0155, 0.0244)
    nu_mean_clip: tuple[float, float] = (0.049, 0.1)
    nu_std_coeff: tuple[float, float] = (-0.0125, -0.0059)
    nu_std_clip: tuple[float, float] = (0.008, 0.045)
    read_q_coeff: float = 0.0088
    read_q_exponent: float = 0.65
    read_q_max: float = 0.2

    def __post_init__(self) -> None:
        for name in ("prog_coeff", "nu_mean_coeff", "nu_mean_clip", "nu_std_coeff", "nu_std_clip"):
            setattr(self, name, tuple(float(v) for v in getattr(self, name)))
        if not self.g_max > 0:
            raise ValueError(f"PCMNoise.g_max must be > 0 microsiemens, not {self.g_max!r}")
        if not (self.t0 > 0 and self.t_read > 0):
            raise ValueError("PCMNoise.t0 and PCMNoise.t_read must be > 0 seconds")
        for name in ("prog_noise_scale", "read_noise_scale", "drift_scale"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"PCMNoise.{name} must be >= 0, not {getattr(self, name)!r}")


@dataclass
class WeightClip:
    """Weight clipping after every optimizer step (applied by :class:`zoo.quant.cim.CIMWeightClipping`).

    Args:
        type: ``"none"``; ``"fixed"`` clips to ``[-value, value]``; ``"sigma"`` clips each layer to
            ``value`` standard deviations of its weights (aihwkit's ``LAYER_GAUSSIAN``).
        value: The bound, or the number of standard deviations.
    """

    type: str = "none"
    value: float = 2.5

    def __post_init__(self) -> None:
        _check_choice("WeightClip.type", self.type, CLIP_TYPES)
        if self.type != "none" and not self.value > 0:
            raise ValueError(f"WeightClip.value must be > 0, not {self.value!r}")


@dataclass
class CIMConfig:
    """How a Linear or Conv2d layer is mapped to an analog crossbar and simulated.

    An unprogrammed CIM layer computes exactly what the float layer computes (plus ``perturbation`` noise and
    weight fake-quantization in training). After :func:`zoo.quant.cim.program` it computes like the chip:
    weights read from the simulated devices, inputs through a DAC, each tile's partial sums through an ADC,
    outputs rescaled by the drift compensation.

    Args:
        weight_bits: Bits of the target weights (symmetric uniform), None for analog (unquantized) targets.
        weight_quantizer: ``"per_channel"`` (one scale per output) or ``"per_tensor"``.
        dac_bits: Input DAC bits (signed, per-vector abs-max range), None for an ideal input path.
        adc_bits: Output ADC bits per tile column, None for an ideal output path.
        adc_bound: ADC range ``[-adc_bound, adc_bound]`` in normalised units (inputs scaled to ``|x| <= 1``,
            weights to ``|w| <= 1``), as aihwkit's ``out_bound``.
        tile_size: Rows and columns of one crossbar; layers larger than that span several tiles, each with
            its own ADC conversions (partial sums are added digitally).
        perturbation: Training-time weight noise.
        noise: Device model used by ``program``/``drift``; None programs the exact target weights.
        drift_compensation: ``"global"`` rescales each layer's output by the ratio of a reference readout
            right after programming to the same readout now (aihwkit's ``GlobalDriftCompensation``);
            ``"none"`` leaves drifted outputs as they are.
        clip: Weight clipping during training.
    """

    weight_bits: int | None = None
    weight_quantizer: str = "per_channel"
    dac_bits: int | None = 8
    adc_bits: int | None = 8
    adc_bound: float = 12.0
    tile_size: int = 256
    perturbation: WeightPerturbation = field(default_factory=WeightPerturbation)
    noise: PCMNoise | None = field(default_factory=PCMNoise)
    drift_compensation: str = "global"
    clip: WeightClip = field(default_factory=WeightClip)

    def __post_init__(self) -> None:
        # Nested values arrive as dicts from JSON / LightningCLI; rebuild them.
        if isinstance(self.perturbation, dict):
            self.perturbation = WeightPerturbation(**self.perturbation)
        if isinstance(self.noise, dict):
            self.noise = PCMNoise(**self.noise)
        if isinstance(self.clip, dict):
            self.clip = WeightClip(**self.clip)
        _check_bits("CIMConfig.weight_bits", self.weight_bits)
        _check_bits("CIMConfig.dac_bits", self.dac_bits)
        _check_bits("CIMConfig.adc_bits", self.adc_bits)
        _check_choice("CIMConfig.weight_quantizer", self.weight_quantizer, WEIGHT_QUANTIZERS)
        _check_choice("CIMConfig.drift_compensation", self.drift_compensation, DRIFT_COMPENSATIONS)
        if not self.adc_bound > 0:
            raise ValueError(f"CIMConfig.adc_bound must be > 0, not {self.adc_bound!r}")
        if not (isinstance(self.tile_size, int) and self.tile_size >= 1):
            raise ValueError(f"CIMConfig.tile_size must be a positive integer, not {self.tile_size!r}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (tuples become lists)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CIMConfig:
        """Rebuild a config written by :meth:`to_dict`.

        Raises:
            ValueError: On an unknown key, naming the accepted ones.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown CIMConfig keys {unknown}; accepted: {sorted(known)}")
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> CIMConfig:
        return cls.from_dict(json.loads(text))


@dataclass
class FqnToCIMConfig:
    """Per-module configs, torchao's ``FqnToConfig`` shape.

    Keys are fully qualified module names (``"layer1.0.conv1"``) or regular expressions prefixed ``"re:"``
    (``"re:layer4\\..*"``); a value of None keeps the module digital. The first exact name wins, then the
    first matching regex in insertion order, then ``default``.

    Args:
        fqn_to_config: Module name or ``"re:<pattern>"`` -> config (or None for digital).
        default: Config of every other Linear/Conv2d (None keeps them digital).
    """

    fqn_to_config: dict[str, CIMConfig | None] = field(default_factory=dict)
    default: CIMConfig | None = None

    def __post_init__(self) -> None:
        self.fqn_to_config = {k: CIMConfig(**v) if isinstance(v, dict) else v for k, v in self.fqn_to_config.items()}
        if isinstance(self.default, dict):
            self.default = CIMConfig(**self.default)
        for key in self.fqn_to_config:
            if key.startswith("re:"):
                try:
                    re.compile(key[3:])
                except re.error as error:
                    raise ValueError(f"FqnToCIMConfig key {key!r} is not a valid regex: {error}") from None

    def config_for(self, fqn: str) -> CIMConfig | None:
        """The config of the module named ``fqn`` (None: keep it digital)."""
        if fqn in self.fqn_to_config:
            return self.fqn_to_config[fqn]
        for key, config in self.fqn_to_config.items():
            if key.startswith("re:") and re.fullmatch(key[3:], fqn):
                return config
        return self.default

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FqnToCIMConfig:
        return cls(**data)
