"""The model-agnostic ProMiSE harness: a model is any callable ``(context) -> ensemble of C-alpha arrays``.

A :class:`Target` holds the reference states (one residue correspondence), the contexts a model is asked about,
which state is the holo one, and optionally a transition path. :func:`score_ensembles` turns a model's ensembles
per context into the benchmark's metrics; :func:`evaluate_model` asks the model for them. Ensembles on disk
(real AlphaFold3 or BioEmu outputs, later) go through :class:`DiskEnsembleModel`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from zoo.promise import metrics

#: The contexts of the AdK target: no ligand (apo) and with Ap5A (ligand; emulated, the ligand is not in the files).
CONTEXTS = ("apo", "ligand")


@dataclass
class Target:
    """One multi-state target of the benchmark.

    Args:
        name: Target name.
        states: ``(M, L, 3)`` reference C-alpha states.
        state_names: Their names (``("open", "closed")``).
        contexts: The contexts a model is asked for (the first is the reference context for coverage).
        holo_state: The state the ligand context should favour (index into ``states``), or None.
        apo_state: The state the apo context should favour, or None.
        mechanism: ``"intrinsic"``, ``"ligand-induced"`` or ``"protein-induced"``.
        path: ``(F, L, 3)`` held-out transition frames for path fidelity, or None.
    """

    name: str
    states: np.ndarray
    state_names: tuple[str, ...]
    contexts: tuple[str, ...] = CONTEXTS
    holo_state: int | None = None
    apo_state: int | None = None
    mechanism: str = "intrinsic"
    path: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        states = metrics.check_ensemble(self.states, name=f"{self.name} states")
        if states.shape[0] != len(self.state_names):
            raise ValueError(f"{self.name}: {states.shape[0]} states but {len(self.state_names)} state names")
        if self.path is not None:
            metrics.check_ensemble(self.path, states.shape[1], name=f"{self.name} path")

    @property
    def n_residues(self) -> int:
        return int(np.asarray(self.states).shape[1])

    def check_context(self, context: str) -> str:
        """``context`` if this target has it, else a ValueError naming the valid ones."""
        if context not in self.contexts:
            raise ValueError(f"unknown context {context!r} for target {self.name}; expected one of {self.contexts}")
        return context


def score_ensembles(
    target: Target,
    ensembles: Mapping[str, Sequence],
    threshold: float = 2.0,
    coverage_context: str | None = None,
    with_tm: bool = False,
) -> dict[str, float]:
    """The benchmark's metrics for a model's ensembles, averaged over the ensembles of each context.

    Args:
        target: The target.
        ensembles: ``{context: [ensemble (N, L, 3), ...]}``; ensemble k of each context pairs up for the delta.
        threshold: Coverage radius in A (RMSD).
        coverage_context: The context whose ensembles give coverage, success and path fidelity (default: the
            target's first context, apo).
        with_tm: Also report ``tm_<state>``, the mean over ensembles of the best TM-score to each state.

    Returns:
        ``multistate_success``, ``coverage_<state>``, ``preference_<state>`` (fraction of samples nearest that
        state), ``context_delta`` (when the target has holo/apo states and both contexts are given),
        ``path_fidelity_rmsd`` (mean over frames and ensembles of the RMSD to the nearest sample, with a path)
        and the ``min_rmsd_<state>`` mean over ensembles.
    """
    coverage_context = target.check_context(coverage_context or target.contexts[0])
    for context in ensembles:
        target.check_context(context)
    if coverage_context not in ensembles or not len(ensembles[coverage_context]):
        raise ValueError(f"no ensemble for the coverage context {coverage_context!r}")
    states = torch.as_tensor(np.asarray(target.states), dtype=metrics.DTYPE)
    per_context = {
        context: [metrics.check_ensemble(e, target.n_residues, f"{context} ensemble {k}") for k, e in enumerate(group)]
        for context, group in ensembles.items()
    }
    scores: dict[str, list[float]] = {}

    def add(key: str, value) -> None:
        scores.setdefault(key, []).append(float(value))

    for ensemble in per_context[coverage_context]:
        table = metrics.distance_matrix(ensemble, states)  # (N, M)
        coverage = (table.min(dim=0).values <= threshold).to(metrics.DTYPE)
        add("multistate_success", metrics.multistate_success(coverage))
        nearest = table.argmin(dim=1)
        for index, name in enumerate(target.state_names):
            add(f"coverage_{name}", coverage[index])
            add(f"min_rmsd_{name}", table[:, index].min())
            add(f"preference_{name}", (nearest == index).to(metrics.DTYPE).mean())
        if with_tm:
            tm = metrics.distance_matrix(ensemble, states, metric="tm")
            for index, name in enumerate(target.state_names):
                add(f"tm_{name}", tm[:, index].max())
        if target.path is not None:
            add("path_fidelity_rmsd", metrics.path_fidelity(target.path, ensemble).mean())
    if target.holo_state is not None and target.apo_state is not None and len(per_context) > 1:
        holo, apo = states[target.holo_state], states[target.apo_state]
        ligand_context = [c for c in target.contexts if c != coverage_context][0]
        for ligand, apo_ensemble in zip(per_context.get(ligand_context, []), per_context[coverage_context]):
            add("context_delta", metrics.context_delta(ligand, apo_ensemble, holo, apo))
    return {key: float(np.mean(values)) for key, values in scores.items()}


def evaluate_model(
    model: Callable[[str], object], target: Target, n_ensembles: int = 20, threshold: float = 2.0, **kwargs
) -> dict[str, float]:
    """Ask ``model(context)`` for ``n_ensembles`` ensembles per context of ``target`` and score them.

    Args:
        model: Any callable returning an ensemble ``(N, L, 3)`` (numpy or torch) for a context name; it is
            called ``n_ensembles`` times per context and is expected to draw a fresh ensemble each call.
        target: The target.
        n_ensembles: Ensembles per context.
        threshold: Coverage radius in A.
        **kwargs: Passed to :func:`score_ensembles`.
    """
    if n_ensembles < 1:
        raise ValueError(f"n_ensembles must be >= 1, got {n_ensembles}")
    ensembles = {context: [model(context) for _ in range(n_ensembles)] for context in target.contexts}
    return score_ensembles(target, ensembles, threshold, **kwargs)


class DiskEnsembleModel:
    """A "model" whose ensembles are files on disk, one file (or folder) per context, read with MDAnalysis.

    Args:
        paths: ``{context: path}``; see :func:`zoo.promise.structures.read_pdb_ensemble` for the formats.
        selection: MDAnalysis selection of the atoms that match the target's residues.
    """

    def __init__(self, paths: Mapping[str, str | Path], selection: str = "name CA") -> None:
        from zoo.promise.structures import read_pdb_ensemble

        self.ensembles = {context: read_pdb_ensemble(path, selection=selection) for context, path in paths.items()}

    def __call__(self, context: str) -> np.ndarray:
        if context not in self.ensembles:
            raise ValueError(f"unknown context {context!r}; this model has files for {sorted(self.ensembles)}")
        return self.ensembles[context]
