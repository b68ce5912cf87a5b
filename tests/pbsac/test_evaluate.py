"""The evaluation's protocol: settings overrides, the arms on both tasks, the reference critics and the claims' logic
(fast)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

import zoo
from zoo._errors import ZooError
from zoo._recipes import resolve_recipe
from zoo._serialization import read_config
from zoo.eval import Run
from zoo.eval.engine import evaluation, measure_task
from zoo.eval.result import summarise
from zoo.pbsac import evaluate
from zoo.pbsac.evaluate import (
    FREE_PRIOR_ARMS,
    MCC_RECIPE,
    PROTOCOL,
    REFERENCE_CRITICS,
    SAC_ARGS,
    UNTRAINED_ARGS,
    claims,
)
from zoo.pbsac.sac import ReplayBuffer


class FakeRun(Run):
    """A Run that records the fits it is asked for and returns untrained agents with a made-up certificate."""

    def __init__(self, seed: int = 0, **overrides):
        super().__init__(PROTOCOL, "pbsac", seed, PROTOCOL.resolve(overrides), evaluation("pbsac").entries)
        self.trained: list[tuple[str, list[str]]] = []

    def fit(self, recipe, overrides=()):
        from zoo.pbsac.module import PBSACModule

        args = [*self.recipe_overrides(), *overrides]
        self.trained.append((recipe, args))
        bayesian = "sac_" not in recipe and "--model.init_args.bayesian=false" not in args
        env = "MountainCarContinuous-v0" if recipe == MCC_RECIPE else "Pendulum-v1"
        module = PBSACModule(env_id=env, bayesian=bayesian, certificate_episodes=int(bayesian)).eval()
        if bayesian:  # what the final certificate phase of a fit records
            module.certificates = [_certificate(0.3, final=True)]
        return module


def _certificate(value: float, final: bool = False) -> dict:
    return {"step": 15_000, "final": final, "value": value, "iid_value": value / 2, "kl": 0.01, "delta": 0.05,
            "episodes": 200, "prior_widths": [1.0], "empirical_risk": 0.1, "prior_risk": 0.2, "fresh_loss": 0.1,
            "return_bound": -500.0,
            "policy_certificate": 0.4, "covered": True, "iid_covered": True, "return_covered": False}  # fmt: skip


def _run(seed: int = 0, **overrides) -> Run:
    return FakeRun(seed, **overrides)


def measure(arm: str, run: Run) -> dict[str, float]:
    return measure_task(PROTOCOL, run, (arm,))[arm]


def test_eval_episodes_setting_changes_what_is_measured():
    short, long = _run(eval_episodes=2), _run(eval_episodes=5)
    few, many = measure("reference_random_policy", short), measure("reference_random_policy", long)
    assert len(short.extras["episode_returns"]["reference_random_policy"]) == 2
    assert len(long.extras["episode_returns"]["reference_random_policy"]) == 5
    assert few["return_mean"] != many["return_mean"] and -2000 < few["return_mean"] < -100


def test_exploration_task_is_off_by_default_and_can_be_switched_on_without_retraining_pendulum():
    assert PROTOCOL.resolve()["mcc_total_steps"] == 0
    with_task, without = (
        measure("reference_random_policy", _run(eval_episodes=1, mcc_total_steps=15_000)),
        measure("reference_random_policy", _run(eval_episodes=1)),
    )
    assert set(with_task) == {"return_mean", "mcc_return_mean"} and set(without) == {"return_mean"}
    assert -60 < with_task["mcc_return_mean"] < 0  # -0.1 a^2 per step, the hilltop never reached at random
    assert _run(mcc_total_steps=20_000).uses_published("pbsac")  # MountainCar is never published


@pytest.fixture
def no_free_prior(monkeypatch):
    """The data-free-prior certificate replaced by a marker (its math is tested in test_references.py)."""
    monkeypatch.setattr(evaluate, "free_prior_certificate", lambda model, run: {"free_certificate": 0.5})


def test_every_trained_arm_measures_both_tasks_from_its_own_fits(no_free_prior):
    """Pendulum from the arm's entry recipe (or pbsac's + its switches), MountainCar from its recipe of no entry."""
    run = _run(1, eval_episodes=1, mcc_total_steps=15_000)
    scores = {arm: measure(arm, run) for arm in ("pbsac", "sac", "pbsac_no_exploration", "reference_untrained")}
    mcc = ["--data.init_args.total_steps=15000", "--model.init_args.kappa_anneal_steps=15000"]
    pendulum, sac = "recipes/pbsac/pendulum.yaml", "recipes/pbsac/sac_pendulum.yaml"
    assert run.trained == [
        (pendulum, []), (MCC_RECIPE, mcc),
        (sac, []), (MCC_RECIPE, [*mcc, *SAC_ARGS]),
        (pendulum, ["--model.init_args.kappa=0"]), (MCC_RECIPE, [*mcc, "--model.init_args.kappa=0"]),
        (pendulum, list(UNTRAINED_ARGS)), (MCC_RECIPE, [*mcc, *UNTRAINED_ARGS]),
    ]  # fmt: skip
    assert set(scores["sac"]) == {"return_mean", "mcc_return_mean"}  # no posterior, no certificate
    for arm in ("pbsac", "pbsac_no_exploration", "reference_untrained"):
        assert scores[arm]["certificate"] == scores[arm]["mcc_certificate"] == 0.3
        assert scores[arm]["coverage"] == 1.0 and scores[arm]["return_coverage"] == 0.0
        # the bound's parts: 0.3 = risk 0.1 + complexity 0.2, above its value at KL = 0
        assert scores[arm]["complexity"] == pytest.approx(0.2) and 0 < scores[arm]["complexity_floor"] < 0.2
        assert ("free_certificate" in scores[arm]) == (arm in FREE_PRIOR_ARMS)
    assert FREE_PRIOR_ARMS == ("pbsac", "reference_untrained")  # the complexity claim compares these two
    assert set(run.extras["mcc_certificates"]) == {"pbsac", "pbsac_no_exploration", "reference_untrained"}
    assert len(run.extras["episode_returns"]["sac"]) == len(run.extras["mcc_episode_returns"]["sac"]) == 1


def test_seed_0_scores_the_published_agent_with_the_certificates_of_its_fit(hf_cache, hf_offline, no_free_prior):
    """The certificate history travels in config.json and back (import_files): the card's seed-0 numbers."""
    run = _run(0, mcc_total_steps=0)
    assert run.uses_published("pbsac") and not run.uses_published("pbsac_no_exploration")
    scores = measure("pbsac", run)
    assert run.trained == []  # nothing trained: Pendulum is the published checkpoint, MountainCar left out
    published = json.loads((zoo.get_entry("pbsac.pendulum").mirror_dir / "metrics.json").read_text())
    # the data-free-prior certificate is stubbed here (no_free_prior): every other published metric is compared
    seed0 = {k: v for k, v in published["per_seed"]["pbsac"]["0"].items() if not k.startswith(("mcc_", "free_"))}
    assert {"complexity", "complexity_floor", "free_certificate"} <= scores.keys()
    assert {k: v for k, v in scores.items() if not k.startswith("free_")} == pytest.approx(seed0, rel=1e-5, abs=1e-6)


