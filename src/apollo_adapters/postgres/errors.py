"""psycopg exceptions translated to Apollo's errors, once, at the adapter's edge."""

from __future__ import annotations

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
)


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
    """The Apollo error for a psycopg (or psycopg_pool) exception."""
    if isinstance(exc, pg_errors.UniqueViolation):
        return Conflict(f"uniqueness rule broken: {exc.diag.constraint_name or exc}")
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return StoreUnavailable(f"PostgreSQL is unavailable: {exc}")
    if isinstance(exc, pg_errors.UndefinedTable | pg_errors.UndefinedColumn):
        return StoreUnavailable(f"PostgreSQL schema is missing a part: {exc}")
    return PersistenceFailed(f"PostgreSQL failed: {exc}")


@contextmanager
def translated() -> Iterator[None]:
    try:
        yield
    except psycopg.Error as exc:
        raise translate(exc) from exc
    except OSError as exc:
        raise StoreUnavailable(f"PostgreSQL is unreachable: {exc}") from exc
