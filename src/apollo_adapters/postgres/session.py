"""The unit of work's connection: every statement runs through it, errors translated."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from apollo_domain.errors import PersistenceFailed

from .errors import translated

Row = dict[str, Any]
Params = Mapping[str, Any] | Sequence[Any] | None
Query = sql.Composable | str
_OPEN = (TransactionStatus.INTRANS, TransactionStatus.INERROR)
_BEGIN = "BEGIN"
_BEGIN_READ_ONLY = "BEGIN READ ONLY"


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
    """

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn
        self.open = True
        self._deferred: list[tuple[Query, Params]] = []

    def begin(self, *, read_only: bool = False) -> None:
        """Start the transaction (``read_only``: a read-only one) with the next statement
        sent."""
        self.defer(_BEGIN_READ_ONLY if read_only else _BEGIN)

    async def commit(self) -> None:
        """The deferred writes and ``COMMIT`` in one round trip; nothing when nothing was
        sent or deferred. The session is closed from then on."""
        if self._deferred in ([(_BEGIN, None)], [(_BEGIN_READ_ONLY, None)]):
            self._deferred.clear()
        if not self._deferred and not self.in_transaction:
            self.open = False
            return
        async with self.sending():
            self.open = False
            await self.conn.execute("COMMIT", prepare=False)

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

    async def execute(self, query: Query, params: Params = None) -> int:
        async with self.sending():
            cur = await self.conn.execute(query, params)  # type: ignore[arg-type]
        return cur.rowcount

    async def executemany(self, query: str, params: Sequence[Sequence[Any]]) -> None:
        if not params:
            self.check_open()
            return
        async with self.sending(), self.conn.cursor() as cur:
            await cur.executemany(query, params)

    async def rows(self, query: Query, params: Params = None) -> list[Row]:
        async with self.sending(), self.conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(query, params)  # type: ignore[arg-type]
            return await cur.fetchall()

    async def rows_between(
        self,
        before: tuple[str, Params],
        query: Query,
        params: Params,
        after: tuple[str, Params],
    ) -> list[Row]:
        """``query``'s rows, with the statements ``before`` and ``after`` run around it: three
        statements in one round trip (pipeline mode)."""
        async with (
            self.sending(pipelined=True),
            self.conn.cursor(row_factory=dict_row) as cur,
        ):
            await self.conn.execute(*before)
            await cur.execute(query, params)  # type: ignore[arg-type]
            await self.conn.execute(*after)
            return await cur.fetchall()

    async def row(self, query: Query, params: Params = None) -> Row | None:
        rows = await self.rows(query, params)
        return rows[0] if rows else None

    async def value(self, query: Query, params: Params = None) -> Any:
        row = await self.row(query, params)
        return None if row is None else next(iter(row.values()))
