"""Test doubles shared by the suites: a keyed embedder, a fault-injecting store, a fake
LLM, an interleaving store that pauses use cases at named points, and the entry the store
tests write."""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import inspect
import math
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import numpy as np
import pytest

from apollo_domain.errors import PersistenceFailed, StoreUnavailable


async def eventually_within(
    patience: float, check: Callable[[], Awaitable[Any]], what: str, *, every: float = 0.02
) -> Any:
    """Poll ``check`` (every ``every`` seconds) until it returns something truthy, and
    return that; fail the test, naming ``what``, after ``patience`` seconds."""
    deadline = asyncio.get_running_loop().time() + patience
    while True:
        value = await check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"never happened within {patience:g}s: {what}")
        await asyncio.sleep(every)


def fast_retry(attempt: int) -> float:
    """A redelivery back-off for tests: 20 ms whatever the attempt."""
    return 0.02


def unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


def at_cosine(base: Sequence[float], cosine: float, axis: int) -> list[float]:
    """A unit vector whose cosine with unit ``base`` is exactly ``cosine``, tilted toward the
    basis vector ``axis`` (which must be orthogonal to ``base``)."""
    b = np.asarray(unit(base), dtype=np.float64)
    e = np.zeros_like(b)
    e[axis] = 1.0
    e = e - (e @ b) * b
    e = e / np.linalg.norm(e)
    v = cosine * b + math.sqrt(max(0.0, 1.0 - cosine * cosine)) * e
    return [float(x) for x in v]


def nested(levels: int, *, kind: type = dict) -> Any:
    """A JSON value ``levels`` levels deep (level 1 is the value itself): ``{"a": {"a": 1}}``
    for 2, or ``[[1]]`` with ``kind=list``. Built without recursion."""
    value: Any = 1
    for _ in range(levels):
        value = {"a": value} if kind is dict else [value]
    return value


async def footprint(apollo: Any) -> tuple[Any, ...]:
    """What any write would change: entries by status, relations, average confidence (a
    boost moves it), access-log rows and pending outbox items."""
    stats = await apollo.stats()
    async with apollo.store.unit_of_work() as uow:
        logged = await uow.access_log.count()
        pending = await uow.outbox.pending()
    return (
        dict(stats.by_status),
        stats.total_relations,
        stats.average_confidence,
        logged,
        pending,
    )


class KeyedEmbedder:
    """Returns the vector registered for a text, else a deterministic pseudo-random unit
    vector (nearly orthogonal to everything else in high dimension)."""

    def __init__(self, dimension: int = 16, table: Mapping[str, Sequence[float]] | None = None):
        self.dimension = dimension
        self.model_id = f"keyed-test-{dimension}"
        self.table: dict[str, list[float]] = {k: unit(v) for k, v in (table or {}).items()}
        self.calls = 0

    def set(self, text: str, vector: Sequence[float]) -> None:
        self.table[text] = unit(vector)

    def basis(self, axis: int) -> list[float]:
        v = [0.0] * self.dimension
        v[axis] = 1.0
        return v

    async def embed(self, texts: Sequence[str]) -> list[Sequence[float]]:
        self.calls += 1
        out: list[Sequence[float]] = []
        for text in texts:
            if text in self.table:
                out.append(self.table[text])
                continue
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
            rng = np.random.default_rng(seed)
            out.append(unit(rng.standard_normal(self.dimension).tolist()))
        return out


class _Proxy:
    def __init__(self, inner: Any, part: str, faults: FaultPlan) -> None:
        self._inner = inner
        self._part = part
        self._faults = faults

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr
        key = f"{self._part}.{name}"

        async def call(*args: Any, **kwargs: Any) -> Any:
            self._faults.calls.append(key)
            self._faults.raise_if_failing(key)
            return await attr(*args, **kwargs)

        return call


