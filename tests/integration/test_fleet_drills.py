"""Failure drills on the local fleet (``tests/fleet_cluster.py``): a primary, its streaming
replica, PgBouncer in transaction mode, and three real ``apollo serve`` processes per drill
on a database of its own, driven over HTTP the way a load balancer spreads agents over
them.

The callers (:class:`Callers`) send each request to the processes in turn; one that gets
no answer or a 5xx sends it again, to the next process, until it is answered 2xx. HTTP has
no idempotency key, so what a 2xx answers is what is *acknowledged*, and a request sent
again after its answer was lost comes back ``deduplicated`` (the same text from the same
source is one entry). Each drill prints its counts (``-s`` shows them).
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import psycopg
import pytest
from attrs import define, field

from apollo_app.entrypoints.http.headers import CAUSAL_TOKEN_HEADER
from apollo_app.entrypoints.mcp.server import IDEMPOTENCY_KEY_META
from tests.fleet_cluster import FleetCluster, cluster_command
from tests.processes import alive
from tests.service_processes import ServiceProcesses

pytestmark = [pytest.mark.postgres, pytest.mark.cluster]

DIMENSION = 384
#: A request answered with neither 2xx nor a retryable failure ends the drill: a caller
#: that keeps failing this many times means the fleet does not recover.
ATTEMPTS = 200
PATIENCE = 120.0
#: What an MCP client sends with a JSON-RPC POST (the server answers in one JSON body).
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@define
class Callers:
    """HTTP callers spreading requests over the processes' APIs in turn, each request
    sent again (to the next process, after ``backoff`` s) until answered 2xx."""

    apis: list[str]
    http: httpx.AsyncClient
    backoff: float = 0.05
    attempts: int = 0
    #: 2xx answers by process (its index in ``apis``)
    answered: Counter[int] = field(factory=Counter)
    failures: Counter[str] = field(factory=Counter)
    #: set at the first failure
    failed: asyncio.Event = field(factory=asyncio.Event)
    #: the causal token of the latest answer that carried one
    token: str | None = None
    _turn: int = 0

    async def send(
        self,
        path: str,
        body: dict[str, Any],
        *,
        retry: bool = True,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """The 2xx answer's body; with ``retry`` False, a failure raises at once. A causal
        token in an answer is kept in ``token`` (the caller sends it back to read its own
        writes)."""
        for _ in range(ATTEMPTS):
            index = self._turn % len(self.apis)
            api = self.apis[index]
            self._turn += 1
            self.attempts += 1
            try:
                response = await self.http.post(f"{api}{path}", json=body, headers=headers)
            except httpx.TransportError as exc:
                failure = type(exc).__name__
            else:
                if response.is_success:
                    self.answered[index] += 1
                    self.token = response.headers.get(CAUSAL_TOKEN_HEADER, self.token)
                    return response.json()
                if response.status_code < 500:
                    raise AssertionError(f"{path}: {response.status_code} {response.text}")
                failure = f"{response.status_code} {response.json().get('error', '')}"
            self.failures[failure] += 1
            self.failed.set()
            if not retry:
                raise AssertionError(f"{path} failed: {failure}")
            if failure != "ConnectError":  # a refused connection: the next process at once
                await asyncio.sleep(self.backoff)  # a caller's back-off before it asks again
        raise AssertionError(f"{path} failed {ATTEMPTS} times: {dict(self.failures)}")


async def _spread(count: int, workers: int, work: Callable[[int], Awaitable[None]]) -> None:
    """Run ``work(i)`` for i in 0..count-1 on ``workers`` concurrent callers."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            await work(queue.get_nowait())

    await asyncio.gather(*(worker() for _ in range(workers)))


