"""``zoo eval promise``'s protocol: arms and roles, equal tuning budgets, disjoint seeds, the shared DDPM pass and its
exposure fits, claims and their kinds on a fake result."""

import numpy as np
import pytest

import zoo
from zoo.eval import Run
from zoo.eval.engine import evaluation, measure_task, plan
from zoo.eval.result import summarise
from zoo.promise import evaluate
from zoo.promise.data import TEST_SAMPLE_SEED, VAL_SAMPLE_SEED


def test_arms_and_roles():
    protocol = evaluate.PROTOCOL
    assert protocol.method == "ddpm_debiased" and protocol.baselines == ("ddpm_biased",)
    assert protocol.ablations == ("ddpm_no_reweight", "ddpm_reweight_only")
    assert set(protocol.role("references")) == {"positive_control", "negative_control", "anm",
                                                 *evaluate.TRAIN_RESAMPLE}  # fmt: skip
    trials = {arm: protocol.tuning[arm].trials for arm in evaluate.DDPM_ARMS}
    assert set(trials.values()) == {9}  # the same grid for both tuned decoders and their ablations
    assert protocol.seeds == (0, 1, 2)
    # the four DDPM arms are one piece per seed (one checkpoint, one tuning); each reference is its own
    tasks = plan(protocol, protocol.arms, [0])
    assert [task.arms for task in tasks] == [evaluate.DDPM_ARMS, ("positive_control",), ("negative_control",), ("anm",),
                                             *((arm,) for arm in evaluate.TRAIN_RESAMPLE)]  # fmt: skip


def test_validation_and_test_sampling_seeds_are_disjoint():
    test = {evaluate._context_seed(seed, c, False) for seed in range(100) for c in ("apo", "ligand")}
    val = {evaluate._context_seed(seed, c, True) for seed in range(100) for c in ("apo", "ligand")}
    assert not test & val and min(val) >= VAL_SAMPLE_SEED > max(test) >= TEST_SAMPLE_SEED


def test_decoding_of_the_ablations():
    tuned = {"biased": {"guidance": 3.0, "temperature": 0.5}, "debiased": {"guidance": 0.0, "temperature": 1.0}}
    assert evaluate._decoding_for("ddpm_no_reweight", tuned) == (tuned["debiased"], False)
    assert evaluate._decoding_for("ddpm_reweight_only", tuned) == (tuned["biased"], True)


def test_controls(adk):
    settings = evaluate.PROTOCOL.resolve({"ensembles": 3})
    for arm in evaluate.REFERENCES:
        ensembles = evaluate.control_ensembles(arm, 0, settings)
        assert len(ensembles["apo"]) == 3 and ensembles["apo"][0].shape == (10, 214, 3)
    negative = evaluate.control_ensembles("negative_control", 0, settings)["apo"][0]
    assert np.std(negative - adk["states"][1]) == pytest.approx(0.3, abs=0.02)


class FakeRun(Run):
    """A Run whose checkpoint (and every fit) is the published module, recording the fits it is asked for."""

    def __init__(self, seed, module, **overrides):
        super().__init__(evaluate.PROTOCOL, "promise", seed, evaluate.PROTOCOL.resolve(overrides),
                         evaluation("promise").entries)  # fmt: skip
        self.module, self.trained = module, []

    def published(self, arm):
        return self.module

    def fit(self, recipe, overrides=()):
        self.trained.append((recipe, [*self.protocol.fit_args, *overrides]))
        return self.module


