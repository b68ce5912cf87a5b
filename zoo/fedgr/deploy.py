"""FedGR as deployed on Flower: a SuperLink, one SuperNode per client, the ServerApp and the ClientApps each in
processes of their own (Flower's deployment runtime, ``flwr`` >= 1.42), here on loopback.

The Flower app is two objects of this module, :data:`server_app` and :data:`client_app`, named by the
``pyproject.toml`` that :func:`write_app` writes; they run the same server strategy and client trainers as
the in-process loop (:mod:`zoo.fedgr.flower`). Everything a run needs travels in Flower's run config:

* ``num-rounds``: communication rounds;
* ``run``: a :class:`~zoo.fedgr.config.RunConfig` as JSON (empty: the defaults);
* ``federation``: a :class:`~zoo.fedgr.federation.FederationSpec` as JSON (empty: the defaults); every
  ClientApp rebuilds the federation from it and keeps its own client's share;
* ``output``: a folder where the ServerApp exports the final global model as a zoo folder
  (``zoo.load(output)`` loads it as a :class:`~zoo.fedgr.module.FedGRModule`); empty: no export.

By hand (each line in its own terminal; ``K`` = 0 .. num_clients - 1, one SuperNode per client, each with
its own ``--port``)::

    python -m zoo.fedgr.deploy app fedgr-app
    flower-superlink --insecure --disable-runtime-dependency-installation --port 9091
    flower-supernode --insecure --superlink 127.0.0.1:9091 --port $((9100 + K)) --node-config "partition-id=K"
    flwr run fedgr-app zoo-loopback --stream --run-config overrides.toml

(``zoo-loopback`` is a SuperLink connection in ``$FLWR_HOME/config.toml``: ``address = "127.0.0.1:9091"``,
``insecure = true``.) :func:`run_deployment` does all of this on loopback and returns the exported folder;
``python -m zoo.fedgr.deploy loopback --clients 4 --rounds 2`` is its command line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from zoo._errors import ZooError
from zoo._serialization import instantiate
from zoo.fedgr.config import RunConfig
from zoo.fedgr.federation import FederationSpec
from zoo.fedgr.flower import Context, FlowerRun, Grid, ServerApp, make_client_app, serve, torch_state

CONNECTION = "zoo-loopback"
APP_PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "zoo-fedgr"
version = "1.0.0"
description = "FedGR of icml26-zoo on Flower: the ServerApp and ClientApp of zoo.fedgr.deploy"
license = "Apache-2.0"
dependencies = ["icml26-zoo[fl]"]

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "icml26-zoo"

[tool.flwr.app.components]
serverapp = "zoo.fedgr.deploy:server_app"
clientapp = "zoo.fedgr.deploy:client_app"

[tool.flwr.app.config]
num-rounds = 30
run = ""
federation = ""
output = ""
"""


# ------------------------------------------------------------------------------------------------ the app


def run_config_of(context: Context) -> tuple[RunConfig, FederationSpec, int, str]:
    """The run, the federation, the number of rounds and the export folder of a Flower run's config."""
    config = context.run_config
    run = instantiate(RunConfig, json.loads(str(config["run"]))) if config.get("run") else RunConfig()
    spec = FederationSpec(**json.loads(str(config["federation"]))) if config.get("federation") else FederationSpec()
    return run, spec, int(config.get("num-rounds", 30)), str(config.get("output", ""))


