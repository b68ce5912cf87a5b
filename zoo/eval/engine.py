"""The harness: measures the pieces (arm, seed) of an evaluation, with caching, workers, timing and resumption.

:func:`measure` plans the pieces a request asks for, serves each from the evaluation cache when the same code
already measured it (:mod:`zoo.eval.store`), and measures the rest: in this process one seed at a time, or in
``workers`` processes side by side (one thread each), except pieces whose metrics include wall-clock time
(``Arm(timed=True)``, ``Shared(timed=True)``), which always run alone afterwards. Each finished piece is stored
in the cache at once and handed to ``on_piece``, so an interrupted run keeps what it measured and a second run
resumes where it stopped.
"""

from __future__ import annotations

import datetime
import functools
import importlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zoo._errors import ZooError
from zoo._registry import ModelEntry, _all_entries, get_entry
from zoo.eval.claims import rounded
from zoo.eval.protocol import Protocol
from zoo.eval.run import Run
from zoo.eval.store import FitStore, PieceCache, code_digest, folder_digest


@dataclass(frozen=True)
class Evaluation:
    """A paper's evaluation as the harness runs it: its protocol and the registered entries of its arms.

    Args:
        entry: The entry it was named by.
        protocol: The paper's protocol.
        entries: The entries that share this evaluation, by the arm their weights are.
    """

    entry: ModelEntry
    protocol: Protocol
    entries: Mapping[str, ModelEntry]

    @property
    def paper(self) -> str:
        return self.entry.paper

    @property
    def ref(self) -> str:
        return self.entry.evaluate or ""


def protocol_of(entry: ModelEntry) -> Protocol:
    """Import an entry's ``evaluate`` reference (``"zoo.<paper>.evaluate:PROTOCOL"``) and return the protocol."""
    if not entry.evaluate:
        raise ZooError(f"{entry.name} defines no evaluation; `zoo eval` needs an evaluate.py with PROTOCOL")
    entry.check_requirements()
    module_name, _, attr = entry.evaluate.partition(":")
    protocol = getattr(importlib.import_module(module_name), attr or "PROTOCOL")
    if not isinstance(protocol, Protocol):
        raise ZooError(f"{entry.evaluate} is a {type(protocol).__name__}, not a zoo.eval.Protocol")
    return protocol


@functools.cache
def evaluation(name: str) -> Evaluation:
    """The evaluation of a registry name (any entry of it; the paper name means its default entry)."""
    entry = get_entry(name)
    entries = {e.eval_arm: e for e in _all_entries() if e.evaluate == entry.evaluate}
    return Evaluation(entry, protocol_of(entry), entries)


@dataclass(frozen=True)
class Request:
    """Which pieces to measure, and how.

    Args:
        arms: The arms (default: all of the protocol's).
        seeds: The seeds (default: the protocol's).
        overrides: Parsed ``--set`` values.
        retrain: Train every arm instead of loading the published weights.
        weights: An exported folder scored as the method's weights.
        workers: Processes measuring pieces side by side (timed pieces always run alone).
        fresh: Ignore cached pieces (they are still written).
    """

    arms: tuple[str, ...] | None = None
    seeds: tuple[int, ...] | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    retrain: bool = False
    weights: str | None = None
    workers: int = 1
    fresh: bool = False


@dataclass(frozen=True)
class Task:
    """The arms one call measures (one arm, or a shared pass) for one seed."""

    arms: tuple[str, ...]
    seed: int
    timed: bool


def plan(protocol: Protocol, arms: Sequence[str], seeds: Sequence[int]) -> list[Task]:
    """The tasks that measure ``arms`` for ``seeds``, seed by seed; a shared pass is one task."""
    for arm in arms:
        protocol.arm(arm)  # unknown arms raise, naming the valid ones
    tasks = []
    for seed in seeds:
        seen: set[str] = set()
        for arm in arms:
            if arm in seen:
                continue
            group = protocol.group(arm)
            members = group.arms if group is not None else (arm,)
            seen.update(members)
            tasks.append(Task(tuple(members), seed, protocol.is_timed(arm)))
    return tasks


def piece_key(ev: Evaluation, arm: str, seed: int, settings: Mapping[str, Any], request: Request) -> dict:
    """Everything that decides a piece's result (its cache key)."""
    weights = folder_digest(request.weights) if request.weights else None
    return {
        "evaluation": ev.ref,
        "arm": arm,
        "seed": seed,
        "settings": dict(settings),
        "retrain": request.retrain,
        "weights": weights,
        "code": code_digest(ev.paper),
    }


