"""Fixtures shared by every suite: one PostgreSQL + pgvector server per test session."""

from tests.postgres_support import postgres_server

__all__ = ["postgres_server"]