SMALL = {"ensembles": 1, "samples": 4, "val_ensembles": 1, "pool_factor": 2, "guidance_grid": [0.0],
         "temperature_grid": [1.0]}  # fmt: skip


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    import huggingface_hub.constants as hf_constants

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path_factory.mktemp("hf_cache")))
        patch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
        return zoo.load("promise.adk", pretrained=True)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_ddpm_arms_share_one_checkpoint_and_the_exposures_are_explicit_fits(published, seed):
    run = FakeRun(seed, published, **SMALL)
    scores = measure_task(evaluate.PROTOCOL, run, evaluate.DDPM_ARMS)
    assert set(scores) == set(evaluate.DDPM_ARMS)
    # seed 0 is the published checkpoint; another seed trains the recipe (validation batches skipped)
    recipe, skip = "recipes/promise/adk.yaml", "--trainer.limit_val_batches=0"
    exposures = [(recipe, [skip, f"--data.init_args.exposure={e}"]) for e in (0.7, 0.5)]
    assert run.trained == ([] if seed == 0 else [(recipe, [skip])]) + exposures
    biased = scores["ddpm_biased"]
    assert biased["success_exposure_85"] == biased["multistate_success"]
    assert {"success_exposure_70", "success_exposure_50"} <= set(biased)
    assert all("success_exposure_70" not in scores[arm] for arm in evaluate.DDPM_ARMS if arm != "ddpm_biased")
    # the ablations decode with the tuned arms' (w, T): here the grid has one point
    assert {s["guidance"] for s in scores.values()} == {0.0} and {s["tuning_trials"] for s in scores.values()} == {9}
    assert scores["ddpm_debiased"] == scores["ddpm_reweight_only"]  # same (w, T), both reweighted
    assert scores["ddpm_no_reweight"] == {k: v for k, v in biased.items() if not k.startswith("success_exposure")}
    assert ("tuned" in run.extras) == (seed == 0)


def _fake(values: dict[str, dict[str, float]], seeds=None) -> dict:
    seeds = seeds or {}
    per_seed = {arm: {str(s): {**v, **seeds.get(arm, {}).get(s, {})} for s in range(3)} for arm, v in values.items()}
    return {"arms": {arm: summarise(runs) for arm, runs in per_seed.items()}, "per_seed": per_seed}


GOOD = {
    "positive_control": {"multistate_success": 1.0, "rmsd_open_closed": 6.91},
    "negative_control": {"multistate_success": 0.0, "coverage_closed": 1.0},
    "anm": {"multistate_success": 0.0},
    "ddpm_biased": {"multistate_success": 0.2, "context_delta": 0.1},
    "ddpm_debiased": {"multistate_success": 0.9},
    "reference_train_resample": {"multistate_success": 0.7},
    "reference_train_resample_reweighted": {"multistate_success": 0.8},
}


def test_claims_hold_and_fail_as_stated():
    assert all(claim.holds for claim in evaluate.claims(_fake(GOOD)))
    bad = {**GOOD, "positive_control": {"multistate_success": 1.0, "rmsd_open_closed": 7.1},
           "ddpm_biased": {"multistate_success": 0.5, "context_delta": 0.4},
           "ddpm_debiased": {"multistate_success": 0.6}}  # fmt: skip
    failed = {claim.id for claim in evaluate.claims(_fake(bad)) if not claim.holds}
    assert failed == {"rmsd_open_closed", "biased_success", "biased_context_delta",
                      "ddpm_debiased_beats_ddpm_biased_multistate_success",
                      "ddpm_debiased_beats_reference_train_resample_multistate_success",
                      "ddpm_debiased_beats_reference_train_resample_reweighted_multistate_success"}  # fmt: skip


def test_beating_a_training_resample_needs_more_than_the_seed_spread():
    # mean gain 0.1 over the reweighted resample, but the per-seed gains (0.3, -0.1, 0.1) spread by 0.2
    result = _fake(GOOD, {"ddpm_debiased": {0: {"multistate_success": 1.1}, 1: {"multistate_success": 0.7},
                                            2: {"multistate_success": 0.9}}})  # fmt: skip
    claim = next(c for c in evaluate.claims(result) if c.versus == "reference_train_resample_reweighted")
    assert claim.kind == "paper" and claim.value == pytest.approx(0.1) and not claim.holds


def test_the_biased_decoders_room_is_a_gate_on_every_seed():
    # mean success 0.2 <= 0.3, but seed 2 reaches 0.4: the gate fails on that seed
    result = _fake(GOOD, {"ddpm_biased": {0: {"multistate_success": 0.1}, 1: {"multistate_success": 0.1},
                                          2: {"multistate_success": 0.4}}})  # fmt: skip
    claim = next(c for c in evaluate.claims(result) if c.id == "biased_success")
    assert claim.kind == "headroom" and claim.value == 0.4 and not claim.holds


