"""Docking demo (not gating): BOBA against random screening with AutoDock Vina on HIV protease 1HVR.

The spec's demo: 48 dockings per strategy (a 16-molecule initial design, then 2 rounds of 16) on a small amide
library, BOBA-UCB over its acid arms against random screening, same seed, same initial design.

Choices (all reconstructed; nothing here feeds the card's gated numbers):

- Receptor: ``1hvr.pdb`` from MDAnalysisTests (the HIV-1 protease dimer with its polar hydrogens) with the
  ligand XK2 removed, prepared by meeko's :class:`~meeko.Polymer` (residue templates, Gasteiger charges from the
  templates) into a rigid PDBQT. The box is a 20 A cube on XK2's centroid; Vina's maps are computed once.
- Ligands: RDKit ETKDG conformer (``randomSeed=0``), meeko ``MoleculePreparation``, Vina's ``vina`` scoring
  function, exhaustiveness 4, one pose, ``seed=0``. The oracle value is minus the Vina score (kcal/mol), so that
  higher is better as in the campaign; scores are cached by InChIKey in ``cache_dir("boba")/vina_1hvr.json``, so a
  molecule is docked once across strategies and runs.
- Library: 16 acids x 16 amines drawn (seed 0) from the claim library's blocks with at most 9 heavy atoms each
  (products of at most ~18 heavy atoms, a few seconds per docking on 2 cores); arms are the 16 acids.
- BOBA: UCB1 with c = 0.5, m = 0.25 (4 of 16 arms per round), top-k reward (k = 5% of the library),
  acquisition ``mean + 1.0 * std``; the surrogate is the card's 5-member ensemble (hidden 128) retrained from
  scratch for 200 full-batch Adam steps after each round: too few labels for the warm-started Lightning loop
  to matter, and this keeps the demo free of a Trainer.
- Reported per strategy: the best and the top-5 mean Vina score found, dockings used, and seconds. One seed by
  default; 48 dockings is a demonstration, not a measurement (the campaign's gated claims use oracle O1).

Run: ``python -m zoo.boba.docking --out docking.json`` (needs ``pip install 'icml26-zoo[chem]'``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from zoo._errors import MissingExtraError, ZooError
from zoo.boba.bandit import Campaign, CampaignConfig, CountingOracle

PIP = "pip install 'icml26-zoo[chem]'"
BOX_SIZE = 20.0
EXHAUSTIVENESS = 4
DEMO_BLOCKS = 16  # acids and amines
DEMO_BATCH = 16
DEMO_ROUNDS = 2
BLOCK_HEAVY_ATOMS = 9


def require_docking() -> None:
    """Raise :class:`MissingExtraError` with the pip command unless ``vina`` and ``meeko`` import."""
    missing = [name for name in ("vina", "meeko") if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingExtraError(
            f"the BOBA docking demo needs {' and '.join(missing)} (the chem extra pins vina, meeko and gemmi): {PIP}"
        )


def receptor_and_box() -> tuple[str, np.ndarray]:
    """1hvr.pdb from MDAnalysisTests without XK2 (as PDB text) and XK2's centroid."""
    from MDAnalysisTests.datafiles import CONECT  # 1hvr.pdb

    lines = Path(CONECT).read_text().splitlines()
    ligand = [line for line in lines if line.startswith("HETATM") and line[17:20] == "XK2"]
    protein = [line for line in lines if line.startswith("ATOM")]
    centre = np.array([[float(line[30:38]), float(line[38:46]), float(line[46:54])] for line in ligand]).mean(axis=0)
    return "\n".join(protein) + "\nEND\n", centre


def receptor_pdbqt(folder: Path) -> Path:
    """The rigid receptor PDBQT prepared by meeko (written once into ``folder``)."""
    path = folder / "1hvr_receptor.pdbqt"
    if not path.is_file():
        from meeko import MoleculePreparation, PDBQTWriterLegacy, Polymer, ResidueChemTemplates

        pdb, _ = receptor_and_box()
        polymer = Polymer.from_pdb_string(pdb, ResidueChemTemplates.create_from_defaults(), MoleculePreparation())
        rigid, _ = PDBQTWriterLegacy.write_from_polymer(polymer)
        folder.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, rigid)
    return path


def _atomic_write(path: Path, text: str) -> None:
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=path.suffix, delete=False) as handle:
        handle.write(text)
    os.replace(handle.name, path)


def ligand_pdbqt(smiles: str) -> str:
    """A 3-D conformer of ``smiles`` (ETKDG, seed 0) as meeko's ligand PDBQT; a clear error if it cannot be built."""
    from meeko import MoleculePreparation, PDBQTWriterLegacy
    from rdkit import Chem
    from rdkit.Chem import AllChem

    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        raise ZooError(f"cannot dock {smiles!r}: RDKit does not parse it")
    mol = Chem.AddHs(mol)
    if AllChem.EmbedMolecule(mol, randomSeed=0) != 0:
        raise ZooError(f"cannot dock {smiles!r}: RDKit found no 3-D conformer")
    text, ok, error = PDBQTWriterLegacy.write_string(MoleculePreparation().prepare(mol)[0])
    if not ok:
        raise ZooError(f"meeko could not prepare {smiles!r}: {error}")
    return text


