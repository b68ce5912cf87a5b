"""The noise-handling study's pieces: noise cost, Co-teaching with estimated rates, FedGR without noise handling,
and the shared-grid tuning stage (``zoo.fedgr.tune_noise``) without training anything."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from zoo.eval.result import summarise
from zoo.fedgr import evaluate_noise, tune_noise
from zoo.fedgr.client import CoTeachingTrainer, FedGRTrainer, sieve_losses
from zoo.fedgr.config import NO_NOISE_HANDLING, BaselineConfig, FedGRConfig, LocalConfig, RunConfig
from zoo.fedgr.evaluate import PROTOCOL, setting_args
from zoo.fedgr.evaluate_noise import (
    LR_GRID,
    MEMORISATION_SETTINGS,
    NOISE_STUDY_ARMS,
    PROBE,
    REGIME_BASES,
    at_rate,
    best_rate,
    chosen_rate,
    memorisation_regime,
    noise_cost,
    noise_cost_panel,
    noise_costs,
    noise_study_claims,
    planned_rates,
    probe_drops,
    regime_arms,
    study_trials,
    study_tuning,
)
from zoo.fedgr.federation import ClientData
from zoo.fedgr.server import FedAvgServer, FedGRServer


def _client(n=40, noise_rate=0.5):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    return ClientData(0, np.arange(n), images, rng.integers(0, 10, n), noise_rate=noise_rate)


# ------------------------------------------------------------------------------------------------ noise cost


def test_noise_cost_is_clean_minus_noisy_on_the_shared_seeds():
    noisy = {"0": {"accuracy": 0.80}, "1": {"accuracy": 0.70}, "2": {"accuracy": 0.75}}
    clean = {"0": {"accuracy": 0.88}, "1": {"accuracy": 0.80}}
    assert noise_cost(noisy, clean) == pytest.approx({"0": 0.08, "1": 0.10})
    with pytest.raises(ValueError, match="no seed"):
        noise_cost(noisy, {"7": {"accuracy": 0.9}})


def test_noise_costs_reports_mean_spread_and_seeds_of_the_arms_it_can_pair():
    per_seed = {
        "fedgr": {"0": {"accuracy": 0.82}, "1": {"accuracy": 0.83}},
        "fedgr_clean": {"0": {"accuracy": 0.89}, "1": {"accuracy": 0.88}},
        "fedavg": {"0": {"accuracy": 0.80}, "1": {"accuracy": 0.78}},
        "reference_clean_fedavg": {"0": {"accuracy": 0.87}, "1": {"accuracy": 0.87}},
    }
    costs = noise_costs(per_seed)
    assert set(costs) == {"fedgr", "fedavg"}  # fedgr_no_noise_handling has no runs here
    assert costs["fedgr"]["noise_cost"] == pytest.approx(0.06)
    assert costs["fedgr"]["noise_cost_std"] == pytest.approx(np.std([0.07, 0.05], ddof=1))
    assert costs["fedavg"]["seed 1"] == pytest.approx(0.09)
    assert noise_costs({"fedgr": per_seed["fedgr"], "fedgr_clean": {"0": {"accuracy": 0.9}}})["fedgr"] == (
        pytest.approx({"noise_cost": 0.08, "noise_cost_std": 0.0, "seed 0": 0.08})
    )


def _study(**accuracies):
    """A result with ``accuracy`` per seed (and ``accuracy_best`` where given as a (final, best) pair)."""
    per_seed = {}
    for arm, values in accuracies.items():
        runs = per_seed[arm] = {}
        for seed, value in enumerate(values):
            final, best = value if isinstance(value, tuple) else (value, value)
            runs[str(seed)] = {"accuracy": final, "accuracy_final": final, "accuracy_best": best}
    arms = {arm: summarise(runs) for arm, runs in per_seed.items()}
    return {"seeds": [0, 1, 2], "settings": {"method": "fedgr"}, "per_seed": per_seed, "arms": arms, "extras": {}}


def test_noise_study_claims_compare_noise_costs_and_accuracy_over_paired_seeds():
    result = _study(
        fedgr=[0.82, 0.83, 0.82],
        fedgr_clean=[0.87, 0.88, 0.87],  # cost 0.05 on every seed
        fedavg=[0.78, 0.79, 0.78],
        reference_clean_fedavg=[0.86, 0.87, 0.86],  # cost 0.08: 0.03 above FedGR's on every seed
        fedgr_no_noise_handling=[0.80, 0.80, 0.81],  # FedGR +0.02, +0.03, +0.01: above the spread (0.01)
        fedgr_no_noise_handling_clean=[0.87, 0.86, 0.87],  # cost 0.07, 0.06, 0.06: 0.02, 0.01, 0.01 above FedGR's
        coteaching_estimated=[0.83, 0.82, 0.82],  # FedGR -0.01, +0.01, 0: no result
    )
    made = {claim.id: claim for claim in noise_study_claims(result)}
    assert {i: c.holds for i, c in made.items()} == {
        "fedgr_beats_fedavg_noise_cost": True,
        "fedgr_beats_fedgr_no_noise_handling_noise_cost": False,  # mean 0.0133 < 0.02
        "fedgr_beats_fedgr_no_noise_handling_accuracy": True,
        "fedgr_beats_coteaching_estimated_accuracy": False,
    }
    assert made["fedgr_beats_fedavg_noise_cost"].value == pytest.approx(0.03)
    assert {c.kind for c in made.values()} == {"paper"} and {c.arm for c in made.values()} == {"fedgr"}
    assert result["extras"]["noise_cost"]["fedavg"]["noise_cost"] == pytest.approx(0.08)


def test_regime_claims_need_fedavg_to_fall_on_every_seed_and_fedgr_five_points_above():
    result = _study(
        fedgr=[0.82] * 3,
        fedgr_regime=[0.80, 0.81, 0.80],
        fedavg_regime=[(0.74, 0.79), (0.75, 0.78), (0.76, 0.77)],  # drops 0.05, 0.03, 0.01: seed 2 fails
        fedgr_no_refine_regime=[0.80, 0.80, 0.79],  # gains 0, 0.01, 0.01: 0.0067 > spread 0.0058
    )
    made = {claim.id: claim for claim in noise_study_claims(result)}
    assert not made["fedavg_regime_memorises"].holds and made["fedavg_regime_memorises"].kind == "headroom"
    assert made["fedavg_regime_memorises"].value == pytest.approx(0.01)
    assert made["fedgr_regime_beats_fedavg_regime_accuracy"].holds  # gains 0.06, 0.06, 0.04: mean 0.0533
    assert made["fedgr_regime_beats_fedgr_no_refine_regime_accuracy"].holds
    assert "noise_cost" in result["extras"] and result["extras"]["noise_cost"] == {}  # no clean runs here


def test_regime_arms_add_the_setting_and_rates_to_their_bases_and_the_panel_draws(tmp_path):
    from zoo._figures import card_figure

    arms = {arm.name: arm for arm in regime_arms(["--model.init_args.local.epochs=10"], {"fedavg_regime": 0.02})}
    assert set(arms) == set(REGIME_BASES)
    assert arms["fedavg_regime"].overrides == ("--model.init_args.local.epochs=10", "--model.init_args.local.lr=0.02")
    assert arms["fedgr_no_refine_regime"].overrides[0] == "--model.init_args.fedgr.refine=false"
    assert arms["fedgr_regime"].base == "fedgr" and arms["fedgr_regime"].overrides == (
        "--model.init_args.local.epochs=10",
    )
    result = _study(fedgr=[0.82, 0.83, 0.82], fedgr_clean=[0.87, 0.88, 0.87], fedavg=[0.7] * 3)
    result["per_seed"]["reference_clean_fedavg"] = result["per_seed"]["fedgr_clean"]
    with card_figure({**result, "name": "fedgr.fashion_mnist"}, tmp_path / "costs.png") as axes:
        noise_cost_panel(axes[0], result)
    assert (tmp_path / "costs.png").stat().st_size > 0


# ------------------------------------------------------------------------------------- defaults stay published


def test_new_options_default_to_the_published_behaviour():
    assert BaselineConfig().coteach_forget_rate == "oracle"
    with pytest.raises(ValueError, match="coteach_forget_rate"):
        BaselineConfig(coteach_forget_rate="guess")
    assert all(getattr(FedGRConfig(), switch) for switch in NO_NOISE_HANDLING)  # every switch on by default


def test_the_study_is_not_wired_into_the_protocol_yet():
    assert not {arm.name for arm in NOISE_STUDY_ARMS} & set(PROTOCOL.arms)  # the card stays what its pieces make


class _Run:
    settings = {"noise": "symmetric"}


def test_at_rate_appends_the_rate_to_fixed_and_computed_overrides():
    fixed, computed = NOISE_STUDY_ARMS[0], NOISE_STUDY_ARMS[1]
    assert at_rate(fixed, 0.03).fit_overrides(_Run()) == [*fixed.overrides, "--model.init_args.local.lr=0.03"]
    assert at_rate(computed, 0.03).fit_overrides(_Run())[-2:] == [
        "--data.init_args.noise=none",
        "--model.init_args.local.lr=0.03",
    ]


def _record(rows, arm="fedavg", setting=None, rounds=80):
    """A study record with one trial per ``rate: (accuracy, validation drop)``."""
    trials = {}
    for rate, (accuracy, drop) in rows.items():
        key = json.dumps({**(setting or {}), "local.lr": rate, "rounds": rounds, "fraction": 0.1, "seed": 0})
        trials[key] = {"client_val_accuracy": accuracy, "val_drop_best_to_final": drop, "seconds": 1.0}
    return {"trials": {arm: trials}}


def test_the_study_record_gives_each_arm_its_choice_and_tuning_note():
    record = _record({0.01: (0.38, 0.0), 0.02: (0.40, 0.01), 0.05: (0.40, 0.05), 0.1: (0.3, 0.0)})
    other_rounds = _record({0.1: (0.9, 0.0)}, rounds=2)["trials"]["fedavg"]
    record["trials"]["fedavg"].update(other_rounds)  # another study's trial: not counted
    assert set(study_trials(record, "fedavg")["{}"]) == set(LR_GRID)
    assert best_rate({0.01: 0.38, 0.02: 0.40, 0.05: 0.40}) == 0.02  # ties: the smaller rate
    assert chosen_rate("fedavg", record) == 0.02
    tuning = study_tuning("fedavg", "mu 0.01", record=record, mu=[0.01, 0.1])
    assert tuning.split == "validation" and tuning.grid == {"lr": list(LR_GRID), "mu": [0.01, 0.1]}
    assert tuning.trials == 5 and "0.02 -> 0.400 (chosen)" in tuning.note and tuning.note.endswith("; mu 0.01")
    with pytest.raises(ValueError, match="lacks trials of 'fedprox'.*tune_noise"):
        chosen_rate("fedprox", record)
    with pytest.raises(ValueError, match="lacks trials of 'fedavg'"):
        study_tuning("fedavg", setting={"local_epochs": 10}, record=record)
    at_edge = _record({0.01: (0.40, 0.0), 0.02: (0.38, 0.0), 0.05: (0.3, 0.0), 0.1: (0.2, 0.0)})
    with pytest.raises(ValueError, match="lacks trials"):  # 0.005 is planned past the edge and not run yet
        chosen_rate("fedavg", at_edge)


def test_the_regime_is_the_first_candidate_where_tuned_fedavg_falls():
    epochs, pair = MEMORISATION_SETTINGS
    rows = {0.01: (0.39, 0.0), 0.02: (0.40, 0.01), 0.05: (0.39, 0.08), 0.1: (0.3, 0.1)}  # the choice barely falls
    record = _record(rows, PROBE, epochs)
    pair_rows = {0.01: (0.30, 0.01), 0.02: (0.31, 0.03), 0.05: (0.28, 0.0), 0.1: (0.2, 0.0)}
    record["trials"][PROBE].update(_record(pair_rows, PROBE, pair)["trials"][PROBE])
    assert probe_drops(record) == {json.dumps(epochs): (0.02, 0.01), json.dumps(pair, sort_keys=True): (0.02, 0.03)}
    assert memorisation_regime(record) == (pair, 0.02, 0.03)
    del pair_rows[0.1]  # a setting whose grid is not done yet is no candidate
    unfinished = _record(rows, PROBE, epochs)
    unfinished["trials"][PROBE].update(_record(pair_rows, PROBE, pair)["trials"][PROBE])
    assert memorisation_regime(unfinished) is None and list(probe_drops(unfinished)) == [json.dumps(epochs)]
    assert setting_args(pair) == [
        "--data.init_args.noise=pair",
        "--data.init_args.noise_low=0.2",
        "--data.init_args.noise_high=0.4",
    ]


def test_without_a_regime_a_failing_headroom_claim_states_the_largest_drop(tmp_path, monkeypatch):
    path = tmp_path / "tuning_noise.json"
    rows = {0.01: (0.39, 0.0), 0.02: (0.40, 0.012), 0.05: (0.39, 0.08), 0.1: (0.3, 0.1)}
    path.write_text(json.dumps(_record(rows, PROBE, MEMORISATION_SETTINGS[0])))
    monkeypatch.setattr(evaluate_noise, "STUDY_FILE", path)
    made = {claim.id: claim for claim in noise_study_claims(_study(fedgr=[0.82] * 3), regime_found=False)}
    claim = made["memorisation_regime_found"]
    assert not claim.holds and claim.kind == "headroom" and claim.value == pytest.approx(0.012)
    assert "fedavg_regime_memorises" not in made


# ------------------------------------------------------------------------------------------ Co-teaching rates


def test_coteaching_forgets_the_true_rate_by_default_and_the_gmm_estimate_when_asked():
    base = RunConfig("coteaching", clients_per_round=1, local=LocalConfig(epochs=1, batch_size=8))
    server = FedAvgServer(base, num_clients=1)
    oracle = CoTeachingTrainer(_client(noise_rate=0.5), base)
    task = server.task(5, 0)  # the ramp (5 rounds) is complete
    update, state = oracle.fit(server.global_state, task)
    assert update.metrics["forget_rate"] == 0.5 and "noise_estimate" not in update.metrics and state == {}

    run = replace(base, baselines=BaselineConfig(coteach_forget_rate="estimated"))
    trainer = CoTeachingTrainer(_client(noise_rate=0.5), run)
    update, state = trainer.fit(server.global_state, task)
    trainer.model.load_state_dict({k: v for k, v in server.global_state.items() if not k.startswith("peer.")})
    with torch.no_grad():
        losses = F.cross_entropy(trainer.model(trainer.images), trainer.labels, reduction="none")
    _, expected, _ = sieve_losses(losses, run.fedgr, run.seed)  # the first visit: the running mean is the loss
    assert update.metrics["noise_estimate"] == pytest.approx(expected)
    assert update.metrics["forget_rate"] == pytest.approx(expected)
    assert torch.allclose(state["loss_mean"], losses)

    # After FedGR's sieve would freeze, the last estimate is kept and no loss is computed.
    state["noise_estimate"] = torch.tensor(0.3)
    late = server.task(run.fedgr.sieve_until + 1, 0)
    assert trainer.estimated_noise_rate(late, state) == pytest.approx(0.3)


def test_sieve_losses_flags_the_high_loss_mode_and_nothing_without_one():
    rng = np.random.default_rng(0)
    config = FedGRConfig()
    mixed = torch.as_tensor(np.concatenate([rng.normal(0.2, 0.05, 300), rng.normal(3.0, 0.3, 200)]).clip(0))
    clean, estimate, _ = sieve_losses(mixed, config, 0)
    assert estimate == pytest.approx(0.4, abs=0.02) and (clean[300:] < 0.5).all()
    _, estimate, _ = sieve_losses(torch.as_tensor(rng.normal(0.5, 0.05, 500)), config, 0)
    assert estimate == 0.0  # one mode fails the separation test: nothing is flagged


# ------------------------------------------------------------------------------------ no noise handling


def test_fedgr_without_noise_handling_trains_plain_cross_entropy_on_every_label():
    fedgr = FedGRConfig(**NO_NOISE_HANDLING, reg_weight=0.0)
    run = RunConfig("fedgr", clients_per_round=1, local=LocalConfig(epochs=1, batch_size=8), fedgr=fedgr)
    server = FedGRServer(run, num_clients=1)
    trainer = FedGRTrainer(_client(), run)
    assert trainer.teacher is None  # no distillation
    for round_idx in (1, fedgr.sniff_rounds + 1, fedgr.sieve_until + 1):
        task = server.task(round_idx, 0)
        assert not task.upload_losses and task.clean_probability is None  # no sieve
        generator = torch.Generator().manual_seed(task.seed)
        trainer.model.load_state_dict(server.global_state)
        context = trainer.begin_round(server.global_state, task, {}, generator)
        refined = context["refined"]
        assert refined.keep.all() and float(refined.pseudo_weight.abs().sum()) == 0.0  # every observed label
        views = trainer.epoch_views(context, generator)
        index = torch.arange(8)
        expected = F.cross_entropy(trainer.model(views["weak"][index]), trainer.labels[index])
        assert torch.allclose(trainer.batch_loss(index, views, context), expected, atol=1e-6)


def test_the_study_arms_are_the_switches_of_the_config():
    arms = {arm.name: arm for arm in NOISE_STUDY_ARMS}
    overrides = set(arms["fedgr_no_noise_handling"].overrides)
    assert overrides == {f"--model.init_args.fedgr.{switch}=false" for switch in NO_NOISE_HANDLING}
    assert arms["coteaching_estimated"].base == "coteaching"
    assert tune_noise.ARMS["fedgr_no_noise_handling"] == ("fedgr", tuple(arms["fedgr_no_noise_handling"].overrides))


# --------------------------------------------------------------------------------------------- tuning stage


def test_every_arm_gets_the_same_grid_and_it_holds_every_published_rate():
    assert {0.01, 0.02, 0.05} <= set(LR_GRID)  # every rate the recipes had before the study
    assert len(LR_GRID) >= 4
    for arm in tune_noise.ARMS:
        assert [t["local.lr"] for t in tune_noise.trials(arm)] == list(LR_GRID)
    probe = tune_noise.trials(tune_noise.PROBE)
    assert len(probe) == len(LR_GRID) * len(tune_noise.MEMORISATION_SETTINGS)
    for trial in probe:  # every setting is one of the protocol's --set keys
        assert set(trial) - {"local.lr"} <= set(PROTOCOL.settings)
    assert tune_noise.setting_overrides({"local_epochs": 10, "local.lr": 0.1}) == [
        "--model.init_args.local.epochs=10",
        "--model.init_args.local.lr=0.1",
    ]


def test_plan_skips_recorded_trials_and_the_workers_share_the_load():
    options = {"rounds": 80, "fraction": 0.1, "seed": 0, "test_curve": False}
    keys, jobs = tune_noise.plan(["fedavg", "fedgr"], options, {})
    assert len(jobs) == 8 and len(set(keys["fedavg"])) == 4
    record = {"trials": {"fedavg": {keys["fedavg"][0]: {"client_val_accuracy": 0.3, "seconds": 500.0}}}}
    _, left = tune_noise.plan(["fedavg", "fedgr"], options, record)
    assert {job["estimate"] for job in left if job["arm"] == "fedavg"} == {500.0}  # the arm's own measured trial
    assert len(left) == 7 and ("fedavg", keys["fedavg"][0]) not in {(job["arm"], job["key"]) for job in left}
    shares = tune_noise.share(jobs, 2)
    loads = [sum(job["estimate"] for job in s) for s in shares]
    assert len(shares) == 2 and max(loads) - min(loads) <= max(job["estimate"] for job in jobs)
    base = {"fedavg": {json.dumps({"local.lr": 0.01, "rounds": 80}): {"seconds": 400.0}}}
    assert tune_noise.trial_seconds("fedavg", {"local_epochs": 10}, 40, False, base) == pytest.approx(400.0)


def test_a_rate_beyond_the_edge_is_planned_once_the_grid_shows_the_best_there():
    assert planned_rates({0.01: 0.39, 0.02: 0.37}) == list(LR_GRID)  # grid unfinished
    edge = {0.01: 0.39, 0.02: 0.37, 0.05: 0.29, 0.1: 0.29}
    assert planned_rates(edge) == [0.005, *LR_GRID]
    assert planned_rates({**edge, 0.005: 0.38}) == [0.005, *LR_GRID]  # now interior: stop
    assert planned_rates({0.01: 0.3, 0.02: 0.3, 0.05: 0.3, 0.1: 0.4}) == [*LR_GRID, 0.2]
    assert planned_rates({0.0025: 0.4, 0.005: 0.3}, grid=()) == [0.0025, 0.005]  # at the limit
    assert planned_rates({0.01: 0.3, 0.02: 0.3, 0.05: 0.3, 0.1: 0.3}) == [0.005, *LR_GRID]

    options = {"rounds": 80, "fraction": 0.1, "seed": 0, "test_curve": False}
    rows = {
        tune_noise.trial_key({"local.lr": lr}, 80, 0.1, 0): {"client_val_accuracy": a, "seconds": 1.0}
        for lr, a in edge.items()
    }
    other = {tune_noise.trial_key({"local.lr": 0.1}, 40, 0.1, 0): {"client_val_accuracy": 0.9}}  # other rounds
    record = {"trials": {"fedavg": {**rows, **other}}}
    assert tune_noise.finished(record, "fedavg", options) == {"{}": edge}
    keys, jobs = tune_noise.plan(["fedavg"], options, record)
    assert [job["trial"] for job in jobs] == [{"local.lr": 0.005}] and len(keys["fedavg"]) == 5


def test_records_merge_every_trial_and_the_choice_is_the_best_validation_accuracy(tmp_path):
    path = tmp_path / "tuning_noise.json"
    options = {"rounds": 80, "fraction": 0.1, "seed": 0, "test_curve": False}
    keys, jobs = tune_noise.plan(["fedavg", tune_noise.PROBE], options, {})
    scores = {0.01: 0.38, 0.02: 0.40, 0.05: 0.40, 0.1: 0.30}
    for job in jobs:
        row = {"client_val_accuracy": scores[job["trial"]["local.lr"]], "val_drop_best_to_final": 0.0}
        if job["arm"] == tune_noise.PROBE:
            row.update(test_curve=[0.5], test_drop_best_to_final=0.03)
        tune_noise.merge_trial(path, job["arm"], job["key"], row)
        summary = tune_noise.summarise(tune_noise.read_record(path), keys)
    assert len(tune_noise.read_record(path)["trials"]["fedavg"]) == 4
    assert summary["fedavg"]["local.lr"] == 0.02  # tie with 0.05: the smaller rate
    assert summary["fedavg"]["trials"] == 4
    probe = {name: s for name, s in summary.items() if name.startswith(tune_noise.PROBE)}
    assert len(probe) == len(tune_noise.MEMORISATION_SETTINGS)
    assert all(s["test_drop_best_to_final"] == 0.03 for s in probe.values())
    assert tune_noise.summarise({}, keys) == {}  # nothing is chosen before every trial of an arm is done


def test_curve_drop():
    assert tune_noise.curve_drop([0.5, 0.8, 0.7], "val") == {"val_best_round": 2, "val_drop_best_to_final": 0.1}
