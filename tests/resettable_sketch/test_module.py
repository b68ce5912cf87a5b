"""The LightningModule and DataModule: buffers as state, mid-stream restore, Lightning loops, the registry."""

from __future__ import annotations

import json
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import pytest
import torch

import zoo
from zoo._errors import NoPretrainedWeightsError
from zoo.resettable_sketch.data import ResettableStreamDataModule
from zoo.resettable_sketch.module import ResettableSketchModule
from zoo.resettable_sketch.streams import churn_stream

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "args",
    [
        {"sketch": "robust", "stat": "card", "k": 300, "capacity": 1024},
        {"sketch": "robust", "stat": "sum", "capacity": 8192},
        {"sketch": "robust", "stat": "lp", "q": 0.5, "capacity": 8192},
        {"sketch": "hash_threshold", "stat": "card", "capacity": 8192},
    ],
)
def test_restore_mid_stream_gives_identical_estimates(args, tmp_path):
    """Save a live sketch half-way (config.json + model.safetensors), reload, continue: bit-identical outputs."""
    ops, keys, deltas = churn_stream(24_000, seed=3)
    live = ResettableSketchModule(**args, horizon=4096, seed=7)
    live.update(ops[:12_000], keys[:12_000], deltas[:12_000])
    zoo.save_pretrained(live, tmp_path)
    restored = zoo.load_folder(tmp_path)
    for start in range(12_000, 24_000, 1000):  # trees roll over and (for k=300) rates halve on the way
        chunk = ops[start : start + 1000], keys[start : start + 1000], deltas[start : start + 1000]
        assert live.update(*chunk) == restored.update(*chunk)
    for key, value in live.state_dict().items():
        assert torch.equal(value, restored.state_dict()[key]), key
    if args.get("k"):
        assert float(live.rate) < 0.2


def test_lightning_checkpoint_round_trip(tmp_path):
    module = ResettableSketchModule(capacity=4096, horizon=1024)
    module.update(*churn_stream(5000, seed=1))
    torch.save(module.state_dict(), tmp_path / "sketch.pt")
    other = ResettableSketchModule(capacity=4096, horizon=1024)
    other.load_state_dict(torch.load(tmp_path / "sketch.pt", weights_only=True))
    chunk = churn_stream(3000, seed=2)
    assert module.update(*chunk) == other.update(*chunk)


def test_forward_does_not_change_the_sketch():
    module = ResettableSketchModule(capacity=1024)
    before = {k: v.clone() for k, v in module.state_dict().items()}
    first = module(*module.example_input_array)
    assert torch.equal(first, module(*module.example_input_array))
    for key, value in module.state_dict().items():
        assert torch.equal(value, before[key]), key
    assert first.dtype == torch.float64 and first.shape == (1,)


def _validate(module, datamodule):
    trainer = pl.Trainer(
        accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False,
    )  # fmt: skip
    return trainer.validate(module, datamodule=datamodule, verbose=False)[0]


def test_validation_plays_the_attack_and_logs_errors():
    hashed = _validate(ResettableSketchModule("hash_threshold", rate=0.5, capacity=4096),
                       ResettableStreamDataModule("adversarial", length=1500, chunk_size=500))  # fmt: skip
    assert hashed["val/final_rel_err"] >= 0.9 and hashed["val/final_estimate"] < 50
    churn = _validate(ResettableSketchModule("exact", capacity=8192), ResettableStreamDataModule(length=5000))
    assert churn["val/rel_err"] == 0.0 and churn["val/max_stored_keys"] > 1000


def test_datamodule_state_and_bad_inputs():
    data = ResettableStreamDataModule("adversarial", length=10)
    data.adversary.active, data.adversary.peak = 4, 6
    again = ResettableStreamDataModule("adversarial", length=10)
    again.load_state_dict(data.state_dict())
    assert again.adversary.peak == 6
    with pytest.raises(ValueError, match="kind must be"):
        ResettableStreamDataModule("zipf")
    with pytest.raises(ValueError, match="needs a number of probes"):
        ResettableStreamDataModule("adversarial", length=None)
    with pytest.raises(ValueError, match="sketch must be"):
        ResettableSketchModule(sketch="hll")
    module = ResettableSketchModule(stat="lp", q=0.25, capacity=64)
    batch = next(iter(ResettableStreamDataModule(length=100, lp_q=0.5).val_dataloader()))
    with pytest.raises(ValueError, match="lp_q"):
        module._consume(batch, "val")


def test_no_pretrained_weights_and_the_notes_say_why():
    with pytest.raises(NoPretrainedWeightsError, match="no learned weights"):
        zoo.load("resettable_sketch", pretrained=True)
    assert not zoo.get_entry("resettable_sketch").pretrained_cfg.has_weights


def test_score_reproduces_the_card_seed_zero_value():
    """Sketches have no checkpoint: the registry configuration, built fresh, reproduces the card's seed-0 run."""
    from zoo.resettable_sketch.evaluate import score_pretrained

    metrics = json.loads((ROOT / "hub_cards" / "resettable_sketch.robust" / "metrics.json").read_text())
    expected = metrics["per_seed"]["robust"]["0"]["rel_err_oblivious"]
    score = score_pretrained(zoo.load("resettable_sketch"))["rel_err_oblivious"]
    assert score == pytest.approx(expected, abs=1e-6)  # per-seed values are stored to 6 decimals
    assert score == pytest.approx(metrics["arms"]["robust"]["rel_err_oblivious"], abs=0.03)
    assert np.isfinite(score)