class VinaOracle(CountingOracle):
    """Minus the Vina score (kcal/mol) of library molecules, docked on demand and cached by InChIKey.

    A :class:`~zoo.boba.bandit.CountingOracle` whose scores are docked on demand, so a
    :class:`~zoo.boba.bandit.Campaign` runs on it unchanged.

    Args:
        smiles: The library's SMILES.
        folder: Where the receptor PDBQT and the score cache live.
        exhaustiveness: Vina's search effort.
    """

    def __init__(self, smiles: list[str], folder: Path, exhaustiveness: int = EXHAUSTIVENESS):
        require_docking()
        if exhaustiveness < 1:
            raise ZooError(f"exhaustiveness must be >= 1, got {exhaustiveness}")
        from vina import Vina

        self.smiles = list(smiles)
        self.cache_path = folder / "vina_1hvr.json"
        self.cache: dict[str, float] = json.loads(self.cache_path.read_text()) if self.cache_path.is_file() else {}
        self.exhaustiveness = exhaustiveness
        super().__init__(np.full(len(self.smiles), np.nan))  # counting and the repeat guard; scores come later
        self.docked = 0
        self.vina = Vina(sf_name="vina", cpu=os.cpu_count() or 1, seed=0, verbosity=0)
        self.vina.set_receptor(str(receptor_pdbqt(folder)))
        _, centre = receptor_and_box()
        self.vina.compute_vina_maps(center=[float(c) for c in centre], box_size=[BOX_SIZE] * 3)

    def key(self, smiles: str) -> str:
        from rdkit import Chem

        return f"{Chem.MolToInchiKey(Chem.MolFromSmiles(smiles))}:ex{self.exhaustiveness}"

    def score(self, smiles: str) -> float:
        """The Vina score of one molecule (kcal/mol, lower binds better), from the cache or a fresh docking."""
        key = self.key(smiles)
        if key not in self.cache:
            self.vina.set_ligand_from_string(ligand_pdbqt(smiles))
            self.vina.dock(exhaustiveness=self.exhaustiveness, n_poses=1)
            self.cache[key] = round(float(self.vina.energies(n_poses=1)[0][0]), 4)
            self.docked += 1
            _atomic_write(self.cache_path, json.dumps(self.cache, indent=0, sort_keys=True) + "\n")
        return self.cache[key]

    def __call__(self, indices: np.ndarray) -> np.ndarray:
        return -np.array([self.score(self.smiles[i]) for i in self.reveal(indices)])


def demo_library(seed: int = 0) -> dict:
    """The demo library: ``DEMO_BLOCKS`` acids x amines of the claim library with small blocks (see the docstring)."""
    from rdkit import Chem

    from zoo.boba.library import LibrarySpec, load_library

    full = load_library(LibrarySpec(cap=14))
    acids, amines = full.info["acids"], full.info["amines"]

    def small(blocks: list[str]) -> np.ndarray:
        return np.flatnonzero([Chem.MolFromSmiles(s).GetNumHeavyAtoms() <= BLOCK_HEAVY_ATOMS for s in blocks])

    rng = np.random.default_rng([seed, 1])
    acid_pick = np.sort(rng.choice(small(acids), size=DEMO_BLOCKS, replace=False))
    amine_pick = np.sort(rng.choice(small(amines), size=DEMO_BLOCKS, replace=False))
    index = (acid_pick[:, None] * len(amines) + amine_pick[None, :]).ravel()
    return {
        "smiles": [str(s) for s in full.smiles[index]],
        "fps": full.fps[index],
        "arm_ids": np.repeat(np.arange(DEMO_BLOCKS), DEMO_BLOCKS).astype(np.int32),
        "acids": [acids[i] for i in acid_pick],
        "amines": [amines[i] for i in amine_pick],
    }


