"""The PostgreSQL + pgvector store: one pooled connection and one transaction per unit of work."""

from __future__ import annotations

import asyncio
import logging
import select
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Self, TypeVar

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from apollo_domain.causal import CausalToken, current_scope, latest
from apollo_domain.errors import (
    PersistenceFailed,
    StoreBusy,
    StoreUnavailable,
    ValidationError,
)
from apollo_domain.ports import Clock, Reads
from apollo_domain.rates import WriteRate

from . import schema
from .entries import PostgresEntryRepository
from .errors import (
    CONNECTION_BUDGET,
    EmbedderMismatch,
    SchemaNotCurrent,
    refused_for_slots,
    translated,
)
from .graph import PostgresEntityGraph
from .rates import PostgresWriteBudget
from .reembed import PostgresReembedding
from .repositories import (
    PostgresAccessLog,
    PostgresCredibilityRegistry,
    PostgresEpisodeRepository,
    PostgresEvidenceRepository,
    PostgresExpertiseRepository,
    PostgresIdentityDirectory,
    PostgresOutbox,
    PostgresProcessedKeys,
    PostgresRelationRepository,
)
from .session import Session

PART_TABLES: Mapping[str, str] = {
    "entries": "entries",
    "evidence": "evidence",
    "expertise": "expertise",
    "access_log": "access_log",
    "relations": "relations",
    "outbox": "outbox",
    "processed": "processed_keys",
    "credibility": "source_credibility",
    "graph": "entities",
    "episodes": "episodes",
}
T = TypeVar("T")
log = logging.getLogger("apollo.postgres")
#: How long a replica that failed is left alone before it is tried again.
REPLICA_RETRY_SECONDS = 1.0
#: How long a read waits for a connection to the replica before it runs on the primary.
REPLICA_CONNECT_SECONDS = 1.0
#: Why a read meant for the replica ran on the primary (the ``cause`` of the metrics):
#: no replica to read on (down, refusing connections, or left alone after failing), a
#: replica that had not replayed the caller's causal token within the replica wait, or a
#: replica that failed the read.
NO_REPLICA = "no_replica"
WAIT_TIMED_OUT = "wait_timed_out"
REPLICA_ERROR = "replica_error"
FALLBACK_CAUSES = (NO_REPLICA, WAIT_TIMED_OUT, REPLICA_ERROR)
#: What a replica's failures may be: a read that meets one runs on the primary instead.
_REPLICA_FAILURES = (StoreUnavailable, StoreBusy, PersistenceFailed)
#: How often a read waiting for the replica asks how far it has replayed.
_CATCH_UP_POLL_SECONDS = 0.005
#: What a caller refused by a busy store is told to wait before trying again.
_RETRY_AFTER_SECONDS = 1.0
#: How often a pool refused connections by the server says so in the log, at most.
_REFUSAL_LOG_SECONDS = 10.0


#: How far a replica has replayed, asked on one of its sessions (None: it cannot say).
ReplayProbe = Callable[[Session], Awaitable[CausalToken | None]]


async def replayed_position(session: Session) -> CausalToken | None:
    """The WAL position the server at ``session`` has replayed; None on a primary."""
    position = await session.value("SELECT pg_last_wal_replay_lsn()::text")
    return None if position is None else CausalToken(_lsn(str(position)))


class _Missed(Exception):
    """A read the replica could not take, and why (one of :data:`FALLBACK_CAUSES`)."""

    def __init__(self, cause: str, error: Exception) -> None:
        super().__init__(f"{cause}: {error}")
        self.cause = cause
        self.error = error


class _Refusals:
    """When the server (or the pooler) last refused one of a pool's new connections for
    want of connection slots: a pool that cannot grow for that reason makes its callers
    wait out the timeout, and the error they get then names the budget instead of a busy
    store. Logged (naming the settings) at most every :data:`_REFUSAL_LOG_SECONDS`."""

    def __init__(self, pool_max: int) -> None:
        self.pool_max = pool_max
        self.last = float("-inf")
        self._logged = float("-inf")

    def since(self, started: float) -> bool:
        return self.last >= started

    def connection_class(self) -> type[psycopg.AsyncConnection[Any]]:
        """The pool's connection class: a connection that records such a refusal."""
        refusals = self

        class RecordingConnection(psycopg.AsyncConnection[Any]):
            @classmethod
            async def connect(cls, *args: Any, **kwargs: Any) -> Self:
                try:
                    return await super().connect(*args, **kwargs)
                except psycopg.OperationalError as exc:
                    if refused_for_slots(exc):
                        refusals.refused()
                    raise

        return RecordingConnection

    def refused(self) -> None:
        self.last = now = time.monotonic()
        if now - self._logged >= _REFUSAL_LOG_SECONDS:
            self._logged = now
            log.warning(
                "a new connection of this process's pool (APOLLO_POOL_MAX=%d) was refused. %s",
                self.pool_max,
                CONNECTION_BUDGET,
            )


