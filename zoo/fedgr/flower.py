"""FedGR and its baselines on Flower (``flwr`` >= 1.20, Message API): the same server and client code.

:class:`FlowerStrategy` wraps any server strategy of :mod:`zoo.fedgr.server` as a Flower ``Strategy``, and
:func:`make_client_app` wraps the client trainers of :mod:`zoo.fedgr.client` as a Flower ``ClientApp``. The
records carry exactly the in-process objects: a :class:`~zoo.fedgr.client.ClientTask` (round, seed,
the server's c_i and ε̂_k) plus the global weights one way, a :class:`~zoo.fedgr.client.ClientUpdate`
(weights, size, uploaded losses) the other. A client's own state (FedGR's EMA teacher and running-mean
losses) stays on its node, in ``Context.state``. The run configuration travels with every task as JSON, so
a SuperNode needs only its data.

Engines:

* :func:`run_simulation`: Flower's simulation runtime (Ray), one virtual SuperNode per client;
* :func:`run_loopback`: the same ServerApp logic against :class:`LoopbackGrid`, an in-process Grid that
  serialises every message through Flower's protobuf codec (tests, debugging, no Ray);
* a real deployment (:mod:`zoo.fedgr.deploy`): a SuperLink, one SuperNode per client started with
  ``--node-config "partition-id=K"``, and ``flwr run`` of the app that :func:`zoo.fedgr.deploy.write_app`
  writes; the ServerApp and every ClientApp run in processes of their own.

With the same seeds, every engine gives the same global weights as the in-process Lightning loop.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from uuid import uuid4

import numpy as np
import torch

from zoo._errors import MissingExtraError

try:
    from flwr.app import (
        Array,
        ArrayRecord,
        ConfigRecord,
        Context,
        Message,
        MessageType,
        MetricRecord,
        RecordDict,
    )
    from flwr.clientapp import ClientApp
    from flwr.common.constant import SUPERLINK_NODE_ID
    from flwr.common.serde import recorddict_from_proto, recorddict_to_proto
    from flwr.proto.recorddict_pb2 import RecordDict as ProtoRecordDict
    from flwr.serverapp import Grid, ServerApp
    from flwr.serverapp.strategy import Strategy
    from flwr.serverapp.strategy.strategy_utils import sample_nodes
    from flwr.supercore.task_identity import TaskIdentity
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError(
        f"the Flower engine of FedGR needs flwr ({error.name} is missing): pip install 'icml26-zoo[fl]'"
    ) from None

from zoo._serialization import instantiate
from zoo.fedgr.client import ClientTask, ClientTrainer, ClientUpdate, State, make_trainer
from zoo.fedgr.config import RunConfig
from zoo.fedgr.federation import FederationSpec, fashion_mnist_federation
from zoo.fedgr.server import FedAvgServer, make_server

ARRAYS, CONFIG, SIEVE, METRICS, UPLOAD = "arrays", "config", "sieve", "metrics", "upload"
CLIENT_STATE = "fedgr.client-state"
PARTITION_KEY = "partition-id"


# ------------------------------------------------------------------------------------------------ codec


def _array(values: np.ndarray) -> Array:
    return Array(np.ascontiguousarray(values))


def task_to_content(task: ClientTask, global_state: State, run: RunConfig) -> RecordDict:
    """The RecordDict of a train message: global weights, the task's scalars and its per-sample arrays."""
    config = ConfigRecord(
        {
            "client-id": task.client_id,
            "server-round": task.round_idx,
            "seed": task.seed,
            "upload-losses": task.upload_losses,
            "run": json.dumps(dataclasses.asdict(run)),
        }
    )
    if task.noise_estimate is not None:
        config["noise-estimate"] = float(task.noise_estimate)
    content = RecordDict({ARRAYS: ArrayRecord(_cpu(global_state)), CONFIG: config})
    if task.clean_probability is not None:
        content[SIEVE] = ArrayRecord({"clean_probability": _array(task.clean_probability)})
    return content


