"""The two conditional PDE tasks: what the network sees, what the residual checks, and the data splits.

A task turns solver output into training pairs ``(x0, condition)``: ``x0`` is the solution field divided
by ``field_scale`` (so it is O(1) for the diffusion model), ``condition`` is kept in physical units and
encoded for the network by :meth:`PDETask.encode_condition`. :meth:`PDETask.residual` maps a predicted
``x0`` back to physical units and applies the solver's own discrete operator.

Splits (the OOD protocol; reconstructed, the authors' code has none):

* Poisson: ``id`` = 2 charges, ``|q|`` in [0.5, 1.5] anywhere on the interior;
  ``ood_k4`` = 4 charges; ``ood_strong`` = ``|q|`` in [1.5, 2.5];
  ``ood_wall`` = charges within 3 nodes of the wall (shifted boundary layer, rarely seen in training).
* Darcy: ``id`` = ``f = 1`` everywhere, GRF length 0.1; ``ood_source`` = the source confined to the upper-right
  quarter of the domain (a source configuration never seen in training); ``ood_fine`` = GRF length 0.05.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from zoo.repa_p.pde import (
    SPECTRAL_MODES,
    ChargeConfig,
    DarcyConfig,
    darcy_residual,
    darcy_source,
    grid_spacing,
    poisson_residual,
    sample_charges,
    sample_permeability,
    solve_darcy,
    solve_poisson,
    spectral_residual,
)

__all__ = ["TASKS", "PDETask", "DarcyTask", "PoissonTask", "get_task"]


class PDETask:
    """Interface of a conditional PDE task.

    Args:
        size: Nodes per side of the grid, boundary included.
    """

    name = "pde"
    field_channels = 1
    cond_channels = 1
    field_scale = 1.0
    splits: dict = {}
    ood_splits: tuple[str, ...] = ()

    def __init__(self, size: int) -> None:
        self.size = size

    def generate(self, split: str, num: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``num`` pairs ``(x0, condition)`` of a split, as float32 tensors ``(num, C, n, n)``."""
        if split not in self.splits:
            raise ValueError(f"unknown split {split!r} for task {self.name}; choose from {sorted(self.splits)}")
        if num < 1:
            raise ValueError(f"number of samples must be positive, got {num}")
        return _cached_pairs(type(self), self.size, split, num, seed)

    def _solve(self, split: str, num: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def encode_condition(self, condition: torch.Tensor) -> torch.Tensor:
        """The condition as the network sees it (O(1) channels)."""
        return condition

    def residual(self, x0: torch.Tensor, condition: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(interior, boundary)`` residuals of a predicted ``x0`` (network units) in physical units."""
        raise NotImplementedError

    def field_metrics(self, x0_hat: torch.Tensor, x0: torch.Tensor, condition: torch.Tensor) -> dict[str, torch.Tensor]:
        """Mean ``|R|`` on the interior (physical units), mean ``|R|`` on the boundary, MSE to the solver, and the
        mean :meth:`spectral_residual` (``k = SPECTRAL_MODES``, at most the interior size).

        Args:
            x0_hat: Predicted fields in network units.
            x0: The solver's fields in network units.
            condition: Conditions in physical units.
        """
        interior, boundary = self.residual(x0_hat, condition)
        return {
            "residual": interior.abs().mean(),
            "residual_boundary": boundary.abs().mean(),
            "mse": (x0_hat - x0).square().mean(),
            "residual_spectral": spectral_residual(interior, min(SPECTRAL_MODES, self.size - 2)).mean(),
        }

    def spectral_residual(self, x0: torch.Tensor, condition: torch.Tensor, k: int = SPECTRAL_MODES) -> torch.Tensor:
        """Per-field rms of the interior residual's lowest ``k x k`` sine modes, physical units: ``(B,)``.

        The physics at the scale a model resolves (:func:`zoo.repa_p.pde.spectral_residual`); ``x0`` in network
        units, ``condition`` in physical units, as :meth:`field_metrics`.
        """
        return spectral_residual(self.residual(x0, condition)[0], k)

    def residual_vector(self, x0: torch.Tensor, condition: torch.Tensor, units: str = "physical") -> torch.Tensor:
        """Interior and boundary residuals flattened into one ``(B, N)`` vector (what the losses penalise).

        Args:
            x0: Predicted fields in network units.
            condition: Conditions in physical units.
            units: ``"physical"``: the interior residual in the units of the source (``O(q / h^2)``);
                ``"grid"``: multiplied by ``h^2``, i.e. the residual of the stencil sum itself (``O(q)``),
                which keeps the physics loss on the scale of the data loss.
        """
        interior, boundary = self.residual(x0, condition)
        if units == "grid":
            interior = interior * grid_spacing(self.size) ** 2
        elif units != "physical":
            raise ValueError(f"residual units must be 'physical' or 'grid', got {units!r}")
        return torch.cat([interior.flatten(1), boundary], dim=1)


@functools.lru_cache(maxsize=32)
def _cached_pairs(task_cls: type, size: int, split: str, num: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    # Each split draws from its own stream, so changing one split's size never changes another's data.
    rng = np.random.default_rng([seed, sorted(task_cls.splits).index(split), size])
    field, condition = task_cls(size)._solve(split, num, rng)
    x0 = torch.from_numpy(field / task_cls.field_scale).float()
    return x0, torch.from_numpy(condition).float()


class PoissonTask(PDETask):
    """Electrostatic potential of point charges: ``-Delta U = q / h^2``, ``U = 0`` on the boundary."""

    name = "poisson"
    splits = {
        "train": ChargeConfig(),
        "val": ChargeConfig(),
        "id": ChargeConfig(),
        "ood_k4": ChargeConfig(num_charges=4),
        "ood_strong": ChargeConfig(q_min=1.5, q_max=2.5),
        "ood_wall": ChargeConfig(wall_band=3),
    }
    ood_splits = ("ood_k4", "ood_strong", "ood_wall")

    def _solve(self, split, num, rng):
        charge = sample_charges(num, self.size, self.splits[split], rng)
        return solve_poisson(charge)[:, None], charge[:, None]

    def residual(self, x0, condition):
        return poisson_residual(x0 * self.field_scale, condition)


class DarcyTask(PDETask):
    """Darcy pressure for a two-valued random permeability: ``-div(K grad p) = f``, ``p = 0`` on the boundary.

    The condition has two channels, ``(K, f)``; the network sees ``(K - 7.5) / 4.5`` and ``f``.
    """

    name = "darcy"
    cond_channels = 2
    field_scale = 0.01  # pressures are O(0.01) for K in {3, 12} and f = 1
    splits = {
        "train": DarcyConfig(),
        "val": DarcyConfig(),
        "id": DarcyConfig(),
        "ood_source": DarcyConfig(source_box=(0.5, 1.0, 0.5, 1.0)),
        "ood_fine": DarcyConfig(length_scale=0.05),
    }
    ood_splits = ("ood_source", "ood_fine")

    def _solve(self, split, num, rng):
        config = self.splits[split]
        permeability = sample_permeability(num, self.size, config, rng)
        source = np.broadcast_to(darcy_source(self.size, config), permeability.shape)
        pressure = solve_darcy(permeability, source)
        return pressure[:, None], np.stack([permeability, source], axis=1)

    def encode_condition(self, condition):
        return torch.cat([(condition[:, :1] - 7.5) / 4.5, condition[:, 1:]], dim=1)

    def residual(self, x0, condition):
        return darcy_residual(x0 * self.field_scale, condition[:, :1], condition[:, 1:])


TASKS = {"poisson": PoissonTask, "darcy": DarcyTask}


def get_task(name: str, size: int) -> PDETask:
    """Build a task by name (``"poisson"`` or ``"darcy"``) on a ``size x size`` grid."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose from {sorted(TASKS)}")
    return TASKS[name](size)