class _Lending:
    """A pool, how many of its connections are out, and when it last lent one."""

    def __init__(self, pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]]) -> None:
        self.pool = pool
        self.lent = 0
        self.last_lent = float("-inf")


class _Reader:
    """The read repositories over a connection of their own (:meth:`read_concurrently`)."""

    def __init__(self, store: PostgresStore, session: Session) -> None:
        self.session = session
        self.entries = PostgresEntryRepository(
            session, store.ef_search, store.max_scan_tuples, store.ingest_ef_search
        )
        self.graph = PostgresEntityGraph(session)


class PostgresUnitOfWork:
    """One pooled connection, one transaction; rolled back unless :meth:`commit` ran."""

    entries: PostgresEntryRepository
    relations: PostgresRelationRepository
    evidence: PostgresEvidenceRepository
    expertise: PostgresExpertiseRepository
    access_log: PostgresAccessLog
    credibility: PostgresCredibilityRegistry
    outbox: PostgresOutbox
    processed: PostgresProcessedKeys
    graph: PostgresEntityGraph
    episodes: PostgresEpisodeRepository

    def __init__(self, store: PostgresStore, *, reading: bool = False) -> None:
        self._store = store
        self._reading = reading
        self._stack: AsyncExitStack | None = None
        self._session: Session | None = None
        #: The readers of :meth:`read_concurrently` still ending their transactions.
        self._readers_ending: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> PostgresUnitOfWork:
        if self._stack is not None:
            raise PersistenceFailed("a unit of work can be entered only once")
        self._stack = AsyncExitStack()
        opening = self._store._reading_session() if self._reading else self._store._session()
        session = self._session = await self._stack.enter_async_context(opening)
        if not self._reading:
            session.begin()  # sent with the first statement
        store = self._store
        self.entries = PostgresEntryRepository(
            session, store.ef_search, store.max_scan_tuples, store.ingest_ef_search
        )
        self.relations = PostgresRelationRepository(session)
        self.evidence = PostgresEvidenceRepository(session)
        self.expertise = PostgresExpertiseRepository(session)
        self.access_log = PostgresAccessLog(session)
        self.credibility = PostgresCredibilityRegistry(session)
        self.outbox = PostgresOutbox(session)
        self.processed = PostgresProcessedKeys(session)
        self.graph = PostgresEntityGraph(session)
        self.episodes = PostgresEpisodeRepository(session)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._stack is None:
            raise PersistenceFailed("a unit of work left before it was entered")
        try:
            if self._session is not None:
                await self._session.end()  # rolls back unless committed
        finally:
            try:
                await self._stack.aclose()
            finally:
                await asyncio.gather(*self._readers_ending, return_exceptions=True)

    async def commit(self) -> None:
        if self._session is None or not self._session.open:
            raise PersistenceFailed("commit outside an open unit of work")
        # the deferred writes and COMMIT: one round trip (with the WAL position reached
        # when a caller keeps it as its causal token, or reads may go to a replica: a
        # later read there waits until it replays it)
        scope = current_scope()
        wanted = scope is not None or self._store._replica is not None
        written = await self._session.commit(position=wanted)
        if self.entries.added:
            self._store.statistics.grew(self.entries.added)
        if written is not None:
            token = CausalToken(_lsn(written))
            self._store._wrote(token)
            if scope is not None:
                scope.observe(token)

    async def read_concurrently(self, reads: Sequence[Callable[[Reads], Awaitable[T]]]) -> list[T]:
        if self._session is None or not self._session.open:
            raise PersistenceFailed("read outside an open unit of work")
        self._session.check_open()
        if not reads:
            return []
        on_replica = await self._store._replica_reads(reads)
        if on_replica is not None:
            return on_replica
        store = self._store
        if store.transaction_pooler:
            # Behind a transaction-mode pooler its server connections are a second, hidden
            # pool: a unit of work holding one (its transaction begun) while its readers
            # wait for more could deadlock with others doing the same. The reads run apart
            # only while this unit of work has sent nothing, so holds no server connection,
            # and then every one of them; those the pool cannot spare a connection for run
            # on this unit of work's connection once the others have ended.
            spare = 0 if self._session.in_transaction else store._reserve(len(reads))
            apart_ones, in_turn_ones = range(spare), [*range(spare, len(reads))]
        else:
            # The first read runs on this unit of work's connection; each other one on a
            # spare connection of the pool when there is one (reserved now, so this never
            # waits for a connection another unit of work holds), else after the first.
            spare = store._reserve(len(reads) - 1)
            apart_ones, in_turn_ones = range(1, 1 + spare), [0, *range(1 + spare, len(reads))]
        done: dict[int, T] = {}
        ending: list[asyncio.Task[None]] = []

        async def in_turn() -> None:
            for i in in_turn_ones:
                done[i] = await reads[i](self)

        async def apart(i: int) -> None:
            reader = AsyncExitStack()
            try:
                done[i] = await reads[i](await reader.enter_async_context(store._reader()))
            except BaseException:
                await reader.aclose()
                raise
            # The read-only transaction is rolled back and the connection returned while
            # the query goes on (a round trip off its path); this unit of work waits for
            # it before it ends.
            ending.append(asyncio.create_task(reader.aclose()))

        async def release() -> None:
            await asyncio.gather(*ending, return_exceptions=True)
            store._release(spare)

        try:
            if store.transaction_pooler:
                outcomes = await asyncio.gather(
                    *(apart(i) for i in apart_ones), return_exceptions=True
                )
                if not any(isinstance(o, BaseException) for o in outcomes):
                    outcomes.extend(await asyncio.gather(in_turn(), return_exceptions=True))
            else:
                outcomes = await asyncio.gather(
                    in_turn(), *(apart(i) for i in apart_ones), return_exceptions=True
                )
        finally:
            self._readers_ending.append(asyncio.create_task(release()))
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return [done[i] for i in range(len(reads))]

    @asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        if self._session is None:
            raise PersistenceFailed("savepoint outside an open unit of work")
        session = self._session
        await session.flush()  # what was written before the savepoint stays
        with translated():
            async with session.conn.transaction():
                try:
                    yield
                except BaseException:
                    session.discard()  # deferred inside it: rolled back with it
                    raise
                await session.flush()


