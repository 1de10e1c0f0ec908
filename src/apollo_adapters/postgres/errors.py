"""psycopg exceptions translated to Apollo's errors, once, at the adapter's edge.

An Apollo error's message reaches callers (HTTP bodies, RPC replies), so it never carries
what PostgreSQL said: statements, DETAIL lines, process ids or relation names. The error
keeps the psycopg exception as its cause, which the edge that answers logs (HTTP: with
every 5xx), so the full text stays on the server's side."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import errors as pg_errors

from apollo_domain.errors import (
    ApolloError,
    ConfigurationError,
    Conflict,
    PersistenceFailed,
    StoreUnavailable,
    TransientConflict,
)

logger = logging.getLogger("apollo.postgres")
#: Concurrent transactions that PostgreSQL broke apart (a deadlock, a serialization
#: failure): the same work may pass when run again.
TRANSIENT_SQLSTATES = frozenset({"40P01", "40001"})


#: How PostgreSQL (SQLSTATE 53300, too_many_connections: ``max_connections``, a role's or
#: a database's connection limit) and PgBouncer (``max_client_conn``) refuse a connection
#: for want of connection slots. libpq reports a refused connection by its message only,
#: with no SQLSTATE, so the message is read.
_NO_SLOT = (
    "too many clients already",
    "too many connections for",
    "remaining connection slots are reserved",
    "no more connections allowed",
)
CONNECTION_BUDGET = (
    "PostgreSQL refuses more connections (too many clients, SQLSTATE 53300): keep the"
    " service processes × APOLLO_POOL_MAX (twice that with APOLLO_READ_DATABASE_URL, the"
    " replica's pool being as large) within the server's max_connections, or, through"
    " PgBouncer, within its max_client_conn, and its default_pool_size within"
    " max_connections"
)


def refused_for_slots(exc: BaseException) -> bool:
    """Whether ``exc`` is a connection the server or the pooler refused for want of
    connection slots (see :data:`CONNECTION_BUDGET`)."""
    if getattr(exc, "sqlstate", None) == "53300":
        return True
    text = str(exc)
    return isinstance(exc, psycopg.OperationalError) and any(n in text for n in _NO_SLOT)


class MissingPgvector(StoreUnavailable):
    """The server cannot load the ``vector`` extension (pgvector is not installed there)."""


class EmbedderMismatch(ConfigurationError):
    """The store holds vectors of another model (``stored_model``) or dimension than the
    configured embedder's."""

    def __init__(self, message: str, stored_model: str, stored_dimension: int) -> None:
        super().__init__("embedder", message)
        self.stored_model = stored_model
        self.stored_dimension = stored_dimension


class SchemaNotCurrent(StoreUnavailable):
    """The database was opened without migrating and its schema is missing or has
    migrations pending (``pending``: their versions)."""

    def __init__(self, message: str, pending: tuple[int, ...]) -> None:
        super().__init__(message)
        self.pending = pending


def translate(exc: psycopg.Error) -> ApolloError:
    """The Apollo error for a psycopg (or psycopg_pool) exception; its message names the
    kind of failure and the SQLSTATE, never the server's text."""
    if isinstance(exc, pg_errors.UniqueViolation):
        return Conflict("a concurrent writer stored the same thing first")
    code = f" (SQLSTATE {exc.sqlstate})" if exc.sqlstate else ""
    logger.debug("PostgreSQL error%s: %s", code, exc)
    if exc.sqlstate in TRANSIENT_SQLSTATES:
        return TransientConflict(f"concurrent writes conflicted; retry later{code}")
    if refused_for_slots(exc):
        return StoreUnavailable(CONNECTION_BUDGET)
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return StoreUnavailable(f"PostgreSQL is unavailable{code}")
    if isinstance(exc, pg_errors.UndefinedTable | pg_errors.UndefinedColumn):
        return StoreUnavailable(f"PostgreSQL schema is missing a part{code}")
    return PersistenceFailed(f"PostgreSQL failed{code}")


@contextmanager
def translated() -> Iterator[None]:
    try:
        yield
    except psycopg.Error as exc:
        raise translate(exc) from exc
    except OSError as exc:
        logger.debug("PostgreSQL is unreachable: %s", exc)
        raise StoreUnavailable("PostgreSQL is unreachable") from exc
