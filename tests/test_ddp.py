"""Recipes under Lightning DDP on CPU (gloo, 2 processes): identical ranks, loadable exports, one-line refusals.

The default suite trains the tiny test recipe in 2 processes and compares the ranks' weights tensor by tensor
(and with the exported folder); the refusal and the rank check are unit-tested in-process. The slow sweep runs
one recipe per paper for 2 steps with ``--trainer.strategy=ddp --trainer.accelerator=cpu --trainer.devices=2``:
each either trains (ranks identical, export loads with ``zoo.load``) or stops with one line saying why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import zoo
from zoo._distributed import DistributedRefusedError, RankConsistency, refuse_distributed, state_fingerprint

ROOT = Path(__file__).resolve().parents[1]
DDP = ["--trainer.strategy=ddp", "--trainer.accelerator=cpu", "--trainer.devices=2"]


def _zoo(command: str, recipe: str, root: Path, *extra: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``zoo COMMAND -c RECIPE`` under DDP in a fresh process (Lightning relaunches it for rank 1)."""
    ranks = root / "ranks"
    args = [
        command, "-c", recipe, *DDP, f"--trainer.default_root_dir={root}", "--trainer.logger=false",
        "--trainer.enable_progress_bar=false", "--trainer.enable_checkpointing=false",
        "--trainer.callbacks+=zoo._distributed.RankConsistency", f"--trainer.callbacks.dirpath={ranks}", *extra,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.setdefault("OMP_NUM_THREADS", "1")  # two ranks on a shared 2-core machine
    return subprocess.run(
        [sys.executable, "-m", "zoo", *args], cwd=root, env=env, capture_output=True, text=True, timeout=timeout
    )


def _rank_states(root: Path) -> list[dict[str, torch.Tensor]]:
    return [torch.load(root / "ranks" / f"rank{r}.pt", weights_only=True) for r in (0, 1)]


def _assert_identical_ranks_and_loadable_export(root: Path) -> None:
    rank0, rank1 = _rank_states(root)
    assert rank0.keys() == rank1.keys()
    for key, value in rank0.items():
        assert torch.equal(value, rank1[key]), f"rank 1 differs from rank 0 at {key}"
    fingerprints = {json.loads((root / "ranks" / f"rank{r}.json").read_text())["fingerprint"] for r in (0, 1)}
    assert len(fingerprints) == 1
    loaded = zoo.load(str(root / "pretrained")).state_dict()
    for key, value in loaded.items():
        assert torch.equal(value, rank0[key]), f"the export differs from rank 0 at {key}"


# ------------------------------------------------------------------------------------------- default suite


def test_ddp_fit_of_the_tiny_recipe_keeps_both_ranks_identical_and_exports_once(tmp_path):
    result = _zoo("fit", str(ROOT / "tests/tiny/recipe.yaml"), tmp_path, "--trainer.max_epochs=2", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Starting with 2 processes" in result.stdout + result.stderr
    _assert_identical_ranks_and_loadable_export(tmp_path)
    training = json.loads((tmp_path / "pretrained" / "config.json").read_text())["metadata"]["training"]
    # 256 examples split over 2 ranks by the DistributedSampler: 128 a rank, 4 batches of 32, 2 epochs.
    assert training["global_step"] == 8


def _attached(module, world_size: int):
    from lightning.pytorch.strategies import DDPStrategy

    module._trainer = SimpleNamespace(world_size=world_size, strategy=DDPStrategy())
    return module


def test_fedgr_refuses_ddp_in_one_line_naming_the_reason():
    from zoo.fedgr.module import FedGRModule

    module = _attached(FedGRModule(num_clients=2, samples_per_client=4), world_size=2)
    with pytest.raises(DistributedRefusedError) as info:
        module.setup("fit")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("FedGRModule cannot fit in 2 processes (DDPStrategy): each process would run the whole")
    assert "Flower" in message and "--trainer.devices=1" in message
    _attached(module, world_size=1).setup("fit")  # one process: fine
    _attached(module, world_size=2).setup("test")  # evaluation of the global model is stateless: fine


def test_refusal_is_per_stage():
    module = _attached(torch.nn.Module(), world_size=4)
    refuse_distributed(module, "reason", "test")  # only fit is refused by default
    with pytest.raises(DistributedRefusedError, match=r"Module cannot validate in 4 processes .*: a sketch"):
        refuse_distributed(module, "a sketch", "validate", stages=("fit", "validate", "test"))


def test_rank_consistency_fails_when_a_rank_differs(monkeypatch):
    import torch.distributed as dist

    module = torch.nn.Linear(2, 2)
    mine = state_fingerprint(module.state_dict())
    other = state_fingerprint({**module.state_dict(), "bias": module.bias.detach() + 1e-7})
    assert other != mine and state_fingerprint(module.state_dict()) == mine

    def gather(out, value):
        out[:] = [value, other]

    monkeypatch.setattr(dist, "all_gather_object", gather)
    with pytest.raises(zoo.ZooError, match=r"rank\(s\) \[1\] differs from rank 0's \(Linear\)"):
        RankConsistency().on_fit_end(SimpleNamespace(world_size=2, global_rank=0), module)
    monkeypatch.setattr(dist, "all_gather_object", lambda out, value: out.__setitem__(slice(None), [value, value]))
    check = RankConsistency()
    check.on_fit_end(SimpleNamespace(world_size=2, global_rank=0), module)
    assert check.fingerprints == [mine, mine]


# ------------------------------------------------------------------------------------- one recipe per paper

FEW = ["--trainer.max_steps=2", "--trainer.max_epochs=1", "--trainer.limit_val_batches=1"]
FEDGR_SMALL = [
    f"--{part}.init_args.{key}={value}"
    for part in ("model", "data")
    for key, value in (("num_clients", 4), ("samples_per_client", 16))
]
#: paper -> (command, recipe, overrides, "ok" or a word the one-line refusal must contain)
SWEEP = {
    "dwp": ("fit", "dwp/standard", [*FEW, "--data.init_args.train_limit=512", "--data.init_args.val_size=64"], "ok"),
    "gemq": ("fit", "gemq/wiki_fp", [*FEW, "--data.init_args.val_sequences=8"], "ok"),
    "specexit": ("fit", "specexit/arith_target", [*FEW, "--data.init_args.n_train=256"], "sampler"),
    "repa_p": (
        "fit",
        "repa_p/poisson_32",
        [*FEW, "--data.init_args.num_train=64", "--data.init_args.num_val=8"],
        "ok",
    ),  # fmt: skip
    "fedgr": ("fit", "fedgr/fashion_mnist", [*FEW, *FEDGR_SMALL, "--data.init_args.val_size=0"], "federation"),
    "pbsac": (
        "fit",
        "pbsac/pendulum",
        [*FEW, "--data.init_args.total_steps=400", "--data.init_args.steps_per_batch=200"],
        "replay buffer",
    ),  # fmt: skip
    "resettable_sketch": ("validate", "resettable_sketch/robust", ["--trainer.limit_val_batches=2"], "sketch"),
    "fair_lin_bandit": ("validate", "fair_lin_bandit/fair_pe", ["--trainer.limit_val_batches=2"], "instances"),
    "lavid": ("fit", "lavid/fmnist_10shot", [*FEW, "--data.init_args.val_limit=64"], "few-shot"),
    "aporia": (
        "fit",
        "aporia/socrates_mini",
        ["--trainer.limit_train_batches=2", "--trainer.limit_val_batches=1"],
        "pairs",
    ),  # fmt: skip
    "promise": ("fit", "promise/adk", [*FEW, "--data.init_args.n_train=64", "--data.init_args.val_ensembles=2"], "ok"),
}


@pytest.mark.slow
@pytest.mark.parametrize("paper", sorted(SWEEP))
def test_one_recipe_per_paper_trains_or_refuses_under_ddp(paper, tmp_path):
    command, recipe, extra, expected = SWEEP[paper]
    result = _zoo(command, recipe, tmp_path, *extra)
    errors = sorted({line for line in result.stderr.splitlines() if line.startswith("zoo: error:")})
    if expected == "ok":
        assert result.returncode == 0, result.stderr[-3000:]
        _assert_identical_ranks_and_loadable_export(tmp_path)
        return
    # Every rank prints the same single line; it names the reason and the way out (one device).
    refused = result.returncode != 0 and len(errors) == 1 and "devices=1" in errors[0]
    assert refused, (result.returncode, errors, result.stderr[-2000:])
    assert expected in errors[0], errors[0]
