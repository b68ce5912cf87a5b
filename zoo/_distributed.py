"""Multi-process training (Lightning DDP and friends): refusing it where it would be wrong, checking it where it runs.

Most recipes train with ordinary optimisers, so Lightning's DDP keeps the ranks identical (same initial
weights, all-reduced gradients). A module whose state is not a function of all-reduced gradients (a
replay buffer and its environment, a federation, a sketch of a stream, a bandit's history, closed-form
fits written into buffers) would silently diverge across ranks or see only its rank's share of the data;
such a module calls :func:`refuse_distributed` from ``setup`` and the run stops with one line that says why.

:class:`RankConsistency` is the check for the others: at the end of ``fit`` every rank fingerprints its
state dict, the fingerprints are gathered, and the run fails if any rank differs from rank 0.

``import zoo`` does not import this module; the modules that use it import Lightning anyway.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import lightning.pytorch as pl

from zoo._errors import ZooError


class DistributedRefusedError(ZooError):
    """A module that cannot train (or run) correctly in more than one process was asked to."""


def world_size(module) -> int:
    """Number of processes of the module's trainer (1 without a trainer)."""
    trainer = getattr(module, "_trainer", None)
    return int(getattr(trainer, "world_size", 1) or 1) if trainer is not None else 1


def refuse_distributed(module, reason: str, stage: str | None = None, stages: tuple[str, ...] = ("fit",)) -> None:
    """Raise a one-line error if ``module`` runs in more than one process during one of ``stages``.

    Call it first thing in ``LightningModule.setup(stage)``; every rank raises, so none waits on the others.

    Args:
        module: The LightningModule.
        reason: Why it cannot run distributed, as a clause (``"each process would run the whole federation"``).
        stage: The ``stage`` that ``setup`` received (None: refuse whatever the stage).
        stages: The stages to refuse (``("fit",)``; add ``"validate"``/``"test"`` for modules whose state
            changes as they evaluate).

    Raises:
        DistributedRefusedError: With the class name, the world size, the reason and the fix.
    """
    size = world_size(module)
    stage = None if stage is None else str(getattr(stage, "value", stage))  # Lightning passes a str enum
    if size <= 1 or (stage is not None and stage not in stages):
        return
    raise DistributedRefusedError(
        f"{type(module).__name__} cannot {stage or 'run'} in {size} processes "
        f"({type(module._trainer.strategy).__name__}): {reason}; run it with --trainer.devices=1 --trainer.num_nodes=1"
    )


def state_fingerprint(state: dict) -> str:
    """sha256 over the names, dtypes, shapes and bytes of a state dict's tensors (in key order)."""
    import torch

    digest = hashlib.sha256()
    for key in sorted(state):
        value = state[key]
        if not isinstance(value, torch.Tensor):
            continue
        tensor = value.detach().cpu().contiguous()
        digest.update(f"{key}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


class RankConsistency(pl.Callback):
    """At the end of ``fit``, fail if any rank's weights and buffers differ from rank 0's.

    Under one process it does nothing but record the fingerprint. Add it to a recipe's callbacks, or on the
    command line: ``--trainer.callbacks+=zoo._distributed.RankConsistency``.

    Args:
        dirpath: If given, every rank writes ``rank<R>.json`` (its fingerprint) and ``rank<R>.pt`` (its
            state dict on CPU) there, so a test can compare the ranks' weights tensor by tensor.
    """

    def __init__(self, dirpath: str | None = None) -> None:
        self.dirpath = dirpath
        #: Every rank's fingerprint after the last check (rank order).
        self.fingerprints: list[str] = []

    def on_fit_end(self, trainer, pl_module) -> None:
        import torch

        state = pl_module.state_dict()
        mine = state_fingerprint(state)
        if self.dirpath:
            folder = Path(self.dirpath)
            folder.mkdir(parents=True, exist_ok=True)
            torch.save({k: v.detach().cpu() for k, v in state.items()}, folder / f"rank{trainer.global_rank}.pt")
            (folder / f"rank{trainer.global_rank}.json").write_text(json.dumps({"fingerprint": mine}))
        if trainer.world_size <= 1:
            self.fingerprints = [mine]
            return
        import torch.distributed as dist

        gathered: list[str | None] = [None] * trainer.world_size
        dist.all_gather_object(gathered, mine)
        self.fingerprints = [str(f) for f in gathered]
        differing = [rank for rank, f in enumerate(self.fingerprints) if f != self.fingerprints[0]]
        if differing:
            raise ZooError(
                f"after fit, the state of rank(s) {differing} differs from rank 0's ({type(pl_module).__name__}): "
                "the module keeps state outside the all-reduced gradients; make it call "
                "zoo._distributed.refuse_distributed in setup"
            )