def _lsn(position: str) -> int:
    """A ``pg_lsn`` text (``16/B374D848``) as a number, in WAL order."""
    high, _, low = position.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


async def _check(conn: psycopg.AsyncConnection[Any]) -> None:
    """The pool's check of a connection it hands out. A connection idle in the pool has
    nothing to read: a server that closed it (restarted, or ended the session) has left its
    error and end of stream on the socket, and only then does the check cost a round trip
    (which raises, so the pool replaces the connection). A quiet socket is used as is."""
    readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    if readable:
        await AsyncConnectionPool.check_connection(conn)


def connection_options(transaction_pooler: bool) -> dict[str, Any]:
    """The keyword arguments of the store's connections. Behind a transaction-mode pooler
    no server-side prepared statement is made (``prepare_threshold=None``): the next
    transaction may run on a server connection that never saw it. The store's other
    per-connection state is safe there: its search settings are ``set_config(..., true)``
    and ``SET LOCAL`` (they end with their transaction), its advisory locks are
    ``pg_advisory_xact_lock``, it never LISTENs, and the time zone set by
    :func:`_configure` is one of the parameters PgBouncer itself carries to every server
    connection a client uses."""
    options: dict[str, Any] = {"autocommit": True}
    if transaction_pooler:
        options["prepare_threshold"] = None
    return options


async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
    await register_vector_async(conn)
    await conn.execute("SET TIME ZONE 'UTC'")


