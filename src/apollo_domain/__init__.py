"""Apollo's pure domain core: entries, the confidence policy, the rules, and the ports.

No I/O happens here; adapters implement the ports in :mod:`apollo_domain.ports`.
"""

from . import commands as commands  # each command declares its record in .actions
from ._version import __version__ as __version__
from .credibility import SourceCredibility
from .errors import (
    ApolloError,
    ConfigurationError,
    Conflict,
    EmbeddingError,
    Forbidden,
    InvalidTransition,
    NotFound,
    PersistenceFailed,
    RateLimited,
    RequestTimeout,
    RpcTimeout,
    StoreBusy,
    StoreUnavailable,
    TransientConflict,
    TransportError,
    UnknownResolution,
    ValidationError,
)
from .model import (
    AccessScope,
    ContentType,
    Entry,
    Evidence,
    Outcome,
    Principal,
    Relation,
    RelationType,
    Role,
    SourceRef,
    Status,
    Viewer,
)
from .policy import ConfidencePolicy, meets_write_gate
from .ports import Clock, ContradictionJudge, Embedder, GasLanguageModel
from .writeback import WritebackDecision, evaluate_writeback

__all__ = [
    "AccessScope",
    "ApolloError",
    "Clock",
    "ConfidencePolicy",
    "ConfigurationError",
    "Conflict",
    "ContentType",
    "ContradictionJudge",
    "Embedder",
    "EmbeddingError",
    "Entry",
    "Evidence",
    "Forbidden",
    "GasLanguageModel",
    "InvalidTransition",
    "NotFound",
    "Outcome",
    "PersistenceFailed",
    "Principal",
    "RateLimited",
    "Relation",
    "RelationType",
    "RequestTimeout",
    "Role",
    "RpcTimeout",
    "SourceCredibility",
    "SourceRef",
    "Status",
    "StoreBusy",
    "StoreUnavailable",
    "TransientConflict",
    "TransportError",
    "UnknownResolution",
    "ValidationError",
    "Viewer",
    "WritebackDecision",
    "evaluate_writeback",
    "meets_write_gate",
]
