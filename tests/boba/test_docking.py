"""The Vina docking demo: its campaign bookkeeping on a stand-in oracle, the missing-extra error, and (slow) two
real dockings with the score cache."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytest.importorskip("rdkit")

from zoo._errors import MissingExtraError  # noqa: E402
from zoo.boba import docking  # noqa: E402
from zoo.boba.bandit import CountingOracle  # noqa: E402


def test_without_its_extra_the_demo_names_the_pip_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("vina", "meeko") else real(name))
    with pytest.raises(MissingExtraError, match=r"needs vina and meeko .*pip install 'icml26-zoo\[chem\]'"):
        docking.require_docking()


@pytest.fixture(scope="module")
def library():
    return docking.demo_library()


def test_demo_library_is_16_acid_arms_of_16_small_products(library):
    assert len(library["smiles"]) == 256 == len(library["fps"])
    assert np.array_equal(np.bincount(library["arm_ids"]), np.full(16, 16))
    assert len(set(library["smiles"])) == 256


def test_both_strategies_spend_48_dockings_from_the_same_initial_design(library):
    # a stand-in oracle with strong acid effects: BOBA's rounds must stay inside the arms it chose
    rng = np.random.default_rng(0)
    scores = np.repeat(rng.normal(size=16) * 3, 16) + rng.normal(size=256) * 0.1
    records, oracles = {}, {}
    for name, config in docking.campaign_configs().items():
        oracles[name] = CountingOracle(scores)
        records[name] = docking.run_campaign(name, config, library, oracles[name], seed=0, surrogate_steps=5)
    assert records["boba_ucb"]["dockings"] == records["random"]["dockings"] == 48
    boba, random = records["boba_ucb"], records["random"]
    assert boba["labelled"][:16] == random["labelled"][:16]  # same seed, same initial design (cached dockings)
    assert len(set(boba["labelled"])) == len(set(random["labelled"])) == 48
    for r, arms in enumerate(boba["round_arms"]):  # every round's batch lies in the arms chosen for it
        assert set(library["arm_ids"][boba["labelled"][16 * (r + 1) : 16 * (r + 2)]]) <= set(arms)
        assert len(arms) >= 4  # m = 0.25 of 16 arms
    # best scores are reported in kcal/mol (minus the oracle value), best first and never worse over rounds
    for record in records.values():
        assert np.all(np.diff(record["best_per_round_kcal"]) <= 1e-9)
        assert record["best_kcal"] <= record["top5_mean_kcal"]


@pytest.mark.slow
def test_two_real_dockings_score_negative_and_are_cached(tmp_path, library):
    pytest.importorskip("vina")
    pytest.importorskip("meeko")
    smiles = library["smiles"][:2]
    oracle = docking.VinaOracle(smiles, tmp_path, exhaustiveness=1)
    first = -oracle(np.arange(2))
    assert oracle.docked == 2 and np.all(np.isfinite(first)) and np.all(first < 0)
    again = docking.VinaOracle(smiles, tmp_path, exhaustiveness=1)
    assert np.array_equal(-again(np.arange(2)), first) and again.docked == 0  # from the cache file