def test_claim_kinds():
    kinds = {claim.id: (claim.kind, claim.arm, claim.versus) for claim in evaluate.claims(_fake(GOOD))}
    assert kinds == {
        "rmsd_open_closed": ("validity", "positive_control", None),
        "positive_control_success": ("validity", "positive_control", None),
        "negative_control_success": ("validity", "negative_control", None),
        "negative_control_covers_closed": ("validity", "negative_control", None),
        "biased_success": ("headroom", "ddpm_biased", None),
        "biased_context_delta": ("validity", "ddpm_biased", None),  # independent tags: blind by construction
        "ddpm_debiased_beats_ddpm_biased_multistate_success": ("paper", "ddpm_debiased", "ddpm_biased"),
        "ddpm_debiased_beats_reference_train_resample_multistate_success": (
            "paper",
            "ddpm_debiased",
            "reference_train_resample",
        ),
        "ddpm_debiased_beats_reference_train_resample_reweighted_multistate_success": (
            "paper",
            "ddpm_debiased",
            "reference_train_resample_reweighted",
        ),
        "ddpm_debiased_beats_anm_multistate_success": ("validity", "ddpm_debiased", "anm"),  # ANM is 0 by design
    }


# ------------------------------------------------------------------ resampling the training items (no learning)


def test_raw_train_resample_draws_distinct_items_uniformly():
    import torch

    states, frequency = torch.tensor([0, 1, 1, 1]), torch.tensor([0.25, 0.75], dtype=torch.float64)
    generator = torch.Generator().manual_seed(0)
    picks = evaluate.train_resample_picks(states, frequency, 4, None, generator)
    assert sorted(picks.tolist()) == [0, 1, 2, 3]  # n = all items: a permutation, no repeat
    # one item of four: each item 1/4 of the time (hand-computed), 4,000 draws
    counts = torch.bincount(torch.cat([evaluate.train_resample_picks(states, frequency, 1, None, generator)
                                       for _ in range(4000)]), minlength=4)  # fmt: skip
    assert torch.allclose(counts / 4000.0, torch.full((4,), 0.25), atol=0.03)


def test_reweighted_train_resample_is_the_inverse_frequency_draw():
    import torch

    # 1 open item and 4 closed ones, frequencies (0.2, 0.8): weights 5 and 1.25 each, so with the whole pool the
    # first pick is the open item with probability 5 / (5 + 4 * 1.25) = 0.5 (raw: 1/5)
    states, frequency = torch.tensor([0, 1, 1, 1, 1]), torch.tensor([0.2, 0.8], dtype=torch.float64)
    generator = torch.Generator().manual_seed(1)
    draws = [int(evaluate.train_resample_picks(states, frequency, 1, 5, generator)[0]) for _ in range(4000)]
    assert sum(d == 0 for d in draws) / 4000 == pytest.approx(0.5, abs=0.03)
    # n of a pool of n keeps the whole pool
    assert sorted(evaluate.train_resample_picks(states, frequency, 5, 5, generator).tolist()) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="cannot draw"):
        evaluate.train_resample_picks(states, frequency, 2, 6, generator)  # a pool larger than the items
    with pytest.raises(ValueError, match="cannot draw"):
        evaluate.train_resample_picks(states, frequency, 3, 2, generator)  # fewer pool items than kept


def test_train_resample_ensembles_come_from_the_contexts_own_items(adk):
    import torch

    states = torch.as_tensor(adk["states"])
    # a tiny training set: apo items open and closed, ligand items both closed
    items = {"frames": states[[0, 1, 1, 1]], "contexts": ["apo", "apo", "ligand", "ligand"],
             "state_index": torch.tensor([0, 1, 1, 1]), "state_frequency": torch.tensor([0.25, 0.75])}  # fmt: skip
    settings = evaluate.PROTOCOL.resolve({"ensembles": 3, "samples": 2, "pool_factor": 1})
    for arm in evaluate.TRAIN_RESAMPLE:
        ensembles = evaluate.train_resample_ensembles(arm, 0, settings, items)
        assert all(np.allclose(e, adk["states"][1]) for e in ensembles["ligand"])
        # both apo items in every ensemble: both states covered, half the apo samples nearest each; every ligand
        # sample is closed, half the apo ones: context delta 1 - 1/2 (hand-computed)
        scores = evaluate.score_ensembles(evaluate.target(), ensembles, 2.0)
        assert scores["multistate_success"] == 1.0 and scores["preference_open"] == 0.5
        assert scores["context_delta"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="cannot draw"):  # 3 of the 2 items of a context
        evaluate.train_resample_ensembles("reference_train_resample", 0, {**settings, "samples": 3}, items)