def content_to_task(content: RecordDict) -> tuple[ClientTask, State, RunConfig]:
    """Inverse of :func:`task_to_content`."""
    config = content[CONFIG]
    sieve = content[SIEVE]["clean_probability"].numpy() if SIEVE in content else None
    task = ClientTask(
        client_id=int(config["client-id"]),
        round_idx=int(config["server-round"]),
        seed=int(config["seed"]),
        upload_losses=bool(config["upload-losses"]),
        clean_probability=sieve,
        noise_estimate=float(config["noise-estimate"]) if "noise-estimate" in config else None,
    )
    run = instantiate(RunConfig, json.loads(str(config["run"])))
    return task, content[ARRAYS].to_torch_state_dict(), run


def update_to_content(update: ClientUpdate) -> RecordDict:
    """The RecordDict of a train reply (``num-examples`` is the weight Flower strategies expect)."""
    metrics = MetricRecord({"num-examples": update.num_examples, "client-id": update.client_id, **update.metrics})
    content = RecordDict({ARRAYS: ArrayRecord(_cpu(update.state)), METRICS: metrics})
    if update.loss_mean is not None:
        content[UPLOAD] = ArrayRecord({"sample_ids": _array(update.sample_ids), "loss_mean": _array(update.loss_mean)})
    return content


def content_to_update(content: RecordDict) -> ClientUpdate:
    """Inverse of :func:`update_to_content`."""
    metrics = dict(content[METRICS])
    upload = content.get(UPLOAD)
    return ClientUpdate(
        client_id=int(metrics.pop("client-id")),
        state=content[ARRAYS].to_torch_state_dict(),
        num_examples=int(metrics.pop("num-examples")),
        sample_ids=upload["sample_ids"].numpy() if upload is not None else None,
        loss_mean=upload["loss_mean"].numpy() if upload is not None else None,
        metrics={k: float(v) for k, v in metrics.items()},
    )


def _cpu(state: State) -> State:
    return {k: v.detach().cpu() for k, v in state.items()}


# --------------------------------------------------------------------------------------------- server


class FlowerStrategy(Strategy):
    """A Flower ``Strategy`` that delegates sampling, instructions and aggregation to a zoo server strategy.

    Before the first round it asks every node for its client id (a ``query`` message), so the server's
    schedule addresses clients, whatever node ids Flower assigned.

    Args:
        server: The zoo server strategy (e.g. :class:`~zoo.fedgr.server.FedGRServer`).
        timeout: Seconds to wait for replies.
    """

    def __init__(self, server: FedAvgServer, timeout: float | None = None) -> None:
        self.server = server
        self.timeout = timeout
        self.node_of: dict[int, int] = {}

    def summary(self) -> None:
        from flwr.supercore import log

        log(20, "\t└──> zoo.fedgr %s over %d clients", type(self.server).__name__, self.server.num_clients)

    def discover(self, grid: Grid) -> None:
        """Map client ids to node ids by querying every node once."""
        nodes, _ = sample_nodes(grid, self.server.num_clients, self.server.num_clients)
        queries = [Message(RecordDict(), dst_node_id=node, message_type=MessageType.QUERY) for node in nodes]
        for reply in grid.send_and_receive(queries, timeout=self.timeout):
            if reply.has_error():
                raise RuntimeError(
                    f"node {reply.metadata.src_node_id} failed the client-id query: {reply.error.reason}"
                )
            self.node_of[int(reply.content[CONFIG]["client-id"])] = reply.metadata.src_node_id
        missing = sorted(set(range(self.server.num_clients)) - set(self.node_of))
        if missing:
            raise RuntimeError(f"no node reported client ids {missing}; start one SuperNode per client")

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid):
        if not self.node_of:
            self.discover(grid)
        device = self.server.device
        self.server.global_state = {k: v.to(device) for k, v in arrays.to_torch_state_dict().items()}
        return [
            Message(
                task_to_content(task, self.server.global_state, self.server.config),
                dst_node_id=self.node_of[task.client_id],
                message_type=MessageType.TRAIN,
                group_id=str(server_round),
            )
            for task in self.server.configure_round(server_round)
        ]

    def aggregate_train(self, server_round: int, replies: Iterable[Message]):
        replies = list(replies)
        failed = [r for r in replies if r.has_error()]
        if failed:
            raise RuntimeError(f"round {server_round}: {len(failed)} client(s) failed, e.g. {failed[0].error.reason}")
        updates = [content_to_update(r.content) for r in replies]
        state = self.server.aggregate(server_round, updates)
        weights = [u.num_examples for u in updates]
        metrics = MetricRecord(
            {
                "num-examples": int(sum(weights)),
                "loss": float(np.average([u.metrics.get("loss", 0.0) for u in updates], weights=weights)),
            }
        )
        return ArrayRecord(_cpu(state)), metrics

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid):
        return []  # the global model is evaluated centrally (evaluate_fn); clients hold no clean labels

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]):
        return None