class PostgresStore:
    """Apollo's durable store. Open it with :meth:`open`; close it with :meth:`close`.

    Connections are checked before use (a round trip only when the server has written
    to one since it was last used), so a restarted server costs nothing but a reconnect.
    A connection the server closes just after that check is traded for another by the
    unit of work, as long as its transaction has sent nothing (:class:`Session`).
    Waiting for a connection past ``pool_timeout`` while the pool lends its connections
    is back-pressure (:class:`StoreBusy`), never taken for an outage. When the pool has
    lent nothing for that long and the server answers, it has backed off from a server
    that was down and is up again: it is replaced instead of making callers wait out the
    back-off, and closed once none of its connections is in use.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        pool_min: int,
        pool_max: int,
        ef_search: int,
        max_scan_tuples: int,
        pool_timeout: float,
        ingest_ef_search: int | None = None,
        transaction_pooler: bool = False,
    ) -> None:
        self._conninfo = conninfo
        #: the primary itself (past any pooler): where migrations and a reembed run
        self.direct_conninfo = conninfo
        #: Whether ``conninfo`` leads to a transaction-mode pooler (PgBouncer's
        #: ``pool_mode = transaction``), which hands each transaction the server connection
        #: it likes: nothing may then outlive a transaction (see :func:`connection_options`).
        self.transaction_pooler = transaction_pooler
        self._pool_min = pool_min
        self._pool_max = max(pool_max, pool_min)
        self._pool_timeout = pool_timeout
        self._refusals = _Refusals(self._pool_max)
        self._lending = _Lending(self._new_pool())
        #: replaced pools that still lent connections when replaced (closed with the store)
        self._retired: list[_Lending] = []
        self._recovering = asyncio.Lock()
        self._in_use = 0  # connections taken or reserved through :meth:`connection`
        self.ef_search = ef_search
        #: the breadth of an ingest's neighbour search (its near duplicates and the entries
        #: it may corroborate); ``ef_search`` when not given
        self.ingest_ef_search = ef_search if ingest_ef_search is None else ingest_ef_search
        self.max_scan_tuples = max_scan_tuples
        self.directory = PostgresIdentityDirectory(self)
        #: the store of a read replica (:meth:`with_replica`), and when it may be tried again
        self._replica: PostgresStore | None = None
        self._replica_wait = 0.0
        self._replica_retry = REPLICA_RETRY_SECONDS
        self._replica_skipped_until = float("-inf")
        self._replayed: ReplayProbe = replayed_position
        #: the furthest WAL position this store's commits reached: what a read outside any
        #: caller's causal scope waits for
        self._written: CausalToken | None = None
        #: reads run on the replica, and reads it could not take by cause (for the metrics)
        self.replica_reads = 0
        self.replica_fallback_causes: dict[str, int] = dict.fromkeys(FALLBACK_CAUSES, 0)
        #: keeps the planner's statistics current as this store's writes grow the tables
        self.statistics = Statistics(self.connection)

    @classmethod
    async def open(
        cls,
        conninfo: str,
        *,
        embedder_model_id: str,
        dimension: int,
        pool_min: int = 1,
        pool_max: int = 10,
        ef_search: int = 100,
        ingest_ef_search: int = 64,
        max_scan_tuples: int = 1_000_000,
        pool_timeout: float = 10.0,
        migrate: bool = True,
        transaction_pooler: bool = False,
        migration_conninfo: str | None = None,
    ) -> Self:
        """Connect, migrate (unless ``migrate=False``) and check the embedder matches.

        ``migration_conninfo`` (default: ``conninfo``) is where migrations and the schema
        check run: the primary itself, when ``conninfo`` leads to a pooler.
        ``transaction_pooler``: ``conninfo`` leads to a transaction-mode pooler.

        Raises :class:`ConfigurationError` when the database was created for another
        embedding model or dimension, :class:`StoreUnavailable` when it cannot be reached,
        :class:`SchemaNotCurrent` (a :class:`StoreUnavailable`) when its schema is missing
        or has migrations pending.
        """
        schema.check_dimension(dimension)
        direct = migration_conninfo or conninfo
        if migrate:
            await schema.migrate(direct, dimension=dimension, model_id=embedder_model_id)
        await _check_schema(direct, embedder_model_id, dimension)
        store = cls(
            conninfo,
            pool_min=pool_min,
            pool_max=pool_max,
            ef_search=ef_search,
            max_scan_tuples=max_scan_tuples,
            pool_timeout=pool_timeout,
            ingest_ef_search=ingest_ef_search,
            transaction_pooler=transaction_pooler,
        )
        store.direct_conninfo = direct
        started = time.monotonic()
        try:
            with translated():
                try:
                    await store._pool.open(wait=True, timeout=pool_timeout)
                except PoolTimeout:
                    if store._refusals.since(started):
                        raise StoreUnavailable(CONNECTION_BUDGET) from None
                    raise
        except BaseException:
            await store.close()
            raise
        return store

    def reembedding(self, model_id: str, dimension: int) -> PostgresReembedding:
        """A move of this store's vectors to another embedder (``apollo reembed``), run on
        its primary."""
        return PostgresReembedding(self.direct_conninfo, model_id, dimension)

    @staticmethod
    async def stored_embedder(conninfo: str) -> tuple[str, int] | None:
        """The (model id, dimension) the database at ``conninfo`` holds vectors of; None
        while it has no Apollo schema. Reads only: an embedder can be checked against it
        before it is built (a model takes seconds to load)."""
        with translated():
            async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
                cur = await conn.execute("SELECT to_regclass('apollo_store_meta') IS NOT NULL")
                ready = await cur.fetchone()
                if not ready or not ready[0]:
                    return None
                cur = await conn.execute(
                    "SELECT embedding_model_id, embedding_dimension FROM apollo_store_meta"
                )
                stored = await cur.fetchone()
        return None if stored is None else (str(stored[0]), int(stored[1]))

    def _new_pool(self) -> AsyncConnectionPool[psycopg.AsyncConnection[Any]]:
        return AsyncConnectionPool(
            self._conninfo,
            min_size=self._pool_min,
            max_size=self._pool_max,
            kwargs=connection_options(self.transaction_pooler),
            connection_class=self._refusals.connection_class(),
            configure=_configure,
            check=_check,
            timeout=self._pool_timeout,
            name="apollo",
            open=False,
        )

    @asynccontextmanager
    async def connection(
        self, *, reserved: bool = False
    ) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled, checked connection (autocommit, vectors registered, UTC); ``reserved``:
        one that :meth:`_reserve` counted (and :meth:`_release` will)."""
        async with self._session(reserved=reserved) as session:
            yield session.conn

    @asynccontextmanager
    async def _session(self, *, reserved: bool = False) -> AsyncIterator[Session]:
        """A :class:`Session` on a pooled connection (see :meth:`connection`). When the
        server has closed that connection since the pool checked it, the session trades it
        for another before its transaction has sent anything (see :class:`Session`)."""
        if not reserved:
            self._in_use += 1
        try:
            with translated():
                lending, conn = await self._lend()
                held: psycopg.AsyncConnection[Any] | None = conn

                async def replace(
                    closed: psycopg.AsyncConnection[Any],
                ) -> psycopg.AsyncConnection[Any]:
                    nonlocal held
                    held = None
                    lending.lent -= 1
                    with translated():
                        await lending.pool.putconn(closed)  # discarded; a new one connects
                        held = await lending.pool.getconn(timeout=self._pool_timeout)
                    lending.lent += 1
                    return held

                session = Session(conn, replace=replace, attempts=self._pool_max + 1)
                try:
                    yield session
                finally:
                    if held is not None:
                        lending.lent -= 1
                        await lending.pool.putconn(held)
                    if lending.lent == 0 and lending in self._retired:
                        self._retired.remove(lending)
                        await lending.pool.close()
        finally:
            if not reserved:
                self._in_use -= 1

    async def _lend(self) -> tuple[_Lending, psycopg.AsyncConnection[Any]]:
        """A connection of the current pool, and that pool's :class:`_Lending`.

        Waiting past the pool's timeout while the pool lends connections (some are out, or
        one was handed to another caller during the wait) is back-pressure:
        :class:`StoreBusy`. Only a pool that lends nothing at all for that long is taken for
        one that lost its server; it is replaced when the server answers again
        (:meth:`_recover`), and a caller waiting on the replaced pool moves to the new one.
        """
        recovered = False
        while True:
            lending = self._lending
            started = time.monotonic()
            try:
                conn = await lending.pool.getconn(timeout=self._pool_timeout)
            except PoolTimeout:
                if self._refusals.since(started):  # the pool could not grow: the budget
                    raise StoreBusy(CONNECTION_BUDGET, retry_after=_RETRY_AFTER_SECONDS) from None
                if lending.lent > 0 or lending.last_lent >= started:
                    raise StoreBusy(
                        "every connection to the store is in use; retry later",
                        retry_after=_RETRY_AFTER_SECONDS,
                    ) from None
                if recovered:  # a new pool that lends nothing either: give up for now
                    raise StoreUnavailable("PostgreSQL is unavailable") from None
                await self._recover(lending)
                recovered = True
                continue
            except PoolClosed:
                if self._lending is lending:
                    raise
                continue  # replaced while this caller waited: wait on the new pool
            lending.lent += 1
            lending.last_lent = time.monotonic()
            return lending, conn

    def _reserve(self, wanted: int) -> int:
        """Up to ``wanted`` connections the pool can give without waiting for one to be
        returned, counted as taken until :meth:`_release`; each is taken with
        ``connection(reserved=True)``."""
        spare = max(0, min(wanted, self._pool_max - self._in_use))
        self._in_use += spare
        return spare

    def _release(self, reserved: int) -> None:
        self._in_use -= reserved

    @asynccontextmanager
    async def _reader(self) -> AsyncIterator[_Reader]:
        """Read repositories on a reserved connection, in a read-only transaction that is
        rolled back at the end. The transaction begins with the first read's statement, in
        the same round trip."""
        async with self._session(reserved=True) as session:
            session.begin(read_only=True)
            try:
                yield _Reader(self, session)
            finally:
                # A connection whose rollback fails is one the pool discards when it is back.
                await session.end()

    async def _recover(self, stale: _Lending) -> None:
        """Replace ``stale``'s pool by a new one when the server answers; raises
        :class:`StoreUnavailable` when it does not. The old pool is closed once it lends
        nothing: never under a caller using one of its connections (a caller waiting on it
        moves to the new pool)."""
        async with self._recovering:
            if self._lending is not stale:
                return
            with translated():
                probe = await psycopg.AsyncConnection.connect(
                    self._conninfo, connect_timeout=max(1, round(self._pool_timeout))
                )
                await probe.close()
                fresh = self._new_pool()
                await fresh.open(wait=True, timeout=self._pool_timeout)
            self._lending = _Lending(fresh)
        if stale.lent == 0:
            await stale.pool.close()
        else:
            self._retired.append(stale)

    def unit_of_work(self) -> PostgresUnitOfWork:
        return PostgresUnitOfWork(self)

    def reading(self) -> PostgresUnitOfWork:
        """A unit of work in a read-only transaction, on the replica when there is one
        that can serve (see :meth:`with_replica`), else on the primary."""
        return PostgresUnitOfWork(self, reading=True)

    @asynccontextmanager
    async def _reading_session(self) -> AsyncIterator[Session]:
        """A session in a read-only transaction: on the replica once it has replayed what
        the caller must see (:meth:`_required`), else (no replica, or one that is skipped,
        down, failing or behind) on the primary. Only getting there falls back: an error
        after is the reader's."""
        replica = self._replica
        if replica is not None:
            stack = AsyncExitStack()
            session: Session | None = None
            try:
                self._check_replica()
                try:
                    session = await stack.enter_async_context(replica._session())
                except StoreUnavailable as exc:
                    raise _Missed(NO_REPLICA, exc) from exc
                session.begin(read_only=True)
                await self._catch_up(session)
            except BaseException as exc:
                if session is not None:
                    await session.end()
                await stack.aclose()
                self._missed(exc)
            else:
                async with stack:
                    self.replica_reads += 1
                    try:
                        yield session
                    finally:
                        await session.end()
                return
        async with self._session() as session:
            session.begin(read_only=True)
            yield session

    @property
    def replica_fallbacks(self) -> int:
        """Reads meant for the replica that ran on the primary, whatever the cause."""
        return sum(self.replica_fallback_causes.values())

    def _check_replica(self) -> None:
        """:class:`_Missed` while the replica is left alone after a failure."""
        if time.monotonic() < self._replica_skipped_until:
            raise _Missed(NO_REPLICA, StoreUnavailable("the read replica is skipped for now"))

    def _missed(self, exc: BaseException) -> None:
        """Count a read the replica could not take, and leave a replica that is down alone
        for a while; anything but a replica's failure is raised again. A replica that is
        only behind or busy is not skipped: the next read may ask for less (or nothing)."""
        if not isinstance(exc, _Missed):
            if not isinstance(exc, _REPLICA_FAILURES):
                raise exc
            exc = _Missed(REPLICA_ERROR, exc)
        self.replica_fallback_causes[exc.cause] += 1
        skipped = self._replica_skipped_until > time.monotonic()
        down = isinstance(exc.error, StoreUnavailable) and not isinstance(exc.error, StoreBusy)
        if down and exc.cause != WAIT_TIMED_OUT and not skipped:
            self._replica_skipped_until = time.monotonic() + self._replica_retry
            log.warning("read replica skipped for %g s: %s", self._replica_retry, exc.error)
        elif exc.cause == REPLICA_ERROR:
            log.info("a read ran on the primary (%s): %s", exc.cause, exc.error)
        elif exc.cause == WAIT_TIMED_OUT:  # a caller's token may be forged: never louder
            log.debug("a read ran on the primary (%s): %s", exc.cause, exc.error)

    def write_budget(self, rate: WriteRate, clock: Clock) -> PostgresWriteBudget:
        """Each principal's write rate, kept in this database (``write_budgets``): every
        process that opens it charges the same buckets."""
        return PostgresWriteBudget(self, rate, clock)

    async def with_replica(
        self,
        conninfo: str,
        *,
        wait: float = 1.0,
        retry: float = REPLICA_RETRY_SECONDS,
        probe: ReplayProbe | None = None,
    ) -> None:
        """Run the reads of :meth:`PostgresUnitOfWork.read_concurrently` (a query's
        searches) and of :meth:`reading` units of work on the hot standby at ``conninfo``;
        every write, and every other read, stays on this store's server.

        A caller reads its own writes: inside a causal scope
        (:func:`apollo_domain.causal.causal_scope`) a read on the replica first waits, at
        most ``wait`` seconds, until the replica has replayed the scope's token (a scope
        without one reads there at once); outside any scope it waits for this store's
        furthest commit. A replica still behind then is left for the primary, for this read
        only. A replica that is down (no connection within :data:`REPLICA_CONNECT_SECONDS`)
        or fails a read is skipped for ``retry`` seconds with a log line, and the reads run
        here: a replica never turns a read into an error. Its pool is opened without
        waiting: a replica down at start is just skipped; one that comes back is used
        again. ``probe`` (for tests) replaces the question how far the replica has
        replayed."""
        replica = PostgresStore(
            conninfo,
            pool_min=0,
            pool_max=self._pool_max,
            ef_search=self.ef_search,
            max_scan_tuples=self.max_scan_tuples,
            pool_timeout=REPLICA_CONNECT_SECONDS,
            ingest_ef_search=self.ingest_ef_search,
        )
        with translated():
            await replica._pool.open(wait=False)
        self._replica = replica
        self._replica_wait = wait
        self._replica_retry = retry
        self._replayed = probe or replayed_position

    def _wrote(self, token: CausalToken) -> None:
        # Concurrent units of work may hear back from their commits in another order than
        # the server wrote them: the furthest position is kept, so a read never waits for
        # less than every commit this store has made.
        self._written = latest(self._written, token)

    def _required(self) -> CausalToken | None:
        """What a read must see: its caller's causal token inside a scope (None: nothing,
        it reads at once), else the furthest commit of this store."""
        scope = current_scope()
        return self._written if scope is None else scope.seen

    async def _replica_reads(
        self, reads: Sequence[Callable[[Reads], Awaitable[T]]]
    ) -> list[T] | None:
        """``reads`` run at once on the replica, each on a connection of its own; None
        when there is no replica, or it is skipped, down, failing, or cannot catch up in
        time."""
        replica = self._replica
        if replica is None:
            return None

        async def apart(read: Callable[[Reads], Awaitable[T]]) -> T:
            async with AsyncExitStack() as stack:
                try:
                    reader = await stack.enter_async_context(replica._reader())
                except StoreUnavailable as exc:
                    raise _Missed(NO_REPLICA, exc) from exc
                await self._catch_up(reader.session)  # the BEGIN goes with its first check
                return await read(reader)

        try:
            self._check_replica()
        except _Missed as exc:
            self._missed(exc)
            return None
        outcomes = await asyncio.gather(*(apart(read) for read in reads), return_exceptions=True)
        failed = [o for o in outcomes if isinstance(o, BaseException)]
        if failed:
            # the first failure that is not the replica's is raised; else one is counted
            order = sorted(failed, key=lambda o: isinstance(o, (_Missed, *_REPLICA_FAILURES)))
            self._missed(order[0])
            return None
        self.replica_reads += 1
        return [o for o in outcomes if not isinstance(o, BaseException)]

    async def _catch_up(self, session: Session) -> None:
        """Wait until the replica has replayed what this read must see (at most the
        replica wait); :class:`_Missed` (``wait_timed_out``) when it has not by then."""
        required = self._required()
        if required is None:
            return
        deadline = time.monotonic() + self._replica_wait
        while True:
            replayed = await self._replayed(session)
            if replayed is not None and replayed >= required:
                return
            if time.monotonic() >= deadline:
                raise _Missed(
                    WAIT_TIMED_OUT,
                    StoreUnavailable(
                        f"the replica has not replayed {required} within {self._replica_wait:g} s"
                    ),
                )
            await asyncio.sleep(_CATCH_UP_POLL_SECONDS)

    async def preflight(self, parts: Collection[str]) -> None:
        unknown = sorted(set(parts) - PART_TABLES.keys())
        if unknown:
            raise ValidationError("parts", f"unknown store parts: {', '.join(unknown)}")
        tables = [PART_TABLES[p] for p in parts]
        # One statement, one answer: it holds nothing past its own transaction, so it
        # means the same through a transaction-mode pooler as on a connection of its own.
        async with self._session() as session:
            row = await session.one(
                "SELECT current_setting('transaction_read_only') = 'on' AS read_only,"
                " ARRAY(SELECT t FROM unnest(%s::text[]) AS t WHERE to_regclass(t) IS NULL"
                " OR NOT has_table_privilege(to_regclass(t), 'INSERT')) AS missing",
                (tables,),
            )
        if row["read_only"]:
            raise StoreUnavailable(f"store is read-only; cannot write {', '.join(parts)}")
        if row["missing"]:
            names = sorted(p for p in parts if PART_TABLES[p] in row["missing"])
            raise StoreUnavailable(
                f"store part(s) unavailable: {', '.join(names)} (missing or not writable)"
            )

    @property
    def _pool(self) -> AsyncConnectionPool[psycopg.AsyncConnection[Any]]:
        return self._lending.pool

    @property
    def capacity(self) -> int:
        """How many units of work the store serves at once: its pool's size."""
        return self._pool_max

    async def close(self) -> None:
        await self.statistics.close()
        if self._replica is not None:
            await self._replica.close()
        for lending in (*self._retired, self._lending):
            await lending.pool.close()
        self._retired.clear()