def measure(
    name: str, request: Request, on_piece: Callable[[dict[str, Any]], None] | None = None
) -> list[dict[str, Any]]:
    """Measure (or read from the cache) the pieces a request asks for.

    Args:
        name: Registry name of the evaluation.
        request: What to measure.
        on_piece: Called with every piece as soon as it is there (cached pieces first).

    Returns:
        The pieces: ``{"arm", "seed", "scores", "extras", "seconds", "code", "measured", "cached"}``.
    """
    ev = evaluation(name)
    protocol = ev.protocol
    settings = protocol.resolve(request.overrides)
    arms = list(request.arms or protocol.arms)
    seeds = list(protocol.seeds if request.seeds is None else request.seeds)
    if not seeds:
        raise ZooError("give at least one seed, e.g. --seeds 0 1 2")
    if request.weights is not None and not (Path(request.weights) / "config.json").is_file():
        raise ZooError(
            f"--weights {request.weights}: no config.json there; pass a folder written by `zoo fit` (ExportPretrained)"
        )
    cache = PieceCache.default()
    pieces: list[dict[str, Any]] = []

    def done(new: list[dict[str, Any]]) -> None:
        for piece in new:
            if piece["arm"] in arms:
                pieces.append(piece)
                if on_piece is not None:
                    on_piece(piece)

    todo = []
    for task in plan(protocol, arms, seeds):
        paths = [
            cache.path(ev.paper, arm, task.seed, piece_key(ev, arm, task.seed, settings, request)) for arm in task.arms
        ]
        stored = [None if request.fresh else cache.read(path) for path in paths]
        if all(piece is not None for piece in stored):
            done([{**piece, "cached": True} for piece in stored])
        else:
            todo.append(task)
    context = _Context(name, settings, request, cache.root, tuple(ev.entries.values()))
    parallel = [task for task in todo if not task.timed] if request.workers > 1 else []
    if parallel:
        _measure_in_workers(context, parallel, request.workers, done)
    timed = [task for task in todo if task.timed]
    if request.workers > 1 and timed and cache.root is not None:
        # a timed piece is measured alone, but the fits it needs can be trained side by side beforehand
        _measure_in_workers(context, timed, request.workers, lambda pieces: None, _worker_warm)
    for task in todo:
        if task not in parallel:
            done(context.measure(task))
    return pieces


@dataclass
class _Context:
    """What measuring a task needs, picklable for worker processes; runs are kept per seed in each process."""

    name: str
    settings: Mapping[str, Any]
    request: Request
    cache_root: Path | None
    entries: tuple[ModelEntry, ...] = ()  # registered again in a worker that lacks them (a test's own entries)
    runs: dict[int, Run] = field(default_factory=dict)

    def run(self, seed: int) -> Run:
        if seed not in self.runs:
            ev = evaluation(self.name)
            fits = _fit_store(self.cache_root)
            self.runs[seed] = Run(
                ev.protocol,
                ev.paper,
                seed,
                self.settings,
                ev.entries,
                retrain=self.request.retrain,
                weights=self.request.weights,
                fits=fits,
            )
        return self.runs[seed]

    def measure(self, task: Task) -> list[dict[str, Any]]:
        ev = evaluation(self.name)
        run = self.run(task.seed)
        run.extras = {}
        started = time.perf_counter()
        scores = measure_task(ev.protocol, run, task.arms)
        seconds = round((time.perf_counter() - started) / len(task.arms), 2)
        stamp = datetime.datetime.now().isoformat(timespec="seconds")
        pieces = []
        cache = PieceCache(self.cache_root)
        for arm in task.arms:
            piece = {
                "arm": arm,
                "seed": task.seed,
                "scores": {key: rounded(value) for key, value in scores[arm].items()},
                "extras": run.extras,  # a shared pass's extras go with each of its arms (merging them is idempotent)
                "seconds": seconds,
                "code": code_digest(ev.paper),
                "measured": stamp,
            }
            if len(task.arms) > 1:
                piece["shared"] = list(task.arms)
            cache.write(
                cache.path(ev.paper, arm, task.seed, piece_key(ev, arm, task.seed, self.settings, self.request)), piece
            )
            pieces.append({**piece, "cached": False})
        return pieces


@functools.cache
def _fit_store(root: Path | None) -> FitStore:
    return FitStore(root)


def measure_task(protocol: Protocol, run: Run, arms: Sequence[str]) -> dict[str, Mapping[str, float]]:
    """The metrics of one task: a shared pass, an arm's ``measure``, or ``score`` of the arm's model."""
    group = protocol.group(arms[0])
    if group is not None:
        scores = group.measure(run)
        missing = [arm for arm in group.arms if arm not in scores]
        if missing:
            raise ZooError(f"the shared pass {group.name} returned no metrics for {', '.join(missing)}")
        return scores
    (arm,) = arms
    spec = protocol.arm(arm)
    if spec.measure is not None:
        return {arm: spec.measure(run)}
    if protocol.score is None:
        raise ZooError(f"arm {arm!r} loads a model, but the protocol has no score= to measure it")
    return {arm: protocol.score(arm, run.load(arm), run)}


def _measure_in_workers(
    context: _Context, tasks: list[Task], workers: int, done: Callable, work: Callable | None = None
) -> None:
    """Run ``work`` (default: measure) on tasks in ``workers`` spawned processes of one thread each."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    threads = max(1, (os.cpu_count() or 1) // workers)
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(threads,),
    )
    with pool:
        futures = [pool.submit(work or _worker_measure, context, task) for task in tasks]
        for future in as_completed(futures):
            done(future.result())


_WORKER_CONTEXT: dict[str, _Context] = {}


def _init_worker(threads: int) -> None:
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ.setdefault("ZOO_QUIET", "1")
    import torch

    torch.set_num_threads(threads)


def _worker_context(context: _Context) -> _Context:
    from zoo._registry import _ENTRIES, _discover

    _discover()
    for entry in context.entries:
        _ENTRIES.setdefault(entry.name, entry)
    # one context per process, so that the runs (and their memos) of a seed are shared by its tasks
    return _WORKER_CONTEXT.setdefault(context.name, context)


def _worker_measure(context: _Context, task: Task) -> list[dict[str, Any]]:
    return _worker_context(context).measure(task)


def _worker_warm(context: _Context, task: Task) -> list[dict[str, Any]]:
    """Train (and store) the fits a timed task's arms load, without measuring anything."""
    kept = _worker_context(context)
    protocol, run = evaluation(kept.name).protocol, kept.run(task.seed)
    for arm in task.arms:
        if protocol.group(arm) is None and protocol.arm(arm).measure is None:
            run.load(arm)
    return []
