"""``zoo eval promise``'s protocol: arms and roles, equal tuning budgets, disjoint seeds, claims on a fake result."""

import numpy as np
import pytest

from zoo._eval import summarise
from zoo.promise import evaluate
from zoo.promise.data import TEST_SAMPLE_SEED, VAL_SAMPLE_SEED


def test_arms_and_roles():
    protocol = evaluate.PROTOCOL
    assert protocol.method == "ddpm_debiased" and protocol.baselines == ("ddpm_biased",)
    assert protocol.ablations == ("ddpm_no_reweight", "ddpm_reweight_only")
    assert set(protocol.references) == {"positive_control", "negative_control", "anm"}
    trials = {arm: protocol.tuning[arm].trials for arm in evaluate.DDPM_ARMS}
    assert set(trials.values()) == {9}  # the same grid for both tuned decoders and their ablations
    assert protocol.seeds == (0, 1, 2)


def test_validation_and_test_sampling_seeds_are_disjoint():
    test = {evaluate._context_seed(seed, c, False) for seed in range(100) for c in ("apo", "ligand")}
    val = {evaluate._context_seed(seed, c, True) for seed in range(100) for c in ("apo", "ligand")}
    assert not test & val and min(val) >= VAL_SAMPLE_SEED > max(test) >= TEST_SAMPLE_SEED


def test_decoding_of_the_ablations():
    tuned = {"biased": {"guidance": 3.0, "temperature": 0.5}, "debiased": {"guidance": 0.0, "temperature": 1.0}}
    assert evaluate._decoding_for("ddpm_no_reweight", tuned) == (tuned["debiased"], False)
    assert evaluate._decoding_for("ddpm_reweight_only", tuned) == (tuned["biased"], True)


def test_controls(adk):
    settings = {key: setting.default for key, setting in evaluate.PROTOCOL.settings.items()}
    settings["ensembles"] = 3
    for arm in evaluate.PROTOCOL.references:
        ensembles = evaluate.control_ensembles(arm, 0, settings)
        assert len(ensembles["apo"]) == 3 and ensembles["apo"][0].shape == (10, 214, 3)
    negative = evaluate.control_ensembles("negative_control", 0, settings)["apo"][0]
    assert np.std(negative - adk["states"][1]) == pytest.approx(0.3, abs=0.02)


def _fake(values: dict[str, dict[str, float]]) -> dict:
    per_seed = {arm: {str(s): dict(v) for s in range(3)} for arm, v in values.items()}
    return {"arms": {arm: summarise(runs) for arm, runs in per_seed.items()}, "per_seed": per_seed}


def test_claims_hold_and_fail_as_stated():
    good = _fake({
        "positive_control": {"multistate_success": 1.0, "rmsd_open_closed": 6.91},
        "negative_control": {"multistate_success": 0.0, "coverage_closed": 1.0},
        "anm": {"multistate_success": 0.0},
        "ddpm_biased": {"multistate_success": 0.2, "context_delta": 0.1},
        "ddpm_debiased": {"multistate_success": 0.9},
    })  # fmt: skip
    assert all(claim.holds for claim in evaluate.claims(good))
    bad = _fake({
        "positive_control": {"multistate_success": 1.0, "rmsd_open_closed": 7.1},
        "ddpm_biased": {"multistate_success": 0.5, "context_delta": 0.4},
        "ddpm_debiased": {"multistate_success": 0.6},
    })  # fmt: skip
    failed = {claim.id for claim in evaluate.claims(bad) if not claim.holds}
    assert failed == {"rmsd_open_closed", "biased_success", "biased_context_delta",
                      "ddpm_debiased_beats_ddpm_biased_multistate_success"}  # fmt: skip
