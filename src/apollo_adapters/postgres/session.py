"""The unit of work's connection: every statement runs through it, errors translated."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from apollo_domain.errors import PersistenceFailed

from .errors import translated

Row = dict[str, Any]
Params = Mapping[str, Any] | Sequence[Any] | None


class Session:
    """The unit of work's connection; every statement passes through here, translated."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn
        self.open = True

    def check_open(self) -> None:
        if not self.open:
            raise PersistenceFailed("this unit of work has ended; start a new one")

    async def execute(self, query: sql.Composable | str, params: Params = None) -> int:
        self.check_open()
        with translated():
            cur = await self.conn.execute(query, params)  # type: ignore[arg-type]
            return cur.rowcount

    async def executemany(self, query: str, params: Sequence[Sequence[Any]]) -> None:
        self.check_open()
        if not params:
            return
        with translated():
            async with self.conn.cursor() as cur:
                await cur.executemany(query, params)

    async def rows(self, query: sql.Composable | str, params: Params = None) -> list[Row]:
        self.check_open()
        with translated():
            async with self.conn.cursor(row_factory=dict_row) as cur:
                await cur.execute(query, params)  # type: ignore[arg-type]
                return await cur.fetchall()

    async def rows_between(
        self,
        before: tuple[str, Params],
        query: sql.Composable | str,
        params: Params,
        after: tuple[str, Params],
    ) -> list[Row]:
        """``query``'s rows, with the statements ``before`` and ``after`` run around it: three
        statements in one round trip (pipeline mode)."""
        self.check_open()
        with translated():
            async with self.conn.pipeline(), self.conn.cursor(row_factory=dict_row) as cur:
                await self.conn.execute(*before)
                await cur.execute(query, params)  # type: ignore[arg-type]
                await self.conn.execute(*after)
                return await cur.fetchall()

    async def row(self, query: sql.Composable | str, params: Params = None) -> Row | None:
        rows = await self.rows(query, params)
        return rows[0] if rows else None

    async def value(self, query: sql.Composable | str, params: Params = None) -> Any:
        row = await self.row(query, params)
        return None if row is None else next(iter(row.values()))