class FaultPlan:
    def __init__(self) -> None:
        self.failing: set[str] = set()
        self.unavailable: set[str] = set()
        self.calls: list[str] = []
        self._once: dict[str, dict[int, type[Exception]]] = {}

    def fail_once(
        self, key: str, *, call: int = 1, error: type[Exception] = PersistenceFailed
    ) -> None:
        """Make the ``call``-th call of ``key`` from now on fail with ``error``, that call
        only (each call named so fails)."""
        self._once.setdefault(key, {})[self.calls.count(key) + call] = error

    def raise_if_failing(self, key: str) -> None:
        """Raise when this call of ``key`` (just recorded) is one that fails."""
        error = self._once.get(key, {}).pop(self.calls.count(key), None)
        if key in self.failing and error is None:
            error = PersistenceFailed
        if error is not None:
            raise error(f"injected failure in {key}")


class _FaultyUnitOfWork:
    PARTS = (
        "entries",
        "relations",
        "evidence",
        "expertise",
        "access_log",
        "credibility",
        "outbox",
        "processed",
        "graph",
        "episodes",
    )

    def __init__(self, inner: Any, faults: FaultPlan) -> None:
        self._inner = inner
        self._faults = faults

    async def __aenter__(self) -> _FaultyUnitOfWork:
        await self._inner.__aenter__()
        for part in self.PARTS:
            setattr(self, part, _Proxy(getattr(self._inner, part), part, self._faults))
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._inner.__aexit__(*exc)

    async def commit(self) -> None:
        self._faults.calls.append("commit")
        self._faults.raise_if_failing("commit")
        await self._inner.commit()

    def savepoint(self) -> AbstractAsyncContextManager[None]:
        return self._inner.savepoint()

    async def read_concurrently(
        self, reads: Sequence[Callable[[Any], Awaitable[Any]]]
    ) -> list[Any]:
        return [await read(self) for read in reads]  # through this wrapper's repositories


class FaultInjectingStore:
    """Wraps any Store: named repository methods (``"evidence.add"``) raise
    :class:`PersistenceFailed`, named parts fail preflight."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.faults = FaultPlan()
        self.directory = inner.directory

    def reading(self) -> _FaultyUnitOfWork:
        return self.unit_of_work()

    def unit_of_work(self) -> _FaultyUnitOfWork:
        return _FaultyUnitOfWork(self.inner.unit_of_work(), self.faults)

    async def preflight(self, parts: Collection[str]) -> None:
        for part in parts:
            if part in self.faults.unavailable:
                raise StoreUnavailable(f"{part} is unavailable")
        await self.inner.preflight(parts)

    async def close(self) -> None:
        await self.inner.close()


class SettlementRecorder:
    """Wraps a MessageBus: every settlement of a consumed delivery (``ack``, ``reject``,
    ``retry``) as ``(message_id, how)``, in order, and each queue's prefetch."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.settlements: list[tuple[str, str]] = []
        self.prefetch: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def consume(self, queue: str, handler: Any, *, prefetch: int = 10) -> Any:
        self.prefetch[queue] = prefetch

        async def recorded(delivery: Any) -> None:
            await handler(_RecordedDelivery(delivery, self.settlements))

        return await self.inner.consume(queue, recorded, prefetch=prefetch)

    def settled(self, how: str) -> list[str]:
        """The message ids settled ``how``, in order."""
        return [message_id for message_id, done in self.settlements if done == how]


class _RecordedDelivery:
    def __init__(self, inner: Any, log: list[tuple[str, str]]) -> None:
        self._inner = inner
        self._log = log
        self.message = inner.message

    async def ack(self) -> None:
        self._log.append((self.message.message_id, "ack"))
        await self._inner.ack()

    async def reject(self, reason: str) -> None:
        self._log.append((self.message.message_id, "reject"))
        await self._inner.reject(reason)

    async def retry(self, reason: str) -> None:
        self._log.append((self.message.message_id, "retry"))
        await self._inner.retry(reason)

    async def delay(self, seconds: float, reason: str) -> None:
        self._log.append((self.message.message_id, "delay"))
        await self._inner.delay(seconds, reason)