async def _integrity(conninfo: str) -> dict[str, int]:
    """What an ingest writes together, counted on the primary: any ingest cut half-way
    shows as a difference between these."""
    checks = {
        "entries": "SELECT count(*) FROM entries",
        "contents": "SELECT count(DISTINCT content) FROM entries",
        "without_one_origin": "SELECT count(*) FROM entries e WHERE (SELECT count(*) FROM"
        " evidence v WHERE v.entry_id = e.id AND v.kind = 'origin') <> 1",
        "scans": "SELECT count(*) FROM outbox WHERE kind = 'contradiction_scan'",
        "entries_scanned": "SELECT count(DISTINCT payload->>'entry_id') FROM outbox"
        " WHERE kind = 'contradiction_scan'",
        "ingest_rows": "SELECT count(*) FROM access_log WHERE action = 'ingest'",
        "ingest_rows_elsewhere": "SELECT count(*) FROM access_log a WHERE action = 'ingest'"
        " AND NOT EXISTS (SELECT 1 FROM entries e WHERE e.id = a.entry_id)",
        "expertise_count": "SELECT coalesce(sum(entry_count), 0) FROM expertise",
    }
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        found = {}
        for name, query in checks.items():
            row = await (await conn.execute(query)).fetchone()
            assert row is not None
            found[name] = int(row[0])
    return found


def _whole(counts: dict[str, int], entries: int) -> None:
    """Every entry written whole with its evidence, scan and bookkeeping; no bookkeeping
    without its entry."""
    assert entries == counts["entries"] == counts["contents"]
    assert 0 == counts["without_one_origin"]
    assert entries == counts["scans"] == counts["entries_scanned"]
    assert 0 == counts["ingest_rows_elsewhere"]
    assert counts["ingest_rows"] == counts["expertise_count"]


@pytest.fixture
async def database(fleet_cluster: FleetCluster) -> AsyncIterator[str]:
    """A new migrated database, replayed by the replica."""
    name = await fleet_cluster.server.create_database(dimension=DIMENSION)
    async with await psycopg.AsyncConnection.connect(
        fleet_cluster.primary.admin_conninfo, autocommit=True
    ) as conn:
        row = await (await conn.execute("SELECT pg_current_wal_flush_lsn()::text")).fetchone()
    assert row is not None
    await asyncio.to_thread(fleet_cluster.replica.wait_for, name, str(row[0]))
    yield name
    await fleet_cluster.server.drop_database(name)


async def _started(services: ServiceProcesses) -> ServiceProcesses:
    await asyncio.to_thread(services.start)
    return services


async def _stopped(services: ServiceProcesses) -> None:
    await asyncio.to_thread(services.stop)


def _metric(text: str, served_by: str) -> float:
    found = re.search(rf'apollo_replica_reads_total{{served_by="{served_by}"}} (\S+)', text)
    return float(found.group(1)) if found else 0.0


async def _replica_reads(http: httpx.AsyncClient, services: ServiceProcesses) -> list[float]:
    """Each process's reads served by the replica so far."""
    texts = [(await http.get(f"{s.base}/metrics")).text for s in services]
    return [_metric(text, "replica") for text in texts]


def test_scripts_cluster_serves_through_the_pooler_and_the_replica(
    fleet_cluster: FleetCluster,
) -> None:
    """What ``scripts/cluster up`` started: a write through one service process is found
    through the other, that query's searches ran on the replica, and ``status`` exits 0
    listing every part as running (``down`` is checked when the module ends)."""
    assert fleet_cluster.state_file is not None
    state = json.loads(fleet_cluster.state_file.read_text())
    first, second = (service["url"] for service in state["services"])
    with httpx.Client(timeout=30) as http:
        stored = http.post(f"{first}/ingest", json={"content": "a replica streams the WAL"})
        assert 201 == stored.status_code, stored.text
        found = http.post(f"{second}/query", json={"query": "replica streams", "min_confidence": 0})
        assert [stored.json()["entry_id"]] == [e["id"] for e in found.json()["entries"]]
        metrics = http.get(second.removesuffix("/api/apollo") + "/metrics").text
    assert 1.0 == _metric(metrics, "replica")
    status = cluster_command(fleet_cluster.state_file, "status")
    assert 0 == status.returncode, status.stdout
    assert 6 == status.stdout.count(" running "), status.stdout  # supervisor, 3 servers, 2
    assert "APOLLO_DATABASE_POOLER=transaction" in status.stdout


