"""Apollo: a shared, durable knowledge store for AI agent meshes."""

from apollo_domain import __version__ as __version__
from apollo_domain.errors import (
    ApolloError,
    ConfigurationError,
    Conflict,
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

from .blocking import BlockingApollo, BlockingClient
from .facade import Apollo, Client
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
    "GasResult",
    "IngestResult",
    "InvalidTransition",
    "LifecycleResult",
    "LinkResult",
    "MaintenanceResult",
    "NotFound",
    "Outcome",
    "Principal",
    "QueryResult",
    "RelatedEntry",
    "RelationType",
    "Settings",
    "Status",
    "StoreUnavailable",
    "TransportError",
    "ValidationError",
    "meets_write_gate",
]