class ScriptedLLM:
    """A deterministic GasLanguageModel: facts are the response's sentences."""

    def __init__(
        self,
        relations: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]] | None = None,
        default_relation: Mapping[str, Any] | None = None,
        synthesis: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self.relations = dict(relations or {})
        self.default_relation = default_relation
        self.synthesis = list(synthesis)
        self.calls: list[str] = []

    async def comprehend(
        self, messages: Sequence[Mapping[str, Any]], response: str
    ) -> list[Mapping[str, Any]]:
        self.calls.append("comprehend")
        return [
            {"content": s.strip() + ".", "content_type": "fact"}
            for s in response.split(".")
            if s.strip()
        ]

    async def relate(self, fact: str, candidate: str) -> list[Mapping[str, Any]]:
        self.calls.append("relate")
        if (fact, candidate) in self.relations:
            return list(self.relations[(fact, candidate)])
        return [self.default_relation] if self.default_relation else []

    async def synthesize(self, facts: Sequence[str]) -> list[Mapping[str, Any]]:
        self.calls.append("synthesize")
        return list(self.synthesis)

    async def anticipate(self, facts: Sequence[str]) -> list[str]:
        self.calls.append("anticipate")
        return [f"What follows from: {facts[0]}?"] if facts else []


class Interleaving:
    """Forces a chosen interleaving of concurrent use cases, on any store.

    Wraps a Store (and optionally other ports with :meth:`wrap`) so that every
    repository call, ``enter`` (before the unit of work opens) and ``commit`` is a
    named *point* (``"entries.update"``, ``"judge.contradicts"``). Each use case runs as
    a named *actor* (:meth:`run`). A test can

    - :meth:`hold` an actor at a point: it pauses there, before the call, until the gate
      is released;
    - wait until an actor has :meth:`reached` a point (arrived, before the call runs).

    Nothing sleeps. A correct store may block the second actor (a row lock, or the
    in-memory store's serialized units of work) until the first commits, so tests wait
    for the second actor to *reach* the point where it would block, or to finish, then
    release the first: :meth:`blocked_or_done`. ``timeout`` only turns a deadlock into a
    failure.
    """

    PARTS = _FaultyUnitOfWork.PARTS

    def __init__(self, inner: Any, *, timeout: float = 20.0) -> None:
        self.inner = inner
        self.directory = inner.directory
        self.timeout = timeout
        self.trace: list[tuple[str, str]] = []
        self._actor: contextvars.ContextVar[str | None] = contextvars.ContextVar(
            "apollo_test_actor", default=None
        )
        self._arrivals: dict[tuple[str, str], asyncio.Event] = {}
        self._gates: dict[tuple[str, str], asyncio.Event] = {}
        self._monitor: Any = None

    # -- the test's side ---------------------------------------------------------
    def run(self, actor: str, coro: Any) -> Any:
        """Start ``coro`` as a task acting as ``actor``; returns the task."""

        async def acting() -> Any:
            self._actor.set(actor)
            return await coro

        return asyncio.get_running_loop().create_task(acting(), name=actor)

    def hold(self, actor: str, point: str) -> Any:
        """Pause ``actor`` the next time it reaches ``point``; returns the gate (an
        ``asyncio.Event``: ``gate.set()`` releases it). An earlier arrival at ``point`` is
        forgotten: :meth:`reached` then waits for the held one (e.g. the second unit of work
        a use case enters)."""
        gate = asyncio.Event()
        self._gates[(actor, point)] = gate
        self._arrivals[(actor, point)] = asyncio.Event()
        return gate

    async def reached(self, actor: str, point: str, *, or_done: Any = None) -> bool:
        """Wait until ``actor`` arrives at ``point`` (True) or, given ``or_done``, that
        task finishes first (False)."""
        arrived = asyncio.ensure_future(self._arrival(actor, point).wait())
        waiting = {arrived} if or_done is None else {arrived, or_done}
        done, _ = await asyncio.wait(
            waiting, timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if not done:
            arrived.cancel()
            raise AssertionError(f"{actor} never reached {point} (deadlock?)")
        if arrived in done:
            return True
        arrived.cancel()
        return False

    async def blocked_or_done(self, task: Any) -> bool:
        """Wait until ``task`` finishes (False) or someone waits for a lock another unit of
        work holds (True): a row lock on PostgreSQL (``pg_stat_activity``), the serialized
        unit of work in memory. Polls the store's own lock state until ``timeout``."""
        deadline = asyncio.get_running_loop().time() + self.timeout
        while not task.done():
            if await self._lock_waiters() > 0:
                return True
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{task.get_name()} neither finished nor blocked")
            await asyncio.sleep(0.005)
        return False

    async def finish(self, *tasks: Any) -> list[Any]:
        """Await ``tasks`` (results or exceptions, in order), failing on a deadlock."""
        return list(
            await asyncio.wait_for(
                asyncio.gather(*tasks, return_exceptions=True), timeout=self.timeout
            )
        )

    def wrap(self, port: Any, name: str) -> Any:
        """``port`` with each async method a point ``"<name>.<method>"``."""
        return _PointProxy(port, name, self)

    # -- the store's side --------------------------------------------------------
    def _arrival(self, actor: str, point: str) -> Any:
        return self._arrivals.setdefault((actor, point), asyncio.Event())

    async def at(self, point: str) -> None:
        actor = self._actor.get()
        if actor is None:
            return
        self.trace.append((actor, point))
        self._arrival(actor, point).set()
        gate = self._gates.pop((actor, point), None)
        if gate is not None:
            await gate.wait()

    def reading(self) -> _InterleavedUnitOfWork:
        return self.unit_of_work()

    def unit_of_work(self) -> _InterleavedUnitOfWork:
        return _InterleavedUnitOfWork(self.inner.unit_of_work(), self)

    async def preflight(self, parts: Collection[str]) -> None:
        await self.inner.preflight(parts)

    async def _lock_waiters(self) -> int:
        if self._monitor is None and getattr(self.inner, "_conninfo", None) is not None:
            self._monitor = await lock_monitor(self.inner)
        return await lock_waiters(self.inner, self._monitor)

    async def close(self) -> None:
        if self._monitor is not None:
            await self._monitor.close()
        await self.inner.close()


async def lock_monitor(store: Any) -> Any:
    """An autocommit connection to a PostgreSQL store's database that asks
    :func:`lock_waiters` (no prepared statements: the store may lead to a transaction-mode
    pooler)."""
    import psycopg

    return await psycopg.AsyncConnection.connect(
        store._conninfo, autocommit=True, prepare_threshold=None
    )


async def lock_waiters(store: Any, monitor: Any = None) -> int:
    """How many units of work of ``store`` wait for a lock another one holds: the in-memory
    store's one lock that serializes them, or PostgreSQL's locks (``pg_stat_activity``),
    asked on ``monitor`` (:func:`lock_monitor`; None: a connection opened for the
    question)."""
    if getattr(store, "_conninfo", None) is None:  # in memory: one unit of work at a time
        return int(store.waiting)
    if monitor is None:
        async with await lock_monitor(store) as opened:
            return await lock_waiters(store, opened)
    cursor = await monitor.execute(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    row = await cursor.fetchone()
    return int(row[0]) if row else 0


class _PointProxy:
    def __init__(self, inner: Any, part: str, points: Interleaving) -> None:
        self._inner = inner
        self._part = part
        self._points = points

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not inspect.iscoroutinefunction(attr):
            return attr
        point = f"{self._part}.{name}"

        async def call(*args: Any, **kwargs: Any) -> Any:
            await self._points.at(point)
            return await attr(*args, **kwargs)

        return call


class _InterleavedUnitOfWork:
    def __init__(self, inner: Any, points: Interleaving) -> None:
        self._inner = inner
        self._points = points

    async def __aenter__(self) -> _InterleavedUnitOfWork:
        await self._points.at("enter")
        await self._inner.__aenter__()
        for part in Interleaving.PARTS:
            setattr(self, part, _PointProxy(getattr(self._inner, part), part, self._points))
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._inner.__aexit__(*exc)

    async def commit(self) -> None:
        await self._points.at("commit")
        await self._inner.commit()

    def savepoint(self) -> AbstractAsyncContextManager[None]:
        return self._inner.savepoint()

    async def read_concurrently(
        self, reads: Sequence[Callable[[Any], Awaitable[Any]]]
    ) -> list[Any]:
        return [await read(self) for read in reads]  # through this wrapper's repositories
