"""PostgreSQL + pgvector adapters of Apollo's store ports."""

from .embedded import EmbeddedPostgres
from .schema import migrate
from .store import (
    PostgresAccessLog,
    PostgresCredibilityRegistry,
    PostgresEntryRepository,
    PostgresEvidenceRepository,
    PostgresExpertiseRepository,
    PostgresIdentityDirectory,
    PostgresOutbox,
    PostgresProcessedKeys,
    PostgresRelationRepository,
    PostgresStore,
    PostgresUnitOfWork,
)

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
