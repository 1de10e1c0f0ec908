"""A three-node RabbitMQ cluster on this machine, for the drills (marker ``rabbitmq_cluster``).

Each node is the installed ``rabbitmq-server`` run in the foreground as a child of the test
process, with a node name, AMQP and distribution ports, data and log folders of its own
under one temporary folder, no plugins, and a configuration and environment file of its
own (the machine's ``/etc/rabbitmq`` files, which name the machine's own broker, are not
read). The nodes share one Erlang cookie (``$HOME/.erlang.cookie`` with ``HOME`` the
temporary folder, for the nodes and for ``rabbitmqctl``) and are joined into one cluster
with ``rabbitmqctl join_cluster``. The machine's own node (``rabbit@localhost`` on 5672)
is never addressed. :meth:`Cluster.close` stops every node it started, by pid, and
removes the folder.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from attrs import define, field

SBIN = Path("/usr/lib/rabbitmq/lib")
PR_SET_PDEATHSIG = 1
START_TIMEOUT = 120.0


def _sbin() -> Path:
    """The folder of the installed server's scripts (not the wrapper that changes user)."""
    found = sorted(SBIN.glob("rabbitmq_server-*/sbin"))
    if found:
        return found[-1]
    server = shutil.which("rabbitmq-server")
    if server is None:
        raise RuntimeError("rabbitmq-server is not installed: the cluster drills need it")
    return Path(os.path.realpath(server)).parent


def _stop_with_parent() -> None:
    """In the child: SIGTERM when the test process dies, however it dies (Linux), so the
    script stops its node even when no cleanup code runs."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@define
class Node:
    name: str  # e.g. apq1a2b3c1@localhost
    amqp_port: int
    dist_port: int
    base: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return self.url_as("guest", "guest")

    def url_as(self, user: str, password: str) -> str:
        """This node's URL with another login (see :meth:`Cluster.add_user`)."""
        return f"amqp://{user}:{password}@127.0.0.1:{self.amqp_port}/"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