def test_published_certificate_history_reads_back_as_stored(hf_cache, hf_offline):
    folder = zoo.get_entry("pbsac.pendulum").mirror_dir
    history = read_config(folder)["metadata"]["certificates"]
    assert zoo.load("pbsac.pendulum", pretrained=True).certificates == history and history[-1]["final"]
    assert zoo.load("pbsac.sac_pendulum", pretrained=True).certificates == []


@pytest.mark.parametrize("name", ["pbsac.pendulum", "pbsac.sac_pendulum"])
def test_training_settings_become_recipe_overrides_of_real_keys(name):
    default, longer = _run(), _run(total_steps=20_000)
    arm = zoo.get_entry(name).eval_arm
    assert default.recipe_overrides() == [] and default.uses_published(arm)
    assert longer.recipe_overrides() == [
        "--data.init_args.total_steps=20000",
        "--model.init_args.kappa_anneal_steps=20000",
    ]
    assert not longer.uses_published(arm)  # a changed training setting retrains every arm
    recipe = yaml.safe_load(Path(resolve_recipe(zoo.get_entry(name).pretrained_cfg.recipe)).read_text())
    for setting in PROTOCOL.settings.values():
        for key in setting.recipe_keys:
            section, _, field = key.split(".")
            assert field in recipe[section]["init_args"], key


