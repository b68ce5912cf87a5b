"""The module with its datamodule (fast_dev_run on tiny bot demos), every arm's loss, parameter budgets."""

import numpy as np
import pytest

from zoo.deepha.module import DeepHAModule


@pytest.mark.parametrize("arm", ["coa", "decoupled"])
def test_fast_dev_run(arm, tmp_path):
    import lightning.pytorch as pl

    from zoo.deepha.data import BabyAIDemoDataModule

    data = BabyAIDemoDataModule(
        levels=("GoToLocal", "PutNextLocal"), episodes_per_level=2, val_episodes_per_level=1, batch_size=2,
        cache_dir=str(tmp_path),
    )  # fmt: skip
    trainer = pl.Trainer(fast_dev_run=True, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, accelerator="cpu", default_root_dir=tmp_path)  # fmt: skip
    trainer.fit(DeepHAModule(arm=arm, num_threads=0), datamodule=data)
    assert np.isfinite(trainer.callback_metrics["train_loss"].item())
    assert sorted(p.name for p in tmp_path.glob("*.npz")) and len(list(tmp_path.glob("demos-*.npz"))) == 2


def test_arms_share_the_parameter_budget(tiny_demos):
    counts = {arm: sum(p.numel() for p in DeepHAModule(arm=arm).parameters()) for arm in
              ("coa", "flat", "decoupled", "coa_skill_only", "coa_grounding_only")}  # fmt: skip
    assert max(counts.values()) / min(counts.values()) < 1.01, counts


@pytest.mark.parametrize("arm", ["coa", "flat", "decoupled", "coa_skill_only", "coa_grounding_only"])
def test_every_arm_has_a_finite_loss(arm, tiny_demos):
    module = DeepHAModule(arm=arm)
    episodes = [tiny_demos.episode(e) for e in range(len(tiny_demos))]
    loss, parts = module.loss(module.collate(episodes, np.random.default_rng(0)))
    loss.backward()
    expected = {"flat": 1, "decoupled": 6, "coa": 6, "coa_skill_only": 4, "coa_grounding_only": 3}[arm]
    assert len(parts) == expected and np.isfinite(loss.item())


def test_demo_cache_is_written_through_a_per_process_file(tmp_path, monkeypatch, tiny_demos):
    """Two worker processes that build the same missing cache must not share one temporary file (a race that
    made the second worker's rename fail)."""
    import os

    from zoo.deepha import data as D

    written = []
    monkeypatch.setattr(D, "generate", lambda *args, **kwargs: tiny_demos)
    monkeypatch.setattr(D.Demos, "save", lambda self, path: (written.append(str(path)), open(path, "wb").close()))
    D.BabyAIDemoDataModule(levels=("PutNextLocal",), episodes_per_level=2, cache_dir=str(tmp_path))._ensure("train", 2)
    assert len(written) == 1 and f".{os.getpid()}.tmp" in written[0]
    assert not list(tmp_path.glob("*.tmp.npz")) and len(list(tmp_path.glob("demos-*.npz"))) == 1
