"""The unit of work's connection: every statement runs through it, errors translated."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from apollo_domain.errors import PersistenceFailed, StoreUnavailable

from .errors import translated

Row = dict[str, Any]
Params = Mapping[str, Any] | Sequence[Any] | None
Query = sql.Composable | str
_OPEN = (TransactionStatus.INTRANS, TransactionStatus.INERROR)
_BEGIN = "BEGIN"
_BEGIN_READ_ONLY = "BEGIN READ ONLY"
_BEGUN = ([(_BEGIN, None)], [(_BEGIN_READ_ONLY, None)])
#: what the server sends when it ends a session: shut down, terminated, or in recovery
_SESSION_ENDED = ("57P01", "57P02", "57P03")
#: The WAL position a commit reached. With ``synchronous_commit`` on (the default) the
#: commit is flushed when it returns: the flush position covers it and ends where a
#: replica's replay can end. Off, only the insert position covers it (one that ends just
#: past a page header is reached by a replica only with the next WAL written).
_WAL_POSITION = (
    "SELECT (CASE WHEN current_setting('synchronous_commit') = 'off'"
    " THEN pg_current_wal_insert_lsn() ELSE pg_current_wal_flush_lsn() END)::text"
)
T = TypeVar("T")
Connection = psycopg.AsyncConnection[Any]


class Session:
    """The unit of work's connection; every statement passes through here, translated.

    Writes whose result nobody reads (:meth:`defer`) are held back and sent with the next
    statement, or the commit, in one round trip (pipeline mode). An error of a deferred
    write surfaces at that next statement; the unit of work fails as it would have. The
    transaction's ``BEGIN`` is held back the same way (:meth:`begin`), so it costs no round
    trip of its own, and a unit of work that sends nothing opens no transaction.

    The session sends ``BEGIN``, ``COMMIT`` and ``ROLLBACK`` itself, unprepared: a rollback
    through psycopg's transaction blocks drops every prepared statement of the connection,
    and every unit of work that only reads ends in one. Statements run often thus stay
    parsed (and, when the plan does not depend on the values, planned) across units of work.

    A connection the server closed while it sat in the pool (a restart, an administrator
    ending sessions) can be handed out when the closing raced the pool's check. When the
    transaction's first statements fail that way, nothing of the transaction happened on
    the server, so the session trades the connection for another (``replace``) and sends
    them again: up to ``attempts`` times, once for each connection the pool may hold.
    """

    def __init__(
        self,
        conn: Connection,
        *,
        replace: Callable[[Connection], Awaitable[Connection]] | None = None,
        attempts: int = 1,
    ) -> None:
        self.conn = conn
        self.open = True
        self._deferred: list[tuple[Query, Params]] = []
        self._replace = replace
        self._attempts = attempts

    def begin(self, *, read_only: bool = False) -> None:
        """Start the transaction (``read_only``: a read-only one) with the next statement
        sent."""
        self.defer(_BEGIN_READ_ONLY if read_only else _BEGIN)

    async def commit(self, *, position: bool = False) -> str | None:
        """The deferred writes and ``COMMIT`` in one round trip; nothing when nothing was
        sent or deferred. The session is closed from then on. With ``position``: the
        server's WAL position just after the commit (``pg_lsn`` text), read in the same
        round trip; None when nothing was committed."""
        if self._deferred in _BEGUN:
            self._deferred.clear()
        if not self._deferred and not self.in_transaction:
            self.open = False
            return None
        async with self.sending(pipelined=position):
            self.open = False
            await self.conn.execute("COMMIT", prepare=False)
            if not position:
                return None
            cur = await self.conn.execute(_WAL_POSITION, prepare=False)
            row = await cur.fetchone()
        return None if row is None else str(row[0])

    async def end(self) -> None:
        """Close the session: the deferred writes are dropped and an open transaction is
        rolled back (a failed rollback means the connection is gone, and the transaction
        with it)."""
        self.discard()
        self.open = False
        if self.in_transaction:
            with suppress(psycopg.Error):
                await self.conn.execute("ROLLBACK", prepare=False)

    @property
    def in_transaction(self) -> bool:
        """A transaction is open on the server (started, or failed and not yet ended)."""
        return self.conn.pgconn.transaction_status in _OPEN

    def check_open(self) -> None:
        if not self.open:
            raise PersistenceFailed("this unit of work has ended; start a new one")

    def defer(self, query: Query, params: Params = None) -> None:
        """Queue a write whose result is not needed."""
        self.check_open()
        self._deferred.append((query, params))

    def discard(self) -> None:
        """Forget the deferred writes (their transaction or savepoint is rolled back)."""
        self._deferred.clear()

    async def flush(self) -> None:
        """Send the deferred writes now."""
        async with self.sending():
            pass

    @asynccontextmanager
    async def sending(self, *, pipelined: bool = False) -> AsyncIterator[None]:
        """A block that talks to the server: errors translated, the deferred writes sent
        first, in the same pipeline as the block's statements (``pipelined``: a pipeline
        even when nothing is deferred)."""
        self.check_open()
        with translated():
            if not self._deferred and not pipelined:
                yield
                return
            deferred, self._deferred = self._deferred, []
            async with self.conn.pipeline():
                for query, params in deferred:
                    await self.conn.execute(
                        query,  # type: ignore[arg-type]
                        params,
                        prepare=False if query in (_BEGIN, _BEGIN_READ_ONLY) else None,
                    )
                yield

    async def _sent(self, send: Callable[[], Awaitable[T]], *, pipelined: bool = False) -> T:
        """``send``'s result, run in a :meth:`sending` block; when the block is the
        transaction's first and the server had closed the connection, again on another."""
        first = [*self._deferred] if self._deferred[:1] in _BEGUN else None
        for attempt in range(self._attempts):
            try:
                async with self.sending(pipelined=pipelined):
                    return await send()
            except StoreUnavailable as exc:
                if (
                    first is None
                    or self._replace is None
                    or attempt + 1 == self._attempts
                    or not self._closed_by_server(exc)
                ):
                    raise
            self.conn = await self._replace(self.conn)
            self._deferred = [*first]
        raise AssertionError("unreachable")  # pragma: no cover

    def _closed_by_server(self, exc: StoreUnavailable) -> bool:
        cause = exc.__cause__
        return self.conn.broken or (
            isinstance(cause, psycopg.Error) and cause.sqlstate in _SESSION_ENDED
        )

    async def execute(self, query: Query, params: Params = None) -> int:
        async def send() -> psycopg.AsyncCursor[Any]:
            return await self.conn.execute(query, params)  # type: ignore[arg-type]

        cur = await self._sent(send)
        return cur.rowcount  # known once the pipeline (if any) has ended

    async def executemany(self, query: str, params: Sequence[Sequence[Any]]) -> None:
        if not params:
            self.check_open()
            return

        async def send() -> None:
            async with self.conn.cursor() as cur:
                await cur.executemany(query, params)

        await self._sent(send)

    async def rows(self, query: Query, params: Params = None) -> list[Row]:
        async def send() -> list[Row]:
            async with self.conn.cursor(row_factory=dict_row) as cur:
                await cur.execute(query, params)  # type: ignore[arg-type]
                return await cur.fetchall()

        return await self._sent(send)

    async def rows_between(
        self,
        before: tuple[str, Params],
        query: Query,
        params: Params,
        after: tuple[str, Params],
    ) -> list[Row]:
        """``query``'s rows, with the statements ``before`` and ``after`` run around it: three
        statements in one round trip (pipeline mode)."""

        async def send() -> list[Row]:
            async with self.conn.cursor(row_factory=dict_row) as cur:
                await self.conn.execute(*before)
                await cur.execute(query, params)  # type: ignore[arg-type]
                await self.conn.execute(*after)
                return await cur.fetchall()

        return await self._sent(send, pipelined=True)

    async def rows_together(self, statements: Sequence[tuple[Query, Params]]) -> list[list[Row]]:
        """Each statement's rows, the statements sent in one round trip (pipeline mode)."""

        async def send() -> list[list[Row]]:
            cursors = [self.conn.cursor(row_factory=dict_row) for _ in statements]
            try:
                for cur, (query, params) in zip(cursors, statements, strict=True):
                    await cur.execute(query, params)  # type: ignore[arg-type]
                return [await cur.fetchall() for cur in cursors]
            finally:
                for cur in cursors:
                    await cur.close()

        return await self._sent(send, pipelined=True)

    async def row(self, query: Query, params: Params = None) -> Row | None:
        rows = await self.rows(query, params)
        return rows[0] if rows else None

    async def one(self, query: Query, params: Params = None) -> Row:
        """The row of a statement that always returns one (an aggregate, ``RETURNING`` of
        a write that cannot skip its row); :class:`PersistenceFailed` when none came back,
        never a silent ``None`` (nor an ``assert``, which ``python -O`` removes)."""
        row = await self.row(query, params)
        if row is None:
            raise PersistenceFailed("the store returned no row where one was due")
        return row

    async def value(self, query: Query, params: Params = None) -> Any:
        row = await self.row(query, params)
        return None if row is None else next(iter(row.values()))
