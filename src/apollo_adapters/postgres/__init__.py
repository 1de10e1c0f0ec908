"""PostgreSQL + pgvector adapters of Apollo's store ports."""

from .embedded import EmbeddedPostgres, FolderClosed
from .entries import PostgresEntryRepository
from .graph import PostgresEntityGraph
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
    "FolderClosed",
    "PostgresAccessLog",
    "PostgresCredibilityRegistry",
    "PostgresEntityGraph",
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
