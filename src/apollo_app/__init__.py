"""Apollo: a shared, durable knowledge store for AI agent meshes."""

from apollo_domain.errors import (
    ApolloError,
    ConfigurationError,
    Conflict,
    Forbidden,
    InvalidTransition,
    NotFound,
    StoreUnavailable,
    TransportError,
    ValidationError,
)
from apollo_domain.model import AccessScope, ContentType, Outcome, Principal, RelationType, Status
from apollo_domain.policy import ConfidencePolicy, meets_write_gate
from apollo_domain.results import (
    AgentProfile,
    Dispatch,
    EntryView,
    GasResult,
    IngestResult,
    LifecycleResult,
    LinkResult,
    MaintenanceResult,
    QueryResult,
    RelatedEntry,
)

from .facade import (
    Apollo,
    BlockingApollo,
    BlockingClient,
    Client,
    KnowledgeClient,
    RemoteClient,
)
from .settings import Settings

__all__ = [
    "AccessScope",
    "AgentProfile",
    "Apollo",
    "ApolloError",
    "BlockingApollo",
    "BlockingClient",
    "Client",
    "ConfidencePolicy",
    "ConfigurationError",
    "Conflict",
    "ContentType",
    "Dispatch",
    "EntryView",
    "Forbidden",
    "GasResult",
    "IngestResult",
    "InvalidTransition",
    "KnowledgeClient",
    "LifecycleResult",
    "LinkResult",
    "MaintenanceResult",
    "NotFound",
    "Outcome",
    "Principal",
    "QueryResult",
    "RelatedEntry",
    "RelationType",
    "RemoteClient",
    "Settings",
    "Status",
    "StoreUnavailable",
    "TransportError",
    "ValidationError",
    "meets_write_gate",
]