def export(outcome: FlowerRun, run: RunConfig, spec: FederationSpec, folder: str | Path, **metadata) -> Path:
    """Write the final global model of a Flower run as a zoo folder (a :class:`FedGRModule`'s config + weights).

    Args:
        outcome: The Flower run.
        run: Its run config.
        spec: Its federation.
        folder: Destination.
        **metadata: Stored under ``config.json["metadata"]``.
    """
    import torch

    from zoo import save_pretrained
    from zoo.fedgr.module import FedGRModule

    module = FedGRModule(
        method=run.method,
        num_clients=spec.num_clients,
        samples_per_client=spec.samples_per_client,
        clients_per_round=run.clients_per_round,
        seed=run.seed,
        num_classes=run.num_classes,
        local=run.local,
        augment=run.augment,
        fedgr=run.fedgr,
        baselines=run.baselines,
    )
    own = module.model.state_dict()
    module.model.load_state_dict({k: v for k, v in torch_state(outcome).items() if k in own})
    estimates = getattr(outcome.server, "noise_estimates", {})
    if run.method == "fedgr" and estimates:
        module.noise_estimate.copy_(torch.tensor([estimates.get(k, 0.0) for k in range(spec.num_clients)]))
    history = {str(r): m for r, m in outcome.history.items()}
    return save_pretrained(module, folder, flower={"engine": "deployment", "history": history, **metadata})


#: The Flower ServerApp: the zoo server strategy of the run config's method, for ``num-rounds`` rounds.
server_app = ServerApp()


@server_app.main()
def _serve(grid: Grid, context: Context) -> None:
    run, spec, rounds, output = run_config_of(context)
    started = time.perf_counter()
    outcome = serve(grid, run, spec.num_clients, rounds)
    if output:
        export(outcome, run, spec, output, rounds=rounds, wall_time_s=round(time.perf_counter() - started, 1))


#: The Flower ClientApp: the client of ``node_config["partition-id"]``, on the federation of the run config.
client_app = make_client_app(lambda context: run_config_of(context)[1])