@dataclass
class FlowerRun:
    """Result of a Flower run.

    Args:
        global_state: Final global weights.
        server: The server strategy after the run (FedGR: its sieving state).
        history: Per-round aggregated train metrics.
    """

    global_state: State
    server: FedAvgServer
    history: dict[int, dict[str, float]] = field(default_factory=dict)


def serve(grid: Grid, run: RunConfig, num_clients: int, num_rounds: int, timeout: float | None = None) -> FlowerRun:
    """The ServerApp's body: build the zoo server strategy and run ``num_rounds`` rounds on ``grid``."""
    server = make_server(run, num_clients)
    strategy = FlowerStrategy(server, timeout=timeout)
    result = strategy.start(grid=grid, initial_arrays=ArrayRecord(_cpu(server.global_state)), num_rounds=num_rounds)
    history = {r: dict(m) for r, m in result.train_metrics_clientapp.items()}
    return FlowerRun(global_state=result.arrays.to_torch_state_dict(), server=server, history=history)


def make_server_app(
    run: RunConfig, num_clients: int, num_rounds: int, on_finish: Callable[[FlowerRun], Any] | None = None
) -> ServerApp:
    """A Flower ``ServerApp`` running :func:`serve`; ``on_finish`` receives the :class:`FlowerRun`."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        outcome = serve(grid, run, num_clients, num_rounds)
        if on_finish is not None:
            on_finish(outcome)

    return app


# --------------------------------------------------------------------------------------------- client


@lru_cache(maxsize=64)
def _trainer(spec: FederationSpec, client_id: int, run_json: str) -> ClientTrainer:
    # Trainers keep no state between rounds (it lives in Context.state), so one per process can be reused.
    run = instantiate(RunConfig, json.loads(run_json))
    return make_trainer(fashion_mnist_federation(spec).client(client_id), run)


def _client_state(context: Context) -> State | None:
    if CLIENT_STATE not in context.state:
        return None
    return context.state[CLIENT_STATE].to_torch_state_dict()


def make_client_app(
    spec: FederationSpec | Callable[[Context], FederationSpec], client_id_of: Callable[[Context], int] | None = None
) -> ClientApp:
    """A Flower ``ClientApp`` that trains the client given by its node config on its share of ``spec``.

    Args:
        spec: The federation, or a function of the node's Context that gives it (a deployed ClientApp reads it
            from the run config, see :mod:`zoo.fedgr.deploy`); each node rebuilds it and keeps only its own
            client's data.
        client_id_of: Maps a node's Context to its client id (default: ``node_config["partition-id"]``).
    """
    client_id_of = client_id_of or (lambda context: int(context.node_config[PARTITION_KEY]))
    spec_of = spec if callable(spec) else (lambda context: spec)
    app = ClientApp()

    @app.query()
    def query(message: Message, context: Context) -> Message:
        client_id = client_id_of(context)
        size = len(fashion_mnist_federation(spec_of(context)).client_samples[client_id])
        return Message(
            RecordDict({CONFIG: ConfigRecord({"client-id": client_id, "num-examples": size})}), reply_to=message
        )

    @app.train()
    def train(message: Message, context: Context) -> Message:
        task, global_state, run = content_to_task(message.content)
        client_id = client_id_of(context)
        if task.client_id != client_id:
            raise ValueError(f"a task for client {task.client_id} reached the node of client {client_id}")
        trainer = _trainer(spec_of(context), client_id, json.dumps(dataclasses.asdict(run)))
        update, state = trainer.fit(global_state, task, _client_state(context))
        context.state[CLIENT_STATE] = ArrayRecord(_cpu(state)) if state else ArrayRecord()
        return Message(update_to_content(update), reply_to=message)

    return app


# --------------------------------------------------------------------------------------------- engines


class LoopbackGrid(Grid):
    """An in-process Flower ``Grid``: each pushed message is run by a ClientApp right away.

    Every content crosses Flower's protobuf codec in both directions (serialised to bytes and parsed
    back), and each node keeps its own ``Context`` across rounds, as a SuperNode would.

    Args:
        client_app: The ClientApp every node runs.
        num_nodes: Number of nodes; node ``i`` gets ``node_config = {"partition-id": i}``.
    """

    def __init__(self, client_app: ClientApp, num_nodes: int) -> None:
        self.client_app = client_app
        self.contexts = {
            1000 + i: Context(
                run_id=1, node_id=1000 + i, node_config={PARTITION_KEY: i}, state=RecordDict(), run_config={}
            )
            for i in range(num_nodes)
        }
        self._replies: dict[str, Message] = {}
        self._run = None
        self.bytes_sent = 0

    def set_run(self, run) -> None:
        self._run = run

    @property
    def run(self):
        return self._run

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None) -> Message:
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        return list(self.contexts)

    def _wire(self, content: RecordDict) -> RecordDict:
        payload = recorddict_to_proto(content).SerializeToString()
        self.bytes_sent += len(payload)
        parsed = ProtoRecordDict()
        parsed.ParseFromString(payload)
        return recorddict_from_proto(parsed)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = []
        for message in messages:
            message.metadata.__dict__["_message_id"] = uuid4().hex
            delivered = Message(content=self._wire(message.content), metadata=copy.copy(message.metadata))
            reply = self.client_app(delivered, self.contexts[message.metadata.dst_node_id])
            if not reply.has_error():
                reply = Message(self._wire(reply.content), reply_to=delivered)
            self._replies[message.metadata.message_id] = reply
            ids.append(message.metadata.message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return [self._replies.pop(i) for i in message_ids if i in self._replies]

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        return self.pull_messages(self.push_messages(messages))


@contextmanager
def _serverapp_identity(run_id: int = 1) -> Iterator[None]:
    """Flower stamps new messages with the process's task identity, which its runtimes set; so does this."""
    saved = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = run_id, SUPERLINK_NODE_ID, 1
    try:
        yield
    finally:
        TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = saved