@pytest.mark.parametrize(
    "pair, message",
    [
        ("episodes=3", "unknown setting 'episodes'; valid keys: total_steps, mcc_total_steps, eval_episodes"),
        ("total_steps=many", "--set total_steps=many: expected an integer"),
        ("total_steps=1000", "--set total_steps=1000: must be at least 5000"),
        ("mcc_total_steps=-1", "--set mcc_total_steps=-1: must be at least 0"),
        ("validation_episodes=1", "--set validation_episodes=1: must be at least 2"),
    ],
)
def test_bad_settings_are_one_line_errors(pair, message):
    with pytest.raises(ZooError, match=message.replace("(", r"\(")) as error:
        PROTOCOL.parse_overrides([pair])
    assert "\n" not in str(error.value)


def test_untrained_reference_certifies_worse_than_the_published_agent(hf_cache, hf_offline):
    """The same certificate code on the published agent and on the untrained one (same T, same seeds)."""
    from zoo.pbsac.certificate import PRIOR_WIDTHS, certify
    from zoo.pbsac.module import PBSACModule

    trained, untrained = zoo.load("pbsac.pendulum", pretrained=True), PBSACModule()
    certificates = []
    for model in (trained, untrained):
        torch.manual_seed(0)
        certificate, _ = certify(
            model.agent, "Pendulum-v1", model.scaler, ReplayBuffer(1, 3, 1).slices, model.rewards, 200,
            episodes=40, posterior_steps=20, check_episodes=0, seed=5, prior_widths=PRIOR_WIDTHS,
        )  # fmt: skip
        certificates.append(certificate)
    good, bad = certificates
    assert good.value < bad.value and good.empirical_risk < 0.5 * bad.empirical_risk
    assert good.return_bound > bad.return_bound + 100 and good.return_mean > bad.return_mean + 200
    assert good.kl > 0 and good.prior_widths == bad.prior_widths == PRIOR_WIDTHS
    assert good.value <= 0.7 * bad.value  # the threshold, on the published agent


def _result(per_seed: dict) -> dict:
    return {"arms": {arm: summarise(runs) for arm, runs in per_seed.items()}, "per_seed": per_seed}


def _seeds(returns, certificates=None, prefix="", coverage=(1.0, 1.0)):
    rows = {}
    for s, r in enumerate(returns):
        row = {f"{prefix}return_mean": r}
        if certificates:
            row.update({f"{prefix}certificate": certificates[s], f"{prefix}kl": 0.5, f"{prefix}coverage": coverage[0],
                        f"{prefix}coverage_iid": coverage[1], f"{prefix}return_bound": r - 100})  # fmt: skip
        rows[str(s)] = row
    return rows


def test_claims_on_both_tasks():
    per_seed = {
        "pbsac": _seeds([-150, -140, -160], [0.2, 0.19, 0.21]),
        "sac": _seeds([-145, -150, -155]),
        "pbsac_no_exploration": _seeds([-150, -150, -150], [0.2, 0.2, 0.2]),
        "reference_untrained": _seeds([-1400, -1300, -1350], [0.35, 0.34, 0.36]),
        "reference_random_policy": _seeds([-1100, -1200, -1150]),
    }
    mcc = {
        "pbsac": _seeds([90, -1, 80], [0.4, 0.4, 0.4], "mcc_", (1.0, 0.5)),
        "sac": _seeds([-1, -2, 85], None, "mcc_"),
        "reference_untrained": _seeds([-30, -30, -30], [0.41, 0.4, 0.42], "mcc_"),
    }
    for arm, rows in mcc.items():
        for seed, row in rows.items():
            per_seed[arm][seed].update(row)
    by_id = {claim.id: claim for claim in claims(_result(per_seed))}
    assert by_id["return_rel_gap"].holds and by_id["certificate_non_vacuous"].holds and by_id["kl_positive"].holds
    assert by_id["certificate_separates_learning"].holds
    assert by_id["certificate_separates_learning"].value == pytest.approx(0.2 / 0.35, abs=1e-6)
    assert not by_id["mcc_certificate_separates_learning"].holds  # 0.4 / 0.41 > 0.7
    assert by_id["coverage"].holds and not by_id["coverage_iid_lower"].holds  # both cover: not lower
    assert by_id["mcc_coverage_iid_lower"].holds
    assert by_id["mcc_return_vs_sac"].holds and by_id["mcc_return_vs_sac"].value == pytest.approx(29.0)
    per_seed["pbsac"]["1"]["certificate"] = 1.2  # one vacuous seed fails the claim
    assert not {c.id: c for c in claims(_result(per_seed))}["certificate_non_vacuous"].holds
    kinds = {claim.id: claim.kind for claim in claims(_result(per_seed))}
    assert {kinds[i] for i in ("kl_positive", "coverage", "mcc_reaches_goal", "certificate_non_vacuous")} == {
        "validity"
    }
    assert {kinds[i] for i in ("return_rel_gap", "coverage_iid_lower", "certificate_separates_learning")} == {"paper"}
    assert {claim.arm for claim in claims(_result(per_seed))} == {"pbsac"}