#: The tables a write grows, analyzed together.
ANALYZED_TABLES = (
    "entries",
    "evidence",
    "entity_mentions",
    "entity_edges",
    "entity_edge_entries",
    "entities",
)
#: When to analyze again: once this many entries, plus this share of those there were at
#: the last analysis, have been added since (autovacuum's own defaults,
#: ``autovacuum_analyze_threshold`` and ``autovacuum_analyze_scale_factor``).
ANALYZE_THRESHOLD = 50
ANALYZE_SCALE = 0.1


class Statistics:
    """Keeps the planner's statistics of :data:`ANALYZED_TABLES` current while this store's
    own writes grow them, as PostgreSQL's guide advises after a bulk load ("Populating a
    Database": run ANALYZE afterwards). Autovacuum would analyze them too, but up to a
    minute later (``autovacuum_naptime``): meanwhile the queries after a bulk load are
    planned for the empty tables the statistics still describe, and the graph signal's
    joins run several times slower.

    Past the threshold, one ANALYZE runs in the background, on a pooled connection, never
    on a caller's path and never two at once in a process; across processes an advisory
    lock lets one of them analyze and the others skip. A failed analysis is logged and
    tried again at the next threshold: it never fails a write."""

    LOCK_KEY = 0x415F414E414C59  # "A_ANALY"

    def __init__(self, connection: Callable[[], Any]) -> None:
        self._connection = connection
        self._since = 0  # entries added since the last analysis began
        self._base = 0.0  # entries there were then (the planner's estimate)
        self._running: asyncio.Task[None] | None = None
        self.analyses = 0  # analyses this process ran (for tests and the metrics)

    def grew(self, added: int) -> None:
        """``added`` entries were committed: start an analysis when they pass the threshold."""
        self._since += added
        if self._running is not None and not self._running.done():
            return
        if self._since < ANALYZE_THRESHOLD + ANALYZE_SCALE * self._base:
            return
        self._since = 0
        self._running = asyncio.get_running_loop().create_task(
            self._analyze(), name="apollo-analyze"
        )

    async def settled(self) -> None:
        """Wait for the running analysis, if any, to end."""
        if self._running is not None:
            await asyncio.gather(self._running, return_exceptions=True)

    async def close(self) -> None:
        if self._running is not None and not self._running.done():
            self._running.cancel()
        await self.settled()

    async def _analyze(self) -> None:
        try:
            async with self._connection() as conn, conn.transaction():
                cur = await conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (self.LOCK_KEY,))
                locked = await cur.fetchone()
                if locked and locked[0]:
                    await conn.execute("ANALYZE " + ", ".join(ANALYZED_TABLES))
                    self.analyses += 1
                cur = await conn.execute(
                    "SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = 'entries'::regclass"
                )
                row = await cur.fetchone()
                self._base = float(row[0]) if row else self._base
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # an optimization: the writes it follows are committed
            log.warning("analyzing the tables failed (tried again later): %s", exc)


