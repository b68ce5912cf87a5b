"""The amide library: deterministic enumeration, fingerprints against RDKit, oracles, partitions, bad input."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rdkit")

from zoo._errors import ZooError  # noqa: E402
from zoo.boba import library as lib  # noqa: E402

SMALL = lib.LibrarySpec(cap=7)  # 24 acids x 41 amines = 984 products


@pytest.fixture(scope="module")
def small():
    return lib.AmideLibrary(SMALL)


@pytest.fixture(scope="module")
def small_products(small):
    return small.products(np.arange(len(small)))


def test_enumeration_is_deterministic_and_every_product_parses(small, small_products):
    from rdkit import Chem

    assert (len(small.acids), len(small.amines)) == (24, 41)
    again = lib.AmideLibrary(SMALL).products(np.arange(0, len(small), 7))
    assert list(again["smiles"]) == list(small_products["smiles"][::7])
    assert np.array_equal(again["fps"], small_products["fps"][::7])
    amide = Chem.MolFromSmarts("C(=O)N")
    for smiles in small_products["smiles"]:
        mol = Chem.MolFromSmiles(smiles)
        assert mol is not None, smiles
        assert mol.HasSubstructMatch(amide)
    assert len(set(small_products["smiles"])) == len(small)  # one distinct product per pair


def test_product_index_is_acid_major(small):
    from rdkit import Chem

    index = 3 * len(small.amines) + 5
    acid, amine = Chem.MolFromSmiles(small.acids[3]), Chem.MolFromSmiles(small.amines[5])
    product = small.product(index)
    assert product.GetNumHeavyAtoms() == acid.GetNumHeavyAtoms() + amine.GetNumHeavyAtoms() - 1  # the OH leaves
    assert small.acid_of(np.array([index]))[0] == 3


def test_packed_tanimoto_equals_rdkit_bulk_tanimoto(small_products):
    from rdkit import Chem, DataStructs

    generator = lib.fingerprint_generator()
    mols = [Chem.MolFromSmiles(s) for s in small_products["smiles"][:200]]
    fps = [generator.GetFingerprint(m) for m in mols]
    for query in (0, 17, 150):
        expected = DataStructs.BulkTanimotoSimilarity(fps[query], fps)
        got = lib.tanimoto_packed(small_products["fps"][query], small_products["fps"][:200])
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_oracle_is_max_tanimoto_to_its_half_of_the_cdk2_ligands_minus_the_size_penalty(small_products):
    from rdkit import DataStructs

    ligands = lib.cdk2_ligands()
    assert len(ligands) == 47
    generator = lib.fingerprint_generator()
    test_fps = [generator.GetFingerprint(m) for m in ligands[1::2]]
    assert len(test_fps) == 23 and len(lib.oracle_ligands("validation")) == 24
    product = lib.AmideLibrary(SMALL).product(10)
    expected = max(DataStructs.BulkTanimotoSimilarity(generator.GetFingerprint(product), test_fps))
    got = lib.oracle_scores(small_products["fps"][10:11], np.array([product.GetNumHeavyAtoms()]), "test")[0]
    assert got == pytest.approx(expected, abs=1e-6)
    penalised = lib.oracle_scores(small_products["fps"][10:11], np.array([35]), "test")[0]
    assert penalised == pytest.approx(expected - 0.05, abs=1e-6)  # 0.01 per heavy atom above 30


def test_partitions_cover_the_library_exactly_once(small_products):
    n = len(small_products["fps"])
    acid = np.arange(n) // 41
    for arms in (
        lib.check_partition(acid, n),
        lib.random_partition(acid),
        lib.kmeans_partition(small_products["fps"], 6, 8),
    ):
        assert len(arms) == n and arms.min() == 0
        counts = np.bincount(arms)
        assert counts.sum() == n and (counts > 0).all()
    assert sorted(np.bincount(lib.random_partition(acid))) == sorted(np.bincount(acid))


def test_recall_on_a_toy_library_equals_the_hand_computed_value():
    scores = np.array([0.9, 0.1, 0.8, 0.3, 0.7, 0.2, 0.6, 0.4, 0.5, 0.0])
    # top 30% = molecules 0, 2, 4; the campaign labelled 2, 4, 5 and 9: two of the three
    assert lib.recall(np.array([2, 4, 5, 9]), scores, fraction=0.3) == pytest.approx(2 / 3)
    assert list(lib.top_indices(np.array([1.0, 2.0, 2.0, 0.0]), 0.5)) == [1, 2]  # ties by index


# ---------------------------------------------------------------------------------------------------- bad input


def test_unparseable_block_smiles_are_counted_and_named():
    with pytest.raises(ZooError, match=r"2 of 3 building-block SMILES do not parse: 'C1CC', 'not-a-smiles'"):
        lib.parse_blocks(["CC(=O)O", "C1CC", "not-a-smiles"], strict=True)
    assert lib.parse_blocks(["CC(=O)O", "C1CC"]).unparseable == ["C1CC"]


def test_reaction_smarts_without_products_is_refused():
    with pytest.raises(ZooError, match="0 product"):
        lib.make_reaction("[CX3:1](=[O:2])[OX2H1].[NX3;H2:3]>>")
    reaction = lib.make_reaction(lib.REACTION_SMARTS)
    from rdkit import Chem

    with pytest.raises(ZooError, match="gives no product for CCO \\+ CCN"):
        lib.couple(reaction, Chem.MolFromSmiles("CCO"), Chem.MolFromSmiles("CCN"), ("CCO", "CCN"))


def test_a_partition_that_does_not_cover_the_library_is_refused():
    with pytest.raises(ZooError, match="one arm id per molecule"):
        lib.check_partition(np.array([0, 1, 1]), 4)
    with pytest.raises(ZooError, match="does not cover the library.*1 arm"):
        lib.check_partition(np.array([0, 2, 2, 0]), 4)


def test_more_kmeans_clusters_than_molecules_is_refused(small_products):
    with pytest.raises(ZooError, match="50 k-means clusters for 10 molecules"):
        lib.kmeans_partition(small_products["fps"][:10], 50)


def test_a_library_from_user_blocks_refuses_unparseable_ones():
    with pytest.raises(ZooError, match="1 of 3 building-block SMILES do not parse"):
        lib.AmideLibrary(SMALL, block_smiles=["CC(=O)O", "CCN", "C(("])
    tiny = lib.AmideLibrary(lib.LibrarySpec(cap=10), block_smiles=["CC(=O)O", "OC(=O)c1ccccc1", "CCN", "C1CCNCC1"])
    assert len(tiny) == 4
    assert tiny.amines == ["C1CCNCC1", "CCN"]  # sorted canonical SMILES
    assert tiny.products([1])["smiles"][0] == "CCNC(C)=O"  # acid 0 (acetic) + amine 1 (ethylamine)