async def test_a_replica_stopped_under_a_query_load_fails_no_query(
    fleet_cluster: FleetCluster, database: str
) -> None:
    """Eight callers query three processes, never retrying; the replica is stopped once
    100 queries are answered and started again at 200, and the load goes on until every
    process reads on the replica again. Every query is answered 200 (a process skips the
    replica while it is down), and each process's reads return to the replica."""
    services = await _started(fleet_cluster.service_processes(3, database))
    answered = 0
    done = asyncio.Event()
    seen: dict[str, list[float]] = {}
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            callers = Callers(services.apis, http)
            for i in range(60):
                topic = ("BGP", "OSPF", "TLS")[i % 3]
                await callers.send("/ingest", {"content": f"{topic} note {i} on port {i}"})

            reached = {100: asyncio.Event(), 200: asyncio.Event()}

            async def query() -> None:
                nonlocal answered
                while not done.is_set():
                    body = {"query": f"{('BGP', 'OSPF', 'TLS')[answered % 3]} port"}
                    await callers.send("/query", {**body, "min_confidence": 0}, retry=False)
                    answered += 1
                    if answered in reached:
                        reached[answered].set()

            async def drill() -> None:
                try:
                    await reached[100].wait()
                    seen["before"] = await _replica_reads(http, services)
                    await asyncio.to_thread(fleet_cluster.replica.stop)
                    await reached[200].wait()
                    seen["down"] = await _replica_reads(http, services)
                    await asyncio.to_thread(fleet_cluster.replica.restart)
                    while True:  # the load goes on until every process is back on it
                        seen["after"] = await _replica_reads(http, services)
                        if all(a > d for a, d in zip(seen["after"], seen["down"], strict=True)):
                            return
                        await asyncio.sleep(0.1)  # polling the processes' metrics
                finally:
                    done.set()

            await asyncio.wait_for(asyncio.gather(drill(), *(query() for _ in range(8))), PATIENCE)
    finally:
        if fleet_cluster.replica.pid is None:
            await asyncio.to_thread(fleet_cluster.replica.restart)
        await _stopped(services)
    print(
        f"\nreplica drill: {answered} queries answered, {callers.attempts} requests sent,"
        f" failures {dict(callers.failures)}; reads on the replica per process: {seen}"
    )
    assert {} == dict(callers.failures)
    assert all(a > d for a, d in zip(seen["after"], seen["down"], strict=True))


async def test_pgbouncer_restarted_under_an_ingest_load_leaves_every_ingest_whole(
    fleet_cluster: FleetCluster, database: str
) -> None:
    """Twelve callers ingest 300 texts through three processes; after 100 are
    acknowledged PgBouncer is shut down at once (every client connection cut, with the
    transactions in flight), kept down until a request has failed, and started again.
    Each failed request is sent again; in the end every text is acknowledged and stored
    once, and every ingest is whole: its entry, origin evidence, contradiction scan,
    expertise count and access-log row, or none of them."""
    total = 300
    services = await _started(fleet_cluster.service_processes(3, database))
    acknowledged: dict[int, str] = {}
    deduplicated = 0
    restarted = asyncio.Event()
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            callers = Callers(services.apis, http)

            async def restart() -> None:
                await asyncio.to_thread(fleet_cluster.bouncer.stop, immediate=True)
                await callers.failed.wait()  # down until the fleet has noticed
                await asyncio.to_thread(fleet_cluster.bouncer.start)
                restarted.set()

            restarting: list[asyncio.Task[None]] = []

            async def ingest(i: int) -> None:
                nonlocal deduplicated
                answer = await callers.send(
                    "/ingest", {"content": f"pooler drill entry {i}: shard {i % 17} holds key {i}"}
                )
                assert answer["outcome"] in ("created", "deduplicated"), answer
                acknowledged[i] = answer["entry_id"]
                deduplicated += answer["outcome"] == "deduplicated"
                if len(acknowledged) == 100:
                    restarting.append(asyncio.create_task(restart()))

            await asyncio.wait_for(_spread(total, 12, ingest), PATIENCE)
            await asyncio.wait_for(asyncio.gather(*restarting), PATIENCE)
    finally:
        if fleet_cluster.bouncer.pid is None:
            await asyncio.to_thread(fleet_cluster.bouncer.start)
        await _stopped(services)
    counts = await _integrity(fleet_cluster.primary.conninfo(database))
    print(
        f"\npgbouncer drill: {total} texts, {len(acknowledged)} acknowledged,"
        f" {callers.attempts} requests sent, failures {dict(callers.failures)},"
        f" {deduplicated} acknowledged as deduplicated; store {counts}"
    )
    assert restarted.is_set() and callers.failures
    assert total == len(acknowledged) == len(set(acknowledged.values()))
    _whole(counts, total)
    assert total + deduplicated <= counts["ingest_rows"] <= total + callers.failures.total()


