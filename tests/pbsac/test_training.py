"""Short training runs through Lightning: Pendulum plumbing and the MuJoCo recipes' environments."""

from __future__ import annotations

import warnings

import lightning.pytorch as pl
import pytest
import torch

from zoo.pbsac.data import EnvStepSchedule, PBSACDataModule
from zoo.pbsac.module import PBSACModule


def _fit(module: PBSACModule, total_steps: int, steps_per_batch: int) -> pl.Trainer:
    trainer = pl.Trainer(
        max_epochs=1, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(module, PBSACDataModule(total_steps=total_steps, steps_per_batch=steps_per_batch))
    return trainer


def test_schedule_chunks_sum_to_total():
    assert list(EnvStepSchedule(1200, 500)) == [500, 500, 200]
    assert len(EnvStepSchedule(1200, 500)) == 3


def test_pendulum_fit_logs_certificates_and_counts_steps():
    pl.seed_everything(0, verbose=False)
    module = PBSACModule(
        learning_starts=100, batch_size=32, prior_refresh=100, certificate_every=150, certificate_episodes=2,
        certificate_posterior_steps=5, check_episodes=1,
    )  # fmt: skip
    trainer = _fit(module, total_steps=400, steps_per_batch=200)
    assert int(module.env_steps) == 400 and module.buffer.size == 400
    assert trainer.global_step == 300  # one update per step after the 100 warm-up steps
    assert [(c["step"], c["final"]) for c in module.certificates] == [(150, False), (300, False), (400, True)]
    assert float(module.agent.loss_scale) > 1.0  # the training objective's normaliser, from the warm-up
    assert all(c["scale"] == pytest.approx(16.2736044**2, rel=1e-6) for c in module.certificates)  # M: rewards
    assert "certificate/value" in trainer.callback_metrics and "train/return" in trainer.callback_metrics
    meta = module.export_metadata()
    assert meta["certificate"]["step"] == 400 and meta["certificate"]["n"] == 400 and meta["certificate"]["kl"] > 0


def test_certificate_history_survives_an_export_and_a_new_fit_starts_its_own(tmp_path):
    """A fit the harness stores is reloaded with zoo.load_folder: its certificates must come back with it."""
    import zoo

    pl.seed_everything(1, verbose=False)
    module = PBSACModule(learning_starts=50, batch_size=16, certificate_episodes=2, certificate_posterior_steps=2,
                         check_episodes=1)  # fmt: skip
    _fit(module, total_steps=100, steps_per_batch=100)
    zoo.save_pretrained(module, tmp_path)
    loaded = zoo.load_folder(tmp_path)
    assert loaded.certificates == module.certificates and [c["final"] for c in loaded.certificates] == [True]
    _fit(loaded, total_steps=100, steps_per_batch=100)  # fine-tuning certifies its own end, from a fresh history
    assert [(c["step"], c["final"]) for c in loaded.certificates] == [(200, True)]


def test_final_certificate_phase_keeps_the_certified_posterior_and_nothing_else():
    pl.seed_everything(1, verbose=False)
    module = PBSACModule(learning_starts=50, batch_size=16, certificate_episodes=2, certificate_posterior_steps=5,
                         check_episodes=0)  # fmt: skip
    _fit(module, total_steps=100, steps_per_batch=100)
    after = module.agent.critic.head_posterior()
    state = {k: v.clone() for k, v in module.state_dict().items()}
    pl.seed_everything(1, verbose=False)
    plain = PBSACModule(learning_starts=50, batch_size=16, certificate_episodes=0, bayesian=True)
    _fit(plain, total_steps=100, steps_per_batch=100)
    before = plain.agent.critic.head_posterior()
    assert not torch.allclose(after[0], before[0]) and not torch.allclose(after[1], before[1])
    for key, value in plain.state_dict().items():  # actor, hidden layers, targets: as trained
        if "head" not in key or "target" in key:
            assert torch.allclose(value, state[key], atol=1e-5), key


def test_fit_is_reproducible_and_certificates_do_not_change_training():
    runs = []
    for certificate_every in (0, 100):
        pl.seed_everything(3, verbose=False)
        module = PBSACModule(learning_starts=50, batch_size=16, certificate_every=certificate_every,
                             certificate_episodes=1, certificate_posterior_steps=2, check_episodes=0)  # fmt: skip
        _fit(module, total_steps=150, steps_per_batch=150)
        runs.append(module.agent.actor.mean_log_std.weight.detach().clone())
    # Same random numbers with or without certificates (forked RNG); BLAS may differ in the last bits
    # when memory is laid out differently, hence a tolerance instead of bit equality.
    assert torch.allclose(runs[0], runs[1], atol=1e-5)


@pytest.mark.parametrize("env_id", ["InvertedPendulum-v5", "HalfCheetah-v5"])
def test_mujoco_recipes_environments_train(env_id):
    pytest.importorskip("mujoco")
    pl.seed_everything(0, verbose=False)
    module = PBSACModule(env_id=env_id, learning_starts=32, batch_size=16, certificate_episodes=0)
    _fit(module, total_steps=64, steps_per_batch=64)
    assert int(module.env_steps) == 64 and module.certificates == []
    assert module(torch.zeros(1, module.obs_dim)).shape == (1, module.act_dim)


@pytest.mark.parametrize("name", ["pbsac.pendulum", "pbsac.sac_pendulum"])
def test_recipes_match_registry_defaults(name):
    """Module defaults + registry model_args = the recipe: zoo.load builds the architecture the recipe trains."""
    import inspect
    from pathlib import Path

    import yaml

    import zoo
    from zoo._recipes import resolve_recipe

    entry = zoo.get_entry(name)
    recipe = yaml.safe_load(Path(resolve_recipe(entry.pretrained_cfg.recipe)).read_text())
    model_args, data_args = recipe["model"]["init_args"], recipe["data"]["init_args"]
    defaults = {k: p.default for k, p in inspect.signature(PBSACModule.__init__).parameters.items() if k != "self"}
    assert {**defaults, **entry.model_args} == {**defaults, **model_args}
    data_defaults = {k: p.default for k, p in inspect.signature(PBSACDataModule.__init__).parameters.items()}
    assert all(data_defaults[k] == v for k, v in data_args.items())