def fit_predictor(fps: np.ndarray, labelled: np.ndarray, values: np.ndarray, seed: int, steps: int = 200):
    """Train the 5-member surrogate from scratch on the labels; return ``predict(indices) -> (mean, std)``."""
    import torch

    from zoo.boba.surrogate import SurrogateEnsemble, bootstrap_counts, weighted_ensemble_loss

    torch.manual_seed(seed)
    model = SurrogateEnsemble(members=5, hidden=128, dropout=0.1)
    mean, std = float(values.mean()), float(values.std()) or 1.0
    x = torch.from_numpy(np.ascontiguousarray(fps[labelled]))
    y = torch.from_numpy((values - mean) / std).float()
    counts = torch.from_numpy(bootstrap_counts(len(values), 5, np.random.default_rng([seed, len(values)])))
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(steps):
        optimiser.zero_grad()
        weighted_ensemble_loss(model(x), y, counts).backward()
        optimiser.step()
    model.eval()

    def predict(indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with torch.no_grad():
            members = model(torch.from_numpy(np.ascontiguousarray(fps[indices]))).double() * std + mean
        return members.mean(dim=1).numpy(), members.std(dim=1, correction=0).numpy()

    return predict


def campaign_configs() -> dict[str, CampaignConfig]:
    size = DEMO_BLOCKS * DEMO_BLOCKS
    shared = {"rounds": DEMO_ROUNDS, "batch_fraction": DEMO_BATCH / size, "initial_fraction": DEMO_BATCH / size}
    return {
        "boba_ucb": CampaignConfig(
            strategy="boba", arm_rule="ucb", exploration=0.5, arm_fraction=0.25, topk_fraction=0.05,
            acquisition_beta=1.0, **shared,
        ),
        "random": CampaignConfig(strategy="random", **shared),
    }  # fmt: skip


def run_campaign(
    name: str, config: CampaignConfig, library: dict, oracle, seed: int, surrogate_steps: int = 200
) -> dict:
    """One docking campaign.

    Args:
        name: The arm's name in the record.
        config: The campaign's knobs.
        library: :func:`demo_library`'s output.
        oracle: A :class:`VinaOracle`, or any oracle with the same interface.
        seed: Seed of the campaign and the surrogate.
        surrogate_steps: Adam steps of each surrogate fit.
    """
    started = time.perf_counter()
    campaign = Campaign(library["arm_ids"], oracle, config, seed=seed)
    campaign.initialise()
    for _ in range(config.rounds):
        predict = None
        if config.strategy != "random":
            predict = fit_predictor(
                library["fps"], campaign.labelled, campaign.values, seed + campaign.rounds_done, surrogate_steps
            )
        campaign.round(predict)
    scores = -np.sort(campaign.values)[::-1]  # kcal/mol, best first
    return {
        "arm": name,
        "dockings": int(campaign.oracle_calls),
        "best_kcal": round(float(scores[0]), 3),
        "top5_mean_kcal": round(float(scores[:5].mean()), 3),
        "best_per_round_kcal": [-e["best_so_far"] for e in campaign.log],
        "best_smiles": library["smiles"][int(campaign.labelled[np.argmax(campaign.values)])],
        "labelled": campaign.labelled.tolist(),
        "round_arms": [e["arms"] for e in campaign.log[1:]],
        "seconds": round(time.perf_counter() - started, 1),
    }


def run_demo(seeds: tuple[int, ...] = (0,), folder: Path | None = None, exhaustiveness: int = EXHAUSTIVENESS):
    """BOBA-UCB and random screening with Vina on 1HVR, each seed with its own oracle counter and shared cache."""
    from zoo._paths import cache_dir

    require_docking()
    folder = folder or cache_dir("boba")
    library = demo_library()
    results = {}
    for seed in seeds:
        for name, config in campaign_configs().items():
            oracle = VinaOracle(library["smiles"], folder, exhaustiveness)
            record = run_campaign(name, config, library, oracle, seed)
            record["fresh_dockings"] = oracle.docked
            results.setdefault(name, {})[str(seed)] = record
    summary = {
        name: {
            key: round(float(np.mean([r[key] for r in per_seed.values()])), 3)
            for key in ("best_kcal", "top5_mean_kcal", "dockings", "seconds")
        }
        for name, per_seed in results.items()
    }
    return {
        "receptor": "1HVR (MDAnalysisTests 1hvr.pdb, XK2 removed), meeko rigid PDBQT",
        "box": {"centre": "XK2 centroid", "size_A": BOX_SIZE},
        "vina": {"scoring": "vina", "exhaustiveness": exhaustiveness, "n_poses": 1, "seed": 0},
        "library": {"size": len(library["smiles"]), "acids": library["acids"], "amines": library["amines"]},
        "configs": {name: asdict(config) for name, config in campaign_configs().items()},
        "seeds": list(seeds),
        "summary": summary,
        "per_seed": results,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docking.json", help="where the results go (JSON)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--exhaustiveness", type=int, default=EXHAUSTIVENESS)
    args = parser.parse_args(argv)
    record = run_demo(tuple(args.seeds), exhaustiveness=args.exhaustiveness)
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    for name, row in record["summary"].items():
        best, top5, dockings = row["best_kcal"], row["top5_mean_kcal"], row["dockings"]
        print(f"{name:10s} best {best:7.3f}  top-5 mean {top5:7.3f} kcal/mol  ({dockings:.0f} dockings)")


if __name__ == "__main__":
    main()
