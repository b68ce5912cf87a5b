"""The evaluation's protocol: settings overrides, the reference arms, and the claims' logic (fast)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import zoo
from zoo._errors import ZooError
from zoo._eval import Run, paper_arms, summarise
from zoo._recipes import resolve_recipe
from zoo.pbsac.evaluate import PROTOCOL, claims, measure, score_pretrained


def _run(seed: int = 0, **overrides) -> Run:
    return Run(paper_arms("pbsac"), PROTOCOL, seed, PROTOCOL.resolve(overrides))


def test_eval_episodes_setting_changes_what_is_measured():
    short, long = _run(eval_episodes=2), _run(eval_episodes=5)
    few, many = measure("reference_random_policy", short), measure("reference_random_policy", long)
    assert len(short.extras["episode_returns"]["reference_random_policy"]) == 2
    assert len(long.extras["episode_returns"]["reference_random_policy"]) == 5
    assert few["return_mean"] != many["return_mean"] and -2000 < few["return_mean"] < -100


def test_env_setting_changes_the_task():
    pytest.importorskip("mujoco")
    scores = measure("reference_random_policy", _run(env="InvertedPendulum-v5", eval_episodes=2))
    assert scores["return_mean"] > 0  # +1 per step alive; Pendulum's rewards are all negative


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
        ("episodes=3", "unknown setting 'episodes'; valid keys: total_steps, eval_episodes, env"),
        ("total_steps=many", "--set total_steps=many: expected an integer"),
        ("total_steps=1000", "--set total_steps=1000: must be at least 5000"),
        ("env=CartPole-v1", "--set env=CartPole-v1: expected one of Pendulum-v1"),
    ],
)
def test_bad_settings_are_one_line_errors(pair, message):
    with pytest.raises(ZooError, match=message.replace("(", r"\(")) as error:
        PROTOCOL.parse_overrides([pair])
    assert "\n" not in str(error.value)


def test_untrained_reference_is_certified_without_any_update_and_plays_worse(hf_cache, hf_offline):
    run = _run(seed=1, eval_episodes=2)
    scores = measure("reference_untrained", run)
    (model,) = run._fits.values()
    assert int(model.env_steps) == 1000 and model.trainer.global_step == 0  # warm-up only: no gradient step
    assert len(model.certificates) == 1 and 0 < scores["certificate"] < 1 and scores["coverage"] in (0.0, 1.0)
    trained = score_pretrained(zoo.load("pbsac.pendulum", pretrained=True), limit=2)["return_mean"]
    assert trained > scores["return_mean"] + 500


def _result(per_seed: dict) -> dict:
    return {"arms": {arm: summarise(runs) for arm, runs in per_seed.items()}, "per_seed": per_seed}


def test_claims_report_a_certificate_inside_the_seed_spread_as_not_separating():
    def seeds(returns, certificates=None):
        return {
            str(s): {"return_mean": r, **({"certificate": certificates[s], "coverage": 1.0} if certificates else {})}
            for s, r in enumerate(returns)
        }

    result = _result(
        {
            "pbsac": seeds([-150, -140, -160], [0.27, 0.25, 0.26]),
            "sac": seeds([-145, -150, -155]),
            "reference_untrained": seeds([-1400, -1300, -1350], [0.26, 0.29, 0.37]),
            "reference_random_policy": seeds([-1100, -1200, -1150]),
        }
    )
    by_id = {claim.id: claim for claim in claims(result)}
    assert by_id["return_rel_gap"].holds and by_id["certificate_non_vacuous"].holds and by_id["coverage"].holds
    assert by_id["pbsac_beats_reference_untrained_return_mean"].holds
    separation = by_id["pbsac_beats_reference_untrained_certificate"]
    assert separation.value == pytest.approx((-0.01 + 0.04 + 0.11) / 3, abs=1e-6) and not separation.holds
    result["per_seed"]["pbsac"]["1"]["certificate"] = 1.2  # one vacuous seed fails the claim
    assert not {c.id: c for c in claims(_result(result["per_seed"]))}["certificate_non_vacuous"].holds