async def test_kill_9_of_one_of_three_processes_during_2000_ingests_stores_each_once(
    fleet_cluster: FleetCluster, database: str
) -> None:
    """Sixteen callers ingest 2,000 texts through three processes; after 600 are
    acknowledged, one process is killed with SIGKILL (its requests in flight die with it,
    committed or not), and after 1,200 it is started again on its port. Callers send what
    failed again to the next process. Every acknowledged text is stored exactly once,
    every ingest is whole, and the restarted process answers again."""
    total = 2_000
    services = await _started(fleet_cluster.service_processes(3, database))
    acknowledged: dict[int, str] = {}
    deduplicated = 0
    killed: list[int | None] = []
    restarting: list[asyncio.Task[None]] = []
    back: list[int] = []  # the restarted process's answers when it was back
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            callers = Callers(services.apis, http)

            async def ingest(i: int) -> None:
                nonlocal deduplicated
                answer = await callers.send(
                    "/ingest", {"content": f"fleet drill entry {i}: node n{i % 23} owns {i}"}
                )
                assert answer["outcome"] in ("created", "deduplicated"), answer
                acknowledged[i] = answer["entry_id"]
                deduplicated += answer["outcome"] == "deduplicated"
                if len(acknowledged) == 600 and not killed:
                    killed.append(services[1].pid)
                    services.kill9(1)
                elif len(acknowledged) == 1_200 and not restarting:
                    restarting.append(asyncio.create_task(restart()))

            async def restart() -> None:  # as an orchestrator does, on the same port
                await asyncio.to_thread(services.restart, 1)
                back.append(callers.answered[1])

            await asyncio.wait_for(_spread(total, 16, ingest), PATIENCE * 3)
            await asyncio.gather(*restarting)
    finally:
        await _stopped(services)
    counts = await _integrity(fleet_cluster.primary.conninfo(database))
    print(
        f"\nkill -9 drill: {total} texts, {len(acknowledged)} acknowledged,"
        f" {callers.attempts} requests sent, failures {dict(callers.failures)}, answers by"
        f" process {dict(callers.answered)} (process 1 back after {back}),"
        f" {deduplicated} acknowledged as deduplicated; store {counts}"
    )
    assert killed and killed[0] is not None and not alive(killed[0])
    assert back and callers.answered[1] > back[0], "the restarted process answered nothing"
    assert total == len(acknowledged) == len(set(acknowledged.values()))
    _whole(counts, total)
    assert total + deduplicated <= counts["ingest_rows"] <= total + callers.failures.total()


async def test_a_caller_reads_its_own_writes_on_a_replica_5_s_behind(
    fleet_cluster: FleetCluster, database: str
) -> None:
    """The replica applies each commit 5 s late (``recovery_min_apply_delay``). Ten times,
    a text is ingested through a process and queried at once with the causal token the
    ingest answered: it is found every time (the process waits up to
    APOLLO_REPLICA_WAIT_SECONDS for the replica to replay that commit, then reads on the
    primary), while the replica itself, asked straight after the ingest, does not have it
    yet. A query without a token goes to the replica at once and does not find it."""
    replica = fleet_cluster.replica
    await _replica_setting(replica.conninfo("postgres"), "5s")
    services = await _started(
        fleet_cluster.service_processes(1, database, replica_wait_seconds=0.3)
    )
    found: list[bool] = []
    stale: list[bool] = []
    on_replica: list[bool] = []
    try:
        async with (
            httpx.AsyncClient(timeout=30) as http,
            await psycopg.AsyncConnection.connect(
                replica.conninfo(database), autocommit=True
            ) as late,
        ):
            caller = Callers(services.apis, http)
            for i in range(10):
                # texts far apart: none is a near duplicate of another from this source
                text = f"lag probe {i} {uuid.uuid4().hex} {uuid.uuid4().hex}"
                stored = await caller.send("/ingest", {"content": text}, retry=False)
                assert "created" == stored["outcome"], stored
                cur = await late.execute(
                    "SELECT count(*) FROM entries WHERE id = %s", (stored["entry_id"],)
                )
                on_replica.append((await cur.fetchone()) == (1,))
                query = {"query": text, "min_confidence": 0, "limit": 20}  # every probe
                assert caller.token is not None, "the ingest answered no causal token"
                untokened = await caller.send("/query", query, retry=False)
                stale.append(stored["entry_id"] in [e["id"] for e in untokened["entries"]])
                answer = await caller.send(
                    "/query", query, retry=False, headers={CAUSAL_TOKEN_HEADER: caller.token}
                )
                found.append(stored["entry_id"] in [e["id"] for e in answer["entries"]])
            metrics = (await http.get(f"{services[0].base}/metrics")).text
    finally:
        await _replica_setting(replica.conninfo("postgres"), None)
        await _stopped(services)
    print(
        f"\nlag drill: own writes read back {sum(found)} of {len(found)} with the token,"
        f" {sum(stale)} without; on the replica"
        f" right after the ingest {sum(on_replica)} of {len(on_replica)}; the process's reads"
        f" on the primary {_metric(metrics, 'primary')}, on the replica"
        f" {_metric(metrics, 'replica')}"
    )
    assert all(found)
    assert not all(on_replica), "the replica was never behind: the drill showed nothing"
    assert not all(stale), "a query without a token never read the late replica"