async def _check_schema(conninfo: str, model_id: str, dimension: int) -> None:
    """:class:`SchemaNotCurrent` unless every migration was applied; :class:`ConfigurationError`
    unless the store was created for this embedder."""
    with translated():
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
            cur = await conn.execute(
                "SELECT to_regclass('apollo_store_meta') IS NOT NULL"
                " AND to_regclass('entries') IS NOT NULL"
                " AND to_regclass('apollo_schema_migrations') IS NOT NULL"
            )
            ready = await cur.fetchone()
            every = tuple(m.version for m in schema.migrations())
            if not ready or not ready[0]:
                raise SchemaNotCurrent("the database has no Apollo schema", every)
            cur = await conn.execute("SELECT version FROM apollo_schema_migrations")
            done = {row[0] for row in await cur.fetchall()}
            pending = tuple(v for v in every if v not in done)
            if pending:
                raise SchemaNotCurrent(
                    f"the Apollo schema has {len(pending)} migration(s) pending"
                    f" ({', '.join(map(str, pending))})",
                    pending,
                )
            cur = await conn.execute(
                "SELECT embedding_model_id, embedding_dimension FROM apollo_store_meta"
            )
            stored = await cur.fetchone()
    if stored is None:
        raise StoreUnavailable("the Apollo schema has no embedding model recorded")
    stored_model, stored_dimension = stored
    if (stored_model, stored_dimension) != (model_id, dimension):
        raise EmbedderMismatch(
            f"the store holds vectors of model {stored_model!r} (dimension"
            f" {stored_dimension}) but the configured embedder is {model_id!r} (dimension"
            f" {dimension}); configure the original embedder or use a new database",
            stored_model,
            stored_dimension,
        )
