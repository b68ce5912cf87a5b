"""REPA-P's heads: hooked on without touching the backbone, trained by the residual, gone at inference."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
from safetensors.torch import load_file
from torch.utils.flop_counter import FlopCounterMode

from zoo.repa_p.data import PDEDataModule
from zoo.repa_p.module import HEADS_FILE, REPAPModule
from zoo.repa_p.tasks import get_task

TINY = {"size": 16, "dim": 8, "attn_heads": 2, "head_hidden": 16, "ema_start": 1}


def _fit(module, steps=3, task="poisson"):
    data = PDEDataModule(task=task, size=16, num_train=16, num_val=4, num_test=4, batch_size=4)
    trainer = pl.Trainer(
        max_steps=steps,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        val_check_interval=steps,
        check_val_every_n_epoch=None,
    )
    trainer.fit(module, datamodule=data)
    return module


def _flops(module):
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        module(*module.example_input_array)
    return counter.get_total_flops()


def test_tap_points_resolve_to_the_paper_layers():
    module = REPAPModule(taps=("encoder", "bottleneck", "decoder", "output"), **TINY)
    module.attach_heads()
    module(*module.example_input_array)
    features = {tap: module._taps.features[name] for tap, name in module.tap_modules.items()}
    assert features["encoder"].shape[-1] == 4 and features["bottleneck"].shape[-1] == 4  # 16 / 2 / 2
    assert features["decoder"].shape[-1] == 16 and features["output"].shape[-1] == 16
    assert features["bottleneck"].shape[1] == 32  # dim 8 x mult 4
    for field in module.head_fields().values():
        assert field.shape == (2, 1, 16, 16)


def test_heads_leave_the_backbone_output_unchanged():
    torch.manual_seed(0)
    module = REPAPModule(taps=("bottleneck", "decoder"), **TINY).eval()
    inputs = module.example_input_array
    with torch.no_grad():
        before = module(*inputs)
        module.attach_heads()
        with_heads = module(*inputs)
        module.detach_heads()
        after = module(*inputs)
    assert torch.equal(before, with_heads) and torch.equal(before, after)
    assert module.heads is None and set(module._exported_heads) == {
        f"{k}.net.{i}.{p}" for k in ("bottleneck", "decoder") for i in (0, 1, 3) for p in ("weight", "bias")
    }


def test_exported_model_has_no_head_parameters_and_the_cost_of_pidm(tmp_path):
    from zoo._serialization import load_folder, save_pretrained

    torch.manual_seed(0)
    repa = _fit(REPAPModule(taps=("bottleneck",), **TINY))
    pidm = REPAPModule(taps=(), c_proj=0.0, **TINY)
    assert repa.heads is None and not [n for n, _ in repa.named_parameters() if "head" in n]
    assert sum(p.numel() for p in repa.parameters()) == sum(p.numel() for p in pidm.parameters())
    assert _flops(repa) == _flops(pidm) > 0
    save_pretrained(repa, tmp_path)
    weights = load_file(str(tmp_path / "model.safetensors"))
    assert not [k for k in weights if "head" in k]
    heads = load_file(str(tmp_path / HEADS_FILE))
    assert heads and all(k.startswith("bottleneck.") for k in heads)
    assert len(repa.val_history) == 1 and repa.val_history[0]["step"] == 3
    # The exported folder loads strictly, and fitting it again resumes with the trained heads.
    loaded = load_folder(tmp_path)
    repa.eval()  # nn.MultiheadAttention takes a different (fused) path in eval mode
    assert loaded.heads is None
    with torch.no_grad():
        assert torch.equal(loaded(*loaded.example_input_array), repa(*repa.example_input_array))
    loaded.attach_heads()
    for key, value in loaded.heads.state_dict().items():
        assert torch.equal(value, heads[key])


def test_c_proj_zero_is_bit_identical_to_pidm_and_c_proj_changes_training():
    task = get_task("poisson", 16)
    x0, condition = task.generate("train", 8, seed=0)
    gen = torch.Generator().manual_seed(0)
    batches = [(torch.randint(0, 100, (8,), generator=gen), torch.randn(x0.shape, generator=gen)) for _ in range(3)]

    def run(**kwargs):
        torch.manual_seed(0)
        module = REPAPModule(**{**TINY, **kwargs})
        module.attach_heads()
        optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
        for t, noise in batches:
            loss = module.losses(x0, condition, t, noise)["loss"]
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return module.model.state_dict()

    pidm = run(taps=(), c_proj=0.0)
    zero = run(taps=("bottleneck",), c_proj=0.0)
    repa = run(taps=("bottleneck",), c_proj=0.01)
    assert all(torch.equal(pidm[k], zero[k]) for k in pidm)
    assert not all(torch.equal(pidm[k], repa[k]) for k in pidm)


def test_head_loss_reaches_the_tapped_layers_only_through_the_residual():
    torch.manual_seed(0)
    module = REPAPModule(taps=("bottleneck",), c_data=0.0, c_res=0.0, c_proj=1.0, **TINY)
    module.attach_heads()
    x0, condition = get_task("poisson", 16).generate("train", 4, seed=0)
    terms = module.losses(x0, condition, torch.tensor([0, 10, 50, 99]), torch.randn_like(x0))
    terms["loss"].backward()
    assert module.heads["bottleneck"].net[0].weight.grad.abs().sum() > 0
    assert module.model.mid.block2.conv2.weight.grad.abs().sum() > 0  # the tapped layer learns from the head
    assert module.model.final_conv.weight.grad.count_nonzero() == 0  # layers after the tap get nothing from the head


def test_darcy_task_trains_and_samples():
    torch.manual_seed(0)
    module = _fit(REPAPModule(task="darcy", taps=("decoder",), **TINY), steps=2, task="darcy")
    _, condition = module.task.generate("ood_source", 2, seed=0)
    sample = module.sample(condition, steps=3, generator=torch.Generator().manual_seed(0))
    assert sample.shape == (2, 1, 16, 16) and torch.isfinite(sample).all()
    assert module.val_history and "residual" not in module.val_history[0]  # val_sample_steps=0: one-step only


def test_cosine_schedule_decays_the_learning_rate_to_zero_by_max_steps():
    """The recipes' ``lr_schedule: cosine``: half the peak at mid-training, zero at the last step."""
    module = _fit(REPAPModule(lr=1e-3, lr_schedule="cosine", **TINY), steps=4)
    optimizer = module.trainer.optimizers[0]
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-12)
    scheduler = module.trainer.lr_scheduler_configs[0]
    assert scheduler.interval == "step"
    assert [factor(step) for step in range(5) for factor in scheduler.scheduler.lr_lambdas] == pytest.approx(
        [1.0, 0.5 + 0.5**1.5, 0.5, 0.5 - 0.5**1.5, 0.0]
    )  # (1 + cos(pi step / 4)) / 2 over max_steps = 4: half the peak at mid-training
    constant = _fit(REPAPModule(lr=1e-3, **TINY), steps=2)
    assert constant.trainer.optimizers[0].param_groups[0]["lr"] == 1e-3
    assert not constant.trainer.lr_scheduler_configs