def run_loopback(run: RunConfig, spec: FederationSpec, num_rounds: int) -> FlowerRun:
    """Run the Flower ServerApp logic and ClientApps in this process over a :class:`LoopbackGrid`."""
    grid = LoopbackGrid(make_client_app(spec), spec.num_clients)
    with _serverapp_identity():
        return serve(grid, run, spec.num_clients, num_rounds)


def run_simulation(
    run: RunConfig, spec: FederationSpec, num_rounds: int, backend_config: dict | None = None
) -> FlowerRun:
    """Run on Flower's simulation runtime (Ray): one virtual SuperNode per client.

    Args:
        run: The run.
        spec: The federation.
        num_rounds: Communication rounds.
        backend_config: Flower's backend config (default: one CPU per client, two actors at a time).
    """
    from flwr.simulation import run_simulation as flower_run_simulation

    outcome: list[FlowerRun] = []
    backend_config = backend_config or {
        "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
        "init_args": {"num_cpus": 2, "include_dashboard": False, "logging_level": "ERROR"},
    }
    flower_run_simulation(
        server_app=make_server_app(run, spec.num_clients, num_rounds, on_finish=outcome.append),
        client_app=make_client_app(spec),
        num_supernodes=spec.num_clients,
        backend_config=backend_config,
    )
    if not outcome:
        raise RuntimeError("the Flower simulation ended without a result; see the Flower log above")
    return outcome[0]


def torch_state(run: FlowerRun) -> dict[str, torch.Tensor]:
    """The final global weights of the published model (without co-teaching's peer network)."""
    return {k: v for k, v in run.global_state.items() if not k.startswith("peer.")}
