"""Tests every registered entry of the zoo (timm's tests/test_models.py is the model).

A new paper joins these tests by registering its entries: build, forward and backward, a
``fast_dev_run`` of its recipe with its datamodule, a bit-identical save/reload, the pretrained load
from the offline mirror with sha256 verification, and agreement of its card with the registry.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import zoo
from zoo._registry import get_entry
from zoo._serialization import load_folder, read_config, save_pretrained

ROOT = Path(__file__).resolve().parents[1]
NAMES = zoo.list_models()
PRETRAINED = zoo.list_models(pretrained=True)
MAX_FILE_BYTES = 10 * 1024 * 1024


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _tensors(item)
    elif hasattr(value, "__dataclass_fields__") or hasattr(value, "to_tuple"):  # ModelOutput-like
        yield from _tensors(vars(value))


def _forward(module):
    example = module.example_input_array
    torch.manual_seed(0)
    if isinstance(example, dict):
        return module(**example)
    if isinstance(example, tuple | list):
        return module(*example)
    return module(example)


@pytest.mark.parametrize("name", NAMES)
def test_build_forward_backward(name):
    module = zoo.load(name)
    assert module.example_input_array is not None, f"{name}: set self.example_input_array in __init__"
    outputs = list(_tensors(_forward(module)))
    assert outputs, f"{name}: forward returned no tensor"
    for out in outputs:
        if out.is_floating_point():
            assert torch.isfinite(out).all(), f"{name}: forward produced non-finite values"
    trainable = [p for p in module.parameters() if p.requires_grad]
    differentiable = [o for o in outputs if o.is_floating_point() and o.requires_grad]
    if trainable and differentiable:
        sum(o.float().sum() for o in differentiable).backward()
        assert any(p.grad is not None for p in trainable), f"{name}: no gradient reached the parameters"


@pytest.mark.parametrize("name", NAMES)
def test_recipe_fast_dev_run(name, tmp_path):
    from lightning.pytorch.utilities.model_helpers import is_overridden

    from zoo._lightning_cli import ZooCLI

    entry = get_entry(name)
    recipe = entry.pretrained_cfg.recipe
    assert recipe and (ROOT / recipe).is_file(), f"{name}: registry recipe {recipe!r} does not exist"
    cli = ZooCLI(
        args=[
            "-c", str(ROOT / recipe), *entry.smoke,
            "--trainer.fast_dev_run=true", "--trainer.logger=false", "--trainer.enable_checkpointing=false",
            "--trainer.enable_progress_bar=false", "--trainer.accelerator=cpu", "--trainer.devices=1",
            f"--trainer.default_root_dir={tmp_path}",
        ],
        run=False,
    )  # fmt: skip
    if is_overridden("training_step", cli.model):
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    else:
        cli.trainer.validate(cli.model, datamodule=cli.datamodule)


@pytest.mark.parametrize("name", NAMES)
def test_save_reload_bit_identical(name, tmp_path):
    module = zoo.load(name).eval()
    save_pretrained(module, tmp_path)
    reloaded = load_folder(tmp_path)
    assert type(reloaded) is type(module)
    before, after = module.state_dict(), reloaded.state_dict()
    assert before.keys() == after.keys()
    for key in before:
        assert torch.equal(before[key], after[key]), f"{name}: {key} changed in the round trip"
    with torch.no_grad():
        for a, b in zip(_tensors(_forward(module)), _tensors(_forward(reloaded)), strict=True):
            assert torch.equal(a, b), f"{name}: forward differs after reload"
    save_pretrained(reloaded, tmp_path / "again")
    assert (tmp_path / "model.safetensors").read_bytes() == (tmp_path / "again" / "model.safetensors").read_bytes()
    assert read_config(tmp_path)["init_args"] == read_config(tmp_path / "again")["init_args"]


@pytest.mark.parametrize("name", PRETRAINED)
def test_pretrained_offline_from_mirror(name, hf_cache, hf_offline):
    entry = get_entry(name)
    cfg = entry.pretrained_cfg
    for path in entry.mirror_dir.iterdir():
        assert path.stat().st_size < MAX_FILE_BYTES, f"{path} is over 10 MB"
    module = zoo.load(name, pretrained=True)  # verifies every pinned file's sha256
    assert not module.training
    fresh = zoo.load(name)
    shapes = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    assert shapes == {k: tuple(v.shape) for k, v in fresh.state_dict().items()}, (
        f"{name}: model_args build a different architecture than the published config.json"
    )
    assert cfg.num_params == sum(p.numel() for p in module.parameters()), f"{name}: registry num_params is stale"


@pytest.mark.parametrize("name", NAMES)
def test_card_agrees_with_registry_and_metrics(name):
    from huggingface_hub import ModelCard

    from zoo.eval.result import validate_result

    entry = get_entry(name)
    cfg = entry.pretrained_cfg
    folder = entry.mirror_dir
    assert (folder / "README.md").is_file(), f"{name}: no card; run `zoo eval {entry.paper} --card`"
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["name"] in zoo.list_models(entry.paper)
    validate_result(metrics)  # claims, a reference arm, the tuning record and >= 3 seeds for the headline arms
    arm = metrics["arms"][entry.eval_arm]
    assert entry.metrics == arm, f"{name}: the registry does not read its card's metrics.json"
    card = ModelCard.load(folder / "README.md")
    assert card.data.license == cfg.license
    from zoo._cards import HUB_DATASETS, LIBRARY_NAME

    assert card.data.library_name == LIBRARY_NAME
    assert not cfg.paper.arxiv or f"arxiv:{cfg.paper.arxiv}" in card.data.tags
    reported = {r.metric_type: r.metric_value for r in card.data.eval_results or []}
    means = {k: v for k, v in arm.items() if not k.endswith("_std") and k != "n_seeds"}
    if any(dataset in HUB_DATASETS for dataset in cfg.datasets):  # model-index results need a Hub data set id
        assert reported == pytest.approx(means), f"{name}: card model-index differs from metrics.json"
    else:
        assert not reported, f"{name}: model-index results without a Hub data set id"
    assert (folder / "results.png").is_file()
    if cfg.has_weights:
        assert read_config(folder)["class_path"].endswith(entry.module.rpartition(":")[2])


RECIPES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "recipes").rglob("*.yaml"))


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe_parses(recipe, capsys):
    """Every recipe passes LightningCLI's validation (`zoo fit -c RECIPE --print_config`)."""
    from zoo._lightning_cli import ZooCLI

    with pytest.raises(SystemExit) as exit_info:
        ZooCLI(args=["fit", "-c", str(ROOT / recipe), "--print_config"])
    assert exit_info.value.code in (0, None)
    assert "class_path" in capsys.readouterr().out