@define
class Cluster:
    root: Path
    nodes: list[Node] = field(factory=list)
    sbin: Path = field(factory=_sbin)

    # ------------------------------------------------------------------------ processes

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        env["HOME"] = str(self.root)
        env["RABBITMQ_CONF_ENV_FILE"] = str(self.root / "rabbitmq-env.conf")
        env["ERL_EPMD_ADDRESS"] = "127.0.0.1"
        return env

    def node_environment(self, node: Node) -> dict[str, str]:
        env = self.environment()
        env.update(
            RABBITMQ_NODENAME=node.name,
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
            RABBITMQ_NODE_PORT=str(node.amqp_port),
            RABBITMQ_DIST_PORT=str(node.dist_port),
            RABBITMQ_MNESIA_BASE=str(node.base / "mnesia"),
            RABBITMQ_LOG_BASE=str(node.base / "log"),
            RABBITMQ_CONFIG_FILE=str(node.base / "rabbitmq.conf"),
            RABBITMQ_ADVANCED_CONFIG_FILE=str(node.base / "advanced.config"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(self.root / "enabled_plugins"),
            RABBITMQ_SERVER_ERL_ARGS="+S 1:1 +A 4",
        )
        return env

    def ctl(self, node: Node, *args: str, timeout: float = 60.0) -> str:
        done = subprocess.run(
            [str(self.sbin / "rabbitmqctl"), "-q", "-n", node.name, *args],
            env=self.environment(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"rabbitmqctl -n {node.name} {' '.join(args)}: {done.stderr.strip()[-500:]}"
            )
        return done.stdout

    def start(self, node: Node) -> None:
        (node.base / "log").mkdir(parents=True, exist_ok=True)
        output = open(node.base / "stdout.log", "ab")  # noqa: SIM115 - kept with the process
        node.process = subprocess.Popen(
            [str(self.sbin / "rabbitmq-server")],
            env=self.node_environment(node),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_stop_with_parent,
        )
        output.close()

    def await_started(self, node: Node) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if not node.running:
                raise RuntimeError(f"{node.name} exited at start: see {node.base}/stdout.log")
            try:
                self.ctl(node, "await_startup", "--timeout", "10", timeout=30)
                return
            except (RuntimeError, subprocess.TimeoutExpired):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def stop(self, node: Node, *, kill: bool = False) -> None:
        """Stop ``node`` and wait for it: SIGTERM to its ``rabbitmq-server`` script (which
        stops the Erlang VM), or with ``kill`` SIGKILL to its whole process group (the
        script and the VM, started in a session of their own)."""
        process = node.process
        if process is None:
            return
        if process.poll() is None and not kill:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=60)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # the VM too, whatever the script did
        process.wait(timeout=30)

    def restart(self, node: Node) -> None:
        """Start a stopped ``node`` again and wait until it runs: it rejoins the cluster
        from its own data folder (the queues' members on it catch up from the others)."""
        if node.running:
            return
        self.start(node)
        self.await_started(node)

    def restart_stopped(self) -> None:
        """Every node running again (a drill may have stopped some)."""
        for node in self.nodes:
            self.restart(node)

    def add_user(self, user: str, password: str, vhost: str = "/") -> None:
        """A login of the whole cluster with every permission on ``vhost``."""
        asked = next(node for node in self.nodes if node.running)
        self.ctl(asked, "add_user", user, password)
        self.ctl(asked, "set_permissions", "-p", vhost, user, ".*", ".*", ".*")

    def close(self) -> None:
        for node in self.nodes:
            self.stop(node, kill=True)
        shutil.rmtree(self.root, ignore_errors=True)

    # -------------------------------------------------------------------------- queries

    def leader_of(self, queue: str, vhost: str = "/") -> Node:
        """The node leading the quorum queue ``queue``, asked of a running node."""
        asked = next(node for node in self.nodes if node.running)
        output = self.ctl(asked, "list_queues", "-p", vhost, "--no-table-headers", "name", "leader")
        for line in output.splitlines():
            name, _, leader = line.partition("\t")
            if name == queue:
                return next(node for node in self.nodes if node.name == leader.strip())
        raise LookupError(f"no queue {queue!r} listed by {asked.name}")


def start_cluster(size: int = 3) -> Cluster:
    """``size`` fresh nodes joined into one cluster (stop it with :meth:`Cluster.close`)."""
    root = Path(tempfile.mkdtemp(prefix="apollo-cluster-"))
    cluster = Cluster(root)
    try:
        cookie = root / ".erlang.cookie"
        cookie.write_text(secrets.token_hex(20))
        cookie.chmod(0o400)
        (root / "enabled_plugins").write_text("[].\n")
        (root / "rabbitmq-env.conf").write_text("")
        run = secrets.token_hex(3)
        for number in range(1, size + 1):
            node = Node(
                name=f"apollo{run}n{number}@localhost",
                amqp_port=_free_port(),
                dist_port=_free_port(),
                base=root / f"node{number}",
            )
            node.base.mkdir()
            (node.base / "rabbitmq.conf").write_text(
                f"listeners.tcp.1 = 127.0.0.1:{node.amqp_port}\n"
                "loopback_users = none\n"
                "log.console = false\n"
                "log.file.level = info\n"
            )
            (node.base / "advanced.config").write_text("[].\n")
            cluster.nodes.append(node)
        for node in cluster.nodes:
            cluster.start(node)
        for node in cluster.nodes:
            cluster.await_started(node)
        first = cluster.nodes[0]
        for node in cluster.nodes[1:]:
            cluster.ctl(node, "stop_app")
            cluster.ctl(node, "join_cluster", first.name)
            cluster.ctl(node, "start_app")
            cluster.ctl(node, "await_startup", "--timeout", "60", timeout=90)
    except BaseException:
        cluster.close()
        raise
    return cluster


@contextlib.contextmanager
def running_cluster(size: int = 3) -> Iterator[Cluster]:
    cluster = start_cluster(size)
    try:
        yield cluster
    finally:
        cluster.close()
