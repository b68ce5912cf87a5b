"""Adenylate kinase (AdK) C-alpha data from MDAnalysisTests, read with MDAnalysis, and a PDB ensemble reader.

* :func:`load_adk`: the open (4AKE) and closed (1AKE) crystal states and the three closed-to-open transitions
  (two DIMS runs for training, the TMD run held out), every frame superposed onto the open state.
* :func:`read_pdb_ensemble`: C-alpha coordinates ``(N, L, 3)`` from a multi-model PDB/mmCIF file, a trajectory
  with its topology, or a folder of single-structure files: the adapter that lets real AlphaFold3 or BioEmu
  outputs be scored by the harness later without code changes.

MDAnalysis and MDAnalysisTests are the ``protein`` extra; they are imported inside the functions.
"""

from __future__ import annotations

import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np

#: The reference states, in the order of every ``states`` array.
STATE_NAMES = ("open", "closed")
#: The transition runs: name -> (topology constant, trajectory constant) of MDAnalysisTests.datafiles.
TRAJECTORIES = {"dims1": ("PSF", "DCD"), "dims2": ("PSF", "DCD2"), "tmd": ("PSF_NAMD_GBIS", "DCD_NAMD_GBIS")}
#: Runs the generator and the PCA see; the TMD run is held out for path fidelity.
TRAIN_TRAJECTORIES = ("dims1", "dims2")
HELD_OUT_TRAJECTORY = "tmd"
N_RESIDUES = 214


def _require_mdanalysis():
    try:
        import MDAnalysis  # noqa: F401
        import MDAnalysisTests.datafiles  # noqa: F401
    except ImportError as error:  # pragma: no cover - the extra is installed in the zoo's environment
        raise ImportError(
            f"ProMiSE reads AdK from MDAnalysisTests with MDAnalysis ({error.name} is missing); "
            "install it with `pip install icml26-zoo[protein]`"
        ) from None


def _ca_atoms(universe, selection: str = "name CA") -> np.ndarray:
    atoms = universe.select_atoms(selection)
    if atoms.n_atoms == 0:
        raise ValueError(f"selection {selection!r} matched no atom")
    return atoms


def superpose_onto(frames: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Each ``(L, 3)`` frame of ``(F, L, 3)`` moved onto ``reference`` by its Kabsch superposition (float64)."""
    import torch

    from zoo.promise.metrics import superpose

    return superpose(torch.as_tensor(frames), torch.as_tensor(reference)).numpy()


@lru_cache(maxsize=1)
def _load_adk_cached() -> dict:
    _require_mdanalysis()
    import MDAnalysis as mda
    from MDAnalysisTests import datafiles

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PDB element guesses, DCD timestep copies: not ours to fix
        open_state = _ca_atoms(mda.Universe(datafiles.PDB_small)).positions.astype(np.float64)
        closed_atoms = _ca_atoms(mda.Universe(datafiles.PDB_closed))
        closed_state = closed_atoms.positions.astype(np.float64)
        trajectories = {}
        for name, (topology, trajectory) in TRAJECTORIES.items():
            universe = mda.Universe(getattr(datafiles, topology), getattr(datafiles, trajectory))
            atoms = _ca_atoms(universe)
            if atoms.n_atoms != N_RESIDUES:
                raise ValueError(f"AdK run {name} has {atoms.n_atoms} C-alpha atoms, expected {N_RESIDUES}")
            trajectories[name] = np.stack([atoms.positions.astype(np.float64) for _ in universe.trajectory])
    open_state = open_state - open_state.mean(axis=0)
    closed_state = superpose_onto(closed_state[None], open_state)[0]
    aligned = {name: superpose_onto(frames, open_state) for name, frames in trajectories.items()}
    return {"states": np.stack([open_state, closed_state]), "trajectories": aligned}


def load_adk() -> dict:
    """AdK's reference states and transitions, C-alpha only, superposed onto the (centred) open state.

    Returns:
        ``{"states": (2, 214, 3) [open, closed], "trajectories": {"dims1": (98, 214, 3), "dims2": (102, 214, 3),
        "tmd": (100, 214, 3)}}`` in A (copies; each run goes closed -> open).
    """
    data = _load_adk_cached()
    return {"states": data["states"].copy(), "trajectories": {k: v.copy() for k, v in data["trajectories"].items()}}


def read_pdb_ensemble(path: str | Path, topology: str | Path | None = None, selection: str = "name CA") -> np.ndarray:
    """C-alpha coordinates ``(N, L, 3)`` of an ensemble on disk, for :class:`zoo.promise.harness.Harness`.

    Args:
        path: A multi-model PDB/mmCIF (each MODEL one sample), a trajectory (with ``topology``), or a folder whose
            ``*.pdb``, ``*.cif`` and ``*.pdb.gz`` files are one sample each (sorted by name).
        topology: Topology of a trajectory file (PSF, PDB, ...).
        selection: MDAnalysis selection of the atoms that correspond to the reference states' residues.

    Raises:
        FileNotFoundError: When ``path`` does not exist. ValueError: When the folder holds no structure, the
        selection matches nothing, or the samples differ in atom count.
    """
    _require_mdanalysis()
    import MDAnalysis as mda

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no ensemble at {path}")
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.name.endswith((".pdb", ".cif", ".pdb.gz", ".ent")))
        if not files:
            raise ValueError(f"{path}: no .pdb/.cif/.pdb.gz file; a folder ensemble holds one structure per file")
        samples = [read_pdb_ensemble(file, selection=selection) for file in files]
        counts = {sample.shape[1] for sample in samples}
        if len(counts) > 1:
            raise ValueError(f"{path}: the structures have different C-alpha counts {sorted(counts)}")
        return np.concatenate(samples)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        universe = mda.Universe(str(topology), str(path)) if topology else mda.Universe(str(path))
        atoms = _ca_atoms(universe, selection)
        return np.stack([atoms.positions.astype(np.float64) for _ in universe.trajectory])


def write_pdb_ensemble(ensemble: np.ndarray, path: str | Path) -> Path:
    """Write ``(N, L, 3)`` C-alpha coordinates as a multi-model PDB (CA atoms of ALA residues 1..L)."""
    ensemble = np.asarray(ensemble, dtype=np.float64)
    lines = []
    for model, coords in enumerate(ensemble, start=1):
        lines.append(f"MODEL     {model:4d}")
        for index, (x, y, z) in enumerate(coords, start=1):
            lines.append(f"ATOM  {index:5d}  CA  ALA A{index:4d}    {x:8.3f}{y:8.3f}{z:8.3f}  1.00  0.00           C")
        lines.append("ENDMDL")
    lines.append("END")
    path = Path(path)
    path.write_text("\n".join(lines) + "\n")
    return path