async def _replica_setting(conninfo: str, delay: str | None) -> None:
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        if delay is None:
            await conn.execute("ALTER SYSTEM RESET recovery_min_apply_delay")
        else:
            await conn.execute(f"ALTER SYSTEM SET recovery_min_apply_delay = '{delay}'")
        await conn.execute("SELECT pg_reload_conf()")


def _fallbacks(text: str) -> dict[str, float]:
    found = re.findall(r'apollo_replica_fallbacks_total\{cause="([^"]+)"\} (\S+)', text)
    return {cause: float(count) for cause, count in found}


async def test_under_a_mix_of_writes_nine_queries_in_ten_run_on_the_replica(
    fleet_cluster: FleetCluster, database: str
) -> None:
    """Forty callers at once through two processes and the pooler, one ingest to two
    queries (150 ingests, 300 queries): each caller's query after its own ingest presents
    the ingest's causal token and goes through the other process, and finds its write;
    the other queries present none. Causal tokens are kept per caller, not per process, so
    a steady mix of writes does not send the reads to the primary: at least nine in ten
    queries run on the replica, with no error."""
    services = await _started(fleet_cluster.service_processes(2, database))
    own_found: list[bool] = []
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            before = [(await http.get(f"{s.base}/metrics")).text for s in services]

            async def caller(n: int) -> None:
                callers = Callers(services.apis, http)
                text = f"mix note {n}: {uuid.uuid4().hex} on shard {n % 11}"
                stored = await callers.send("/ingest", {"content": text}, retry=False)
                assert callers.token is not None, "the ingest answered no causal token"
                mine = await callers.send(
                    "/query",
                    {"query": text, "min_confidence": 0, "limit": 20},
                    retry=False,
                    headers={CAUSAL_TOKEN_HEADER: callers.token},
                )
                own_found.append(stored["entry_id"] in [e["id"] for e in mine["entries"]])
                other = f"mix note shard {(n + 5) % 11}"
                await callers.send("/query", {"query": other, "min_confidence": 0}, retry=False)

            await asyncio.wait_for(_spread(150, 40, caller), PATIENCE)
            after = [(await http.get(f"{s.base}/metrics")).text for s in services]
    finally:
        await _stopped(services)
    on_replica = sum(
        _metric(a, "replica") - _metric(b, "replica") for a, b in zip(after, before, strict=True)
    )
    on_primary = sum(
        _metric(a, "primary") - _metric(b, "primary") for a, b in zip(after, before, strict=True)
    )
    causes = [_fallbacks(text) for text in after]
    share = on_replica / (on_replica + on_primary)
    print(
        f"\nmixed drill: 150 ingests, 300 queries, 40 callers; queries on the replica"
        f" {on_replica:.0f}, on the primary {on_primary:.0f} ({share:.1%}); fallbacks by"
        f" cause per process {causes}; own writes found {sum(own_found)} of {len(own_found)}"
    )
    assert 300 == on_replica + on_primary
    assert all(own_found) and 150 == len(own_found)
    assert share >= 0.9


