"""Docking demo (not gating, incomplete): the Vina oracle for HIV protease 1HVR.

The issue's demo is 48 dockings (3 rounds x 16) for BOBA against random. What is here: the receptor and box
(1hvr.pdb from MDAnalysisTests with its ligand XK2 removed, box centred on XK2's centroid, 22 A cube) and a Vina
scorer (ligands by meeko's ``MoleculePreparation`` + ``PDBQTWriterLegacy``, exhaustiveness 4, cached by InChIKey).
``vina`` and ``meeko`` are not installed in this environment, so this code has not been run here and the
48-docking comparison has not been done; :func:`require_docking` raises with the pip command, which is tested.

Run (where vina and meeko are installed): ``python -m zoo.boba.docking --receptor-pdbqt 1hvr.pdbqt``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import numpy as np

from zoo._errors import MissingExtraError

PIP = "pip install 'icml26-zoo[chem]' vina==1.2.7 meeko==0.8.0"


def require_docking() -> None:
    """Raise :class:`MissingExtraError` with the pip command unless ``vina`` and ``meeko`` import."""
    missing = [name for name in ("vina", "meeko") if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingExtraError(f"the BOBA docking demo needs {' and '.join(missing)}: {PIP}")


def receptor_and_box() -> tuple[str, np.ndarray]:
    """1hvr.pdb from MDAnalysisTests without XK2 (as PDB text) and XK2's centroid."""
    from MDAnalysisTests.datafiles import CONECT  # 1hvr.pdb

    lines = Path(CONECT).read_text().splitlines()
    ligand = [line for line in lines if line.startswith("HETATM") and line[17:20] == "XK2"]
    protein = [line for line in lines if line.startswith("ATOM")]
    centre = np.array([[float(line[30:38]), float(line[38:46]), float(line[46:54])] for line in ligand]).mean(axis=0)
    return "\n".join(protein) + "\nEND\n", centre


def dock(smiles: list[str], receptor_pdbqt: str, centre: np.ndarray, cache: dict) -> np.ndarray:
    """Vina scores (kcal/mol, lower is better) of ``smiles``, cached by InChIKey."""
    from meeko import MoleculePreparation, PDBQTWriterLegacy
    from rdkit import Chem
    from rdkit.Chem import AllChem
    from vina import Vina

    scores = []
    for text in smiles:
        mol = Chem.AddHs(Chem.MolFromSmiles(text))
        key = Chem.MolToInchiKey(mol)
        if key not in cache:
            AllChem.EmbedMolecule(mol, randomSeed=0)
            setup = MoleculePreparation().prepare(mol)[0]
            pdbqt, ok, error = PDBQTWriterLegacy.write_string(setup)
            if not ok:
                raise RuntimeError(f"meeko could not prepare {text}: {error}")
            vina = Vina(sf_name="vina", cpu=2, seed=0, verbosity=0)
            vina.set_receptor(receptor_pdbqt)
            vina.compute_vina_maps(center=list(map(float, centre)), box_size=[22.0, 22.0, 22.0])
            vina.set_ligand_from_string(pdbqt)
            vina.dock(exhaustiveness=4, n_poses=1)
            cache[key] = float(vina.energies(n_poses=1)[0][0])
        scores.append(cache[key])
    return np.array(scores)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--receptor-pdbqt", required=True, help="receptor PDBQT (meeko's mk_prepare_receptor.py)")
    parser.add_argument("--out", default="docking.json")
    args = parser.parse_args(argv)
    require_docking()
    _, centre = receptor_and_box()
    receptor = Path(args.receptor_pdbqt).read_text()
    cache: dict = {}
    smoke = dock(["O=C(NCc1ccccc1)c1ccc(O)cc1"], receptor, centre, cache)
    Path(args.out).write_text(json.dumps({"smoke": float(smoke[0]), "cache": cache}, indent=1) + "\n")


if __name__ == "__main__":
    main()
