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


def test_forward_does_not_change_the_sketch_and_uses_coins_of_its_own():
    module = ResettableSketchModule(capacity=1024, rate=0.5)
    before = {k: v.clone() for k, v in module.state_dict().items()}
    first = module(*module.example_input_array)
    assert first.dtype == torch.float64 and first.shape == (1,)
    assert torch.equal(first, module(*module.example_input_array))  # a pure function of state and chunk
    for key, value in module.state_dict().items():
        assert torch.equal(value, before[key]), key
    live = module.sketch()
    twin = module.sketch(copy=True, salt=1)
    assert not np.array_equal(twin.rng.random(32), live.rng.random(32))


def _first_coins(sketch, n=64):
    return sketch.rng.random(n)


def test_two_handles_of_one_module_never_draw_the_same_coins():
    """The reported bug: a second handle reloaded the generator state that the first one never wrote back."""
    module = ResettableSketchModule(capacity=4096, seed=3)
    fresh = ResettableSketchModule(capacity=4096, seed=3).sketch()
    handle = module.sketch()
    for key in range(1000):
        handle.inc(key)
    second = module.sketch()
    assert second is handle
    assert not np.array_equal(_first_coins(second), _first_coins(fresh))
    copy = module.sketch(copy=True)  # a copy (what forward uses) has coins of its own
    assert not np.array_equal(_first_coins(copy), _first_coins(module.sketch()))


def test_a_reloaded_sketch_continues_its_random_stream(tmp_path):
    module = ResettableSketchModule(capacity=4096, seed=5)
    ops, keys, deltas = churn_stream(3000, seed=1)
    module.update(ops, keys, deltas)
    for key in range(10**6, 10**6 + 200):  # the one-key path: nothing writes the generator back but state_dict
        module.sketch().inc(key)
    zoo.save_pretrained(module, tmp_path)
    restored = zoo.load_folder(tmp_path)
    expected = module.sketch().rng.random(32)  # what the live sketch draws next ...
    assert np.array_equal(restored.sketch().rng.random(32), expected)  # ... is what the reloaded one draws
    start = ResettableSketchModule(capacity=4096, seed=5).sketch().rng.random(32)
    assert not np.array_equal(expected, start)  # not a restart from the seed


def test_a_seeded_stream_gives_identical_estimates_across_save_and_load(tmp_path):
    ops, keys, deltas = churn_stream(20_000, seed=2)
    straight = ResettableSketchModule(capacity=2048, k=600, horizon=4096, seed=9)
    through = ResettableSketchModule(capacity=2048, k=600, horizon=4096, seed=9)
    assert straight.update(ops[:8000], keys[:8000], deltas[:8000]) == through.update(
        ops[:8000], keys[:8000], deltas[:8000]
    )
    for key in range(10**7, 10**7 + 300):  # one-key updates too, then save and reload
        straight.sketch().inc(key)
        through.sketch().inc(key)
    torch.save(through.state_dict(), tmp_path / "s.pt")
    through = ResettableSketchModule(capacity=2048, k=600, horizon=4096, seed=123)  # another seed: the state wins
    through.load_state_dict(torch.load(tmp_path / "s.pt", weights_only=True))
    for start in range(8000, 20_000, 1500):
        chunk = ops[start : start + 1500], keys[start : start + 1500], deltas[start : start + 1500]
        assert straight.update(*chunk) == through.update(*chunk)
    assert float(straight.rate) < 1.0 / 8  # the rate halved on the way (fresh coins at each halving)


def test_ddp_is_refused_with_one_line():
    from types import SimpleNamespace

    from zoo._distributed import DistributedRefusedError

    module = ResettableSketchModule(capacity=64)
    module._trainer = SimpleNamespace(world_size=2, strategy=SimpleNamespace())
    with pytest.raises(DistributedRefusedError, match="cannot validate in 2 processes .*silently diverge"):
        module.setup("validate")
    module._trainer = SimpleNamespace(world_size=1)
    module.setup("validate")


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
    data = ResettableStreamDataModule("adversarial", length=1500, chunk_size=500, attack="inflate")
    inflated = _validate(ResettableSketchModule("hash_threshold", rate=0.5, capacity=4096), data)
    assert inflated["val/final_rel_err"] == pytest.approx(1.0)  # only sampled keys stay: estimate = 2 x truth
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
    expected = metrics["per_seed"]["robust"]["0"]["rel_err_final_churn"]
    score = score_pretrained(zoo.load("resettable_sketch"))["rel_err_final_churn"]
    assert score == pytest.approx(expected, abs=1e-6)  # per-seed values are stored to 6 decimals
    assert score == pytest.approx(metrics["arms"]["robust"]["rel_err_final_churn"], abs=0.03)
    assert np.isfinite(score)