def test_late_physics_factor_scales_both_physics_weights_from_its_step_on():
    """``late_physics_factor`` multiplies c_res and c_proj from ``late_physics_from * max_steps`` on, and only then."""

    class Recording(REPAPModule):
        def training_step(self, batch, batch_idx):
            self.scales.append((self.global_step, self.physics_scale()))
            return super().training_step(batch, batch_idx)

    module = Recording(late_physics_factor=100.0, late_physics_from=0.5, **TINY)
    module.scales = []
    _fit(module, steps=4)
    assert module.scales == [(0, 1.0), (1, 1.0), (2, 100.0), (3, 100.0)]
    assert module.physics_scale() == 1.0  # outside fitting the weights are the recipe's
    x0, condition = module.task.generate("train", 4, seed=0)
    t, noise = torch.tensor([0, 10, 50, 99]), torch.randn(x0.shape, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        terms = module.losses(x0, condition, t, noise)
    hp = module.hparams
    expected = hp.c_data * terms["data"] + hp.c_res * terms["res"]  # the heads left with on_train_end
    assert terms["loss"].item() == pytest.approx(expected.item(), rel=1e-6)


def test_late_physics_ramp_rises_smoothly_from_step_zero_and_step_is_the_default():
    """``late_physics_ramp="linear"``: 1 + (5 - 1) s / 4 over a 4-step fit; the default keeps the published step."""

    class Recording(REPAPModule):
        def training_step(self, batch, batch_idx):
            self.scales.append((self.global_step, self.physics_scale()))
            return super().training_step(batch, batch_idx)

    ramp = {"late_physics_factor": 5.0, "late_physics_from": 1.0, "late_physics_ramp": "linear"}
    module = Recording(val_sample_steps=2, **ramp, **TINY)
    module.scales = []
    _fit(module, steps=4)
    assert module.scales == [(0, 1.0), (1, 2.0), (2, 3.0), (3, 4.0)]
    # The validation curve carries the spectral residual too (steps-to-target on it, issue 75).
    assert module.val_history[0]["step"] == 4 and module.val_history[0]["residual_spectral"] > 0
    assert REPAPModule(**TINY).hparams.late_physics_ramp == "step"
    with pytest.raises(ValueError, match="late_physics_ramp must be one of"):
        REPAPModule(late_physics_ramp="smooth", **TINY)


def test_bad_arguments_give_clear_errors():
    with pytest.raises(ValueError, match="unknown tap 'neck'"):
        REPAPModule(taps=("neck",), **TINY)
    with pytest.raises(ValueError, match="size 18 must be a multiple of 4"):
        REPAPModule(**{**TINY, "size": 18})
    with pytest.raises(ValueError, match="loss weights must be >= 0"):
        REPAPModule(c_proj=-1.0, **TINY)
    with pytest.raises(ValueError, match="lr_schedule must be 'constant' or 'cosine', got 'linear'"):
        REPAPModule(lr_schedule="linear", **TINY)
    with pytest.raises(ValueError, match="late_physics_from in \\[0, 1\\], got 100.0 and 1.5"):
        REPAPModule(late_physics_factor=100.0, late_physics_from=1.5, **TINY)
    module = REPAPModule(**TINY)
    with pytest.raises(ValueError, match="differ in grid size"):
        module(torch.zeros(1, 1, 16, 16), torch.zeros(1, 1, 8, 8), torch.zeros(1, dtype=torch.long))
    with pytest.raises(ValueError, match="unknown test splits"):
        PDEDataModule(test_splits=("id", "ood_moon"))