async def test_mcp_calls_through_a_killed_process_and_a_restarted_pooler_apply_once(
    fleet_cluster: FleetCluster, database: str
) -> None:
    """Eight MCP clients make 400 store_knowledge tool calls through two processes, each
    call with its idempotency key in ``_meta``; a call that gets no answer, a 5xx or a
    tool error of a transient kind is sent again, with the same key, to the other process.
    After 100 acknowledged calls one process is killed with SIGKILL, and started again
    after 150; after 250 PgBouncer is shut down at once, kept down until a process has
    answered a call with the store out of reach, and started again. Every call is
    acknowledged (a retry of one that had committed is a replay: it answers with the entry
    the first made, as ``deduplicated``, and writes nothing), and each is applied exactly
    once: 400 entries, 400 ingest rows in the access log (a dedup that was not a replay
    would add one), every ingest whole."""
    total = 400
    services = await _started(fleet_cluster.service_processes(2, database))
    acknowledged: dict[int, str] = {}
    failures: Counter[str] = Counter()
    unreachable = asyncio.Event()  # a process answered without the store behind it
    events: list[asyncio.Task[None]] = []
    sent = replayed = 0
    try:
        async with httpx.AsyncClient(timeout=30) as http:

            async def call(i: int) -> None:
                nonlocal sent, replayed
                body = {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "tools/call",
                    "params": {
                        "name": "store_knowledge",
                        "arguments": {"content": f"mcp drill entry {i}: rack r{i % 13} holds {i}"},
                        "_meta": {IDEMPOTENCY_KEY_META: f"mcp-drill-{i}"},
                    },
                }
                for attempt in range(ATTEMPTS):
                    base = services[(i + attempt) % 2].base
                    sent += 1
                    try:
                        response = await http.post(f"{base}/mcp", json=body, headers=MCP_HEADERS)
                    except httpx.TransportError as exc:
                        failure = type(exc).__name__
                    else:
                        result = response.json().get("result") if response.is_success else None
                        if result is not None and not result.get("isError"):
                            structured = result["structuredContent"]
                            assert structured["outcome"] in ("created", "deduplicated"), structured
                            acknowledged[i] = structured["entry_id"]
                            replayed += structured["outcome"] == "deduplicated"
                            break
                        error = (result or {}).get("structuredContent", {}).get("error", {})
                        failure = f"{response.status_code} {error.get('type', response.text[:80])}"
                        assert error.get("type") not in ("validation_error", "forbidden"), error
                        unreachable.set()
                    failures[failure] += 1
                    await asyncio.sleep(0.05)  # a client's back-off before it asks again
                else:
                    raise AssertionError(f"call {i} failed {ATTEMPTS} times: {dict(failures)}")
                if len(acknowledged) == 100:
                    events.append(asyncio.create_task(asyncio.to_thread(services.kill9, 1)))
                elif len(acknowledged) == 150:
                    events.append(asyncio.create_task(asyncio.to_thread(services.restart, 1)))
                elif len(acknowledged) == 250:
                    events.append(asyncio.create_task(restart_pooler()))

            async def restart_pooler() -> None:
                await asyncio.gather(*events[:2])  # the process is back first
                unreachable.clear()
                await asyncio.to_thread(fleet_cluster.bouncer.stop, immediate=True)
                await unreachable.wait()
                await asyncio.to_thread(fleet_cluster.bouncer.start)

            await asyncio.wait_for(_spread(total, 8, call), PATIENCE * 2)
            await asyncio.wait_for(asyncio.gather(*events), PATIENCE)
    finally:
        if fleet_cluster.bouncer.pid is None:
            await asyncio.to_thread(fleet_cluster.bouncer.start)
        await _stopped(services)
    counts = await _integrity(fleet_cluster.primary.conninfo(database))
    print(
        f"\nMCP drill: {total} calls, {len(acknowledged)} acknowledged ({replayed} as the"
        f" replay of a retry), {sent} requests sent, failures {dict(failures)}; store {counts}"
    )
    assert 3 == len(events) and unreachable.is_set()
    assert total == len(acknowledged) == len(set(acknowledged.values()))
    _whole(counts, total)
    assert total == counts["ingest_rows"], "a retried call was applied twice"
