"""PostgreSQL + pgvector adapters of Apollo's store ports."""

from .embedded import EmbeddedPostgres
from .entries import PostgresEntryRepository
from .repositories import (
    PostgresAccessLog,
    PostgresCredibilityRegistry,
    PostgresEvidenceRepository,
    PostgresExpertiseRepository,
    PostgresIdentityDirectory,
    PostgresOutbox,
    PostgresProcessedKeys,
    PostgresRelationRepository,
)
from .schema import migrate
from .store import PostgresStore, PostgresUnitOfWork

__all__ = [
    "EmbeddedPostgres",
    "PostgresAccessLog",
    "PostgresCredibilityRegistry",
    "PostgresEntryRepository",
    "PostgresEvidenceRepository",
    "PostgresExpertiseRepository",
    "PostgresIdentityDirectory",
    "PostgresOutbox",
    "PostgresProcessedKeys",
    "PostgresRelationRepository",
    "PostgresStore",
    "PostgresUnitOfWork",
    "migrate",
]