def _parts(certificates, complexity, free=None):
    rows = {}
    for s, (value, term) in enumerate(zip(certificates, complexity, strict=True)):
        rows[str(s)] = {"return_mean": -150.0, "certificate": value, "complexity": term, "kl": 0.5, "coverage": 1.0,
                        "coverage_iid": 1.0, "return_bound": -250.0}  # fmt: skip
        if free is not None:
            rows[str(s)]["free_complexity"] = free[s]
    return rows


def test_claims_against_the_reference_critics_and_the_complexity_term():
    """0.7 x each reference critic's certificate; the complexity term against the untrained agent's, by the spread."""
    per_seed = {
        "pbsac": _parts([0.15, 0.15, 0.15], [0.136, 0.136, 0.136], [0.39, 0.40, 0.41]),
        "sac": {str(s): {"return_mean": -150.0} for s in range(3)},
        "reference_untrained": _parts([0.32, 0.33, 0.31], [0.136, 0.136, 0.136], [0.20, 0.12, 0.16]),
        "reference_random_policy": {str(s): {"return_mean": -1200.0} for s in range(3)},
        "reference_constant_critic": _parts([0.145, 0.15, 0.155], [0.124] * 3),
        "reference_constant_critic_random": _parts([0.3, 0.3, 0.3], [0.124] * 3),
    }
    by_id = {claim.id: claim for claim in claims(_result(per_seed))}
    near = by_id["certificate_vs_reference_constant_critic"]
    assert not near.holds and near.value == pytest.approx(1.0) and near.kind == "paper"
    assert near.versus == "reference_constant_critic"
    assert by_id["certificate_vs_reference_constant_critic_random"].holds  # 0.15 / 0.3 = 0.5
    assert "certificate_vs_reference_fitted_last_layer" not in by_id  # not measured: no claim
    same = by_id["complexity_differs_from_untrained"]
    assert not same.holds and same.value == pytest.approx(0.0) and same.kind == "paper"
    free = by_id["free_complexity_differs_from_untrained"]
    assert free.holds and free.value == pytest.approx(0.24)  # gains 0.19, 0.28, 0.25; spread 0.046
    per_seed["reference_untrained"]["1"]["free_complexity"] = 0.9  # a gain of -0.5 on one seed: spread > |mean|
    assert not {c.id: c for c in claims(_result(per_seed))}["free_complexity_differs_from_untrained"].holds


def test_reference_critics_certify_each_reference_on_its_own_episodes(monkeypatch):
    """Two validation and two certificate episodes per policy: every reference gets both certificates and parts."""
    monkeypatch.setitem(evaluate.CERTIFY, "grid", (1.0, 10.0))
    monkeypatch.setitem(evaluate.CERTIFY, "steps", 10)
    run = _run(1, reference_episodes=2, validation_episodes=2, mcc_total_steps=0)
    scores = measure_task(PROTOCOL, run, REFERENCE_CRITICS)
    assert set(scores) == set(REFERENCE_CRITICS)
    for arm, parts in scores.items():
        for prefix in ("", "free_"):
            value, risk, term = (parts[f"{prefix}{k}"] for k in ("certificate", "empirical_risk", "complexity"))
            assert value > 0 and 0 <= risk <= 1 and value == pytest.approx(risk + term), arm  # T = 2: may pass 1
            assert parts[f"{prefix}complexity"] >= parts[f"{prefix}complexity_floor"] - 1e-9
            assert parts[f"{prefix}prior_width"] in evaluate.CERTIFY["grid"]
    trained, random = scores["reference_constant_critic"], scores["reference_constant_critic_random"]
    assert trained["certificate"] != random["certificate"]  # different policies' episodes
    assert run.trained == [("recipes/pbsac/pendulum.yaml", [])]  # the trained policy: pbsac's fit of this seed
