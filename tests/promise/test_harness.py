"""The model-agnostic harness: any callable is a model, PDB ensembles on disk are one too."""

import numpy as np
import pytest

from zoo.promise.harness import DiskEnsembleModel, Target, evaluate_model, score_ensembles
from zoo.promise.structures import read_pdb_ensemble, write_pdb_ensemble


@pytest.fixture(scope="module")
def target(adk):
    return Target(
        "adk", adk["states"], ("open", "closed"), holo_state=1, apo_state=0, path=adk["trajectories"]["tmd"][::10]
    )


def test_a_callable_that_returns_both_states_succeeds(adk, target):
    rng = np.random.default_rng(0)

    def two_state_model(context):
        return adk["states"] + rng.normal(0, 0.3, adk["states"].shape)

    scores = evaluate_model(two_state_model, target, n_ensembles=3)
    assert scores["multistate_success"] == 1.0 and scores["coverage_open"] == 1.0
    assert scores["context_delta"] == pytest.approx(0.0)
    assert scores["preference_open"] == pytest.approx(0.5)
    assert 0 < scores["path_fidelity_rmsd"] < 4.0  # the mid frames are ~3 A from both ends


def test_a_context_aware_model_has_delta_one(adk, target):
    def ideal(context):
        return adk["states"][[1, 1] if context == "ligand" else [0, 0]]

    scores = evaluate_model(ideal, target, n_ensembles=2)
    assert scores["context_delta"] == pytest.approx(1.0)
    assert scores["multistate_success"] == 0.0 and scores["coverage_open"] == 1.0


def test_pdb_ensembles_on_disk_round_trip(tmp_path, adk, target):
    frames = adk["trajectories"]["dims1"][[0, 50, 97]]
    write_pdb_ensemble(frames, tmp_path / "apo.pdb")
    folder = tmp_path / "ligand"
    folder.mkdir()
    for index, frame in enumerate(frames[:2]):
        write_pdb_ensemble(frame[None], folder / f"model_{index}.pdb")
    read = read_pdb_ensemble(tmp_path / "apo.pdb")
    assert read.shape == (3, 214, 3)
    np.testing.assert_allclose(read, frames, atol=1e-3)  # PDB keeps 3 decimals
    model = DiskEnsembleModel({"apo": tmp_path / "apo.pdb", "ligand": folder})
    assert model("ligand").shape == (2, 214, 3)
    scores = evaluate_model(model, target, n_ensembles=1)
    assert scores["multistate_success"] == 1.0  # the first and last DIMS frames are within 0.5 A of the states
    with pytest.raises(ValueError, match="unknown context 'holo'"):
        model("holo")
    with pytest.raises(FileNotFoundError):
        read_pdb_ensemble(tmp_path / "missing.pdb")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no .pdb"):
        read_pdb_ensemble(empty)


def test_harness_bad_input(adk, target):
    with pytest.raises(ValueError, match="200 residues"):
        score_ensembles(target, {"apo": [adk["states"][:, :200]]})
    with pytest.raises(ValueError, match="empty"):
        score_ensembles(target, {"apo": [np.zeros((0, 214, 3))]})
    with pytest.raises(ValueError, match="unknown context"):
        evaluate_model(lambda c: adk["states"], target, n_ensembles=1, coverage_context="holo")
    with pytest.raises(ValueError, match="NaN"):
        evaluate_model(lambda c: np.full((2, 214, 3), np.nan), target, n_ensembles=1)
    with pytest.raises(ValueError, match="shape"):
        evaluate_model(lambda c: np.zeros((2, 214, 2)), target, n_ensembles=1)