def write_app(folder: str | Path) -> Path:
    """Write the Flower app (its ``pyproject.toml``, naming :data:`server_app` and :data:`client_app`) to ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(APP_PYPROJECT)
    return folder


# ---------------------------------------------------------------------------------------------- loopback


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _toml_string(value: str) -> str:
    return "'" + value.replace("'", "") + "'"  # a TOML literal string: JSON's double quotes need no escaping


def _tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        raise ZooError(f"{name} is not installed (it comes with flwr): pip install 'icml26-zoo[fl]'")
    return found


def run_deployment(
    run: RunConfig,
    spec: FederationSpec,
    num_rounds: int,
    workdir: str | Path,
    timeout: float = 600.0,
    threads_per_process: int | None = 1,
) -> Path:
    """Run FedGR on Flower's deployment runtime on loopback: a SuperLink, ``spec.num_clients`` SuperNodes.

    The SuperLink starts the ServerApp and each SuperNode its ClientApp in separate processes (Flower's
    ``subprocess`` isolation); this process only launches them, submits the run with ``flwr run`` and waits
    for the export. Logs go to ``workdir/logs``.

    Args:
        run: The run config.
        spec: The federation (one SuperNode per client).
        num_rounds: Communication rounds.
        workdir: Working folder (the app, Flower's home, the logs and the export ``workdir/export``).
        timeout: Seconds before giving up.
        threads_per_process: torch threads of every process (``OMP_NUM_THREADS``); None leaves the default.

    Returns:
        The exported folder (``zoo.load`` it).

    Raises:
        ZooError: If the run fails or times out (with the tail of the logs).
    """
    workdir = Path(workdir).resolve()
    logs, home, output = workdir / "logs", workdir / "flwr-home", workdir / "export"
    logs.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(output, ignore_errors=True)
    app = write_app(workdir / "app")
    link_port, *node_ports = _free_ports(1 + spec.num_clients)
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "{CONNECTION}"\n\n[superlink.{CONNECTION}]\n'
        f'address = "127.0.0.1:{link_port}"\ninsecure = true\n'
    )
    overrides = workdir / "run-config.toml"
    overrides.write_text(
        f"num-rounds = {int(num_rounds)}\nrun = {_toml_string(json.dumps(dataclasses.asdict(run)))}\n"
        f"federation = {_toml_string(json.dumps(dataclasses.asdict(spec)))}\noutput = {_toml_string(str(output))}\n"
    )
    env = {**os.environ, "FLWR_HOME": str(home), "FLWR_DISABLE_UPDATE_CHECK": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if threads_per_process:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads_per_process)
    processes: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> subprocess.Popen:
        log = open(logs / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
        process = subprocess.Popen(
            [_tool(args[0]), *args[1:]], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir,
            start_new_session=True,
        )  # fmt: skip
        processes.append(process)
        return process

    deadline = time.monotonic() + timeout
    try:
        start("superlink", "flower-superlink", "--insecure", "--disable-runtime-dependency-installation",
              "--port", str(link_port))  # fmt: skip
        _wait_for_port(link_port, deadline, processes[0], logs)
        for client, port in enumerate(node_ports):
            start(f"supernode-{client}", "flower-supernode", "--insecure", "--superlink", f"127.0.0.1:{link_port}",
                  "--port", str(port), "--node-config", f"partition-id={client}")  # fmt: skip
        submit = start("flwr-run", "flwr", "run", str(app), CONNECTION, "--stream", "--run-config", str(overrides))
        while not (output / "model.safetensors").is_file():
            if time.monotonic() > deadline:
                raise ZooError(f"the Flower deployment did not finish in {timeout:.0f} s; {_tail(logs)}")
            if submit.poll() is not None and not (output / "model.safetensors").is_file():
                time.sleep(2.0)  # the export may land just after the stream ends
                if not (output / "model.safetensors").is_file():
                    raise ZooError(f"flwr run ended (exit {submit.returncode}) without an export; {_tail(logs)}")
            for process in processes[:-1]:
                if process.poll() is not None:
                    raise ZooError(f"a Flower process exited early ({process.args[0]}); {_tail(logs)}")
            time.sleep(0.5)
        return output
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)  # the group: SuperLink's ServerApp, SuperNodes' ClientApps
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _wait_for_port(port: int, deadline: float, process: subprocess.Popen, logs: Path) -> None:
    """Wait until the SuperLink accepts connections (``flwr run`` fails at once otherwise)."""
    while True:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        if process.poll() is not None or time.monotonic() > deadline:
            raise ZooError(f"the SuperLink did not start listening on 127.0.0.1:{port}; {_tail(logs)}")
        time.sleep(0.2)


def _tail(logs: Path, lines: int = 5) -> str:
    parts = []
    for log in sorted(logs.glob("*.log")):
        text = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        errors = [line for line in text if "ERROR" in line or "Error" in line or "Traceback" in line]
        if errors:
            parts.append(f"{log.name}: {errors[-1].strip()}")
    return "; ".join(parts[:lines]) or f"see the logs in {logs}"


def main(argv: list[str] | None = None) -> int:
    """``python -m zoo.fedgr.deploy app DIR`` | ``loopback [--clients K] [--rounds R] [--workdir DIR] ...``."""
    parser = argparse.ArgumentParser(prog="python -m zoo.fedgr.deploy", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    app = commands.add_parser("app", help="write the Flower app (pyproject.toml) to DIR")
    app.add_argument("folder")
    loop = commands.add_parser("loopback", help="run a SuperLink and one SuperNode per client on 127.0.0.1")
    loop.add_argument("--clients", type=int, default=4)
    loop.add_argument("--samples-per-client", type=int, default=64)
    loop.add_argument("--clients-per-round", type=int, default=4)
    loop.add_argument("--rounds", type=int, default=2)
    loop.add_argument("--method", default="fedgr")
    loop.add_argument("--seed", type=int, default=0)
    loop.add_argument("--workdir", default="runs/fedgr.flower")
    loop.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)
    if args.command == "app":
        print(write_app(args.folder) / "pyproject.toml")
        return 0
    spec = FederationSpec(
        num_clients=args.clients, samples_per_client=args.samples_per_client, val_size=0, seed=args.seed
    )
    run = RunConfig(method=args.method, clients_per_round=args.clients_per_round, seed=args.seed)
    started = time.perf_counter()
    folder = run_deployment(run, spec, args.rounds, args.workdir, timeout=args.timeout)
    print(f"zoo: {args.clients} SuperNodes, {args.rounds} rounds in {time.perf_counter() - started:.0f} s")
    print(f"zoo: weights     {folder}  (zoo.load('{folder}'))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
