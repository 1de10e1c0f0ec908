"""Ports: the contracts between Apollo's use cases and the technologies behind them.

Every I/O port is async, and each states its contract (ordering, atomicity, the errors it
raises) in its docstrings, once; every adapter satisfies it, and the contract suites of
``tests/contract`` check it against each of them. One module per purpose:

- :mod:`.store`: the store and its units of work (:class:`Store`, :class:`UnitOfWork`),
  over the repositories of :mod:`.entries` (searching, reading, writing and maintaining
  entries), :mod:`.graph` (relations and the entity graph) and :mod:`.repositories`
  (evidence, expertise, the access log, credibility, the outbox, idempotency keys, the
  identity directory); the values they exchange are in :mod:`.records`;
- :mod:`.messaging` and :mod:`.topology`: the message bus and the names it routes by;
- :mod:`.embedder`, :mod:`.judge`, :mod:`.extractor`, :mod:`.llm`, :mod:`.clock` and
  :mod:`.profile`: the embedder, the contradiction judge, the entity extractor, the GAS
  language model, the clock and the query profile; :mod:`.rates`: the write budget.

Errors: adapters raise only :mod:`apollo_domain.errors` types (see :mod:`.store` and
:mod:`.messaging` for which).
"""

from __future__ import annotations

from .clock import Clock
from .embedder import Embedder
from .entries import EntryMaintenance, EntryReads, EntryRepository, EntrySearch, EntryWrites
from .extractor import EntityExtractor
from .graph import EntityGraph, GraphSurroundings, RelationRepository
from .judge import ContradictionJudge
from .llm import GasLanguageModel
from .profile import QueryProfile
from .rates import WriteBudget
from .records import (
    AccessLogRecord,
    AgentDomainStats,
    BatchNeighbours,
    CredibilityRecord,
    DecayOutcome,
    ExpertiseRecord,
    OutboxItem,
    ScoredEntry,
    SearchFilter,
    StoreStats,
)
from .repositories import (
    AccessLog,
    CredibilityRegistry,
    EpisodeRepository,
    EvidenceRepository,
    ExpertiseRepository,
    IdentityDirectory,
    Outbox,
    ProcessedKeys,
)
from .splitter import TextSplitter
from .store import STORE_PARTS, Reads, Store, UnitOfWork

__all__ = [
    "STORE_PARTS",
    "AccessLog",
    "AccessLogRecord",
    "AgentDomainStats",
    "BatchNeighbours",
    "Clock",
    "ContradictionJudge",
    "CredibilityRecord",
    "CredibilityRegistry",
    "DecayOutcome",
    "Embedder",
    "EntityExtractor",
    "EntityGraph",
    "EntryMaintenance",
    "EntryReads",
    "EntryRepository",
    "EntrySearch",
    "EntryWrites",
    "EpisodeRepository",
    "EvidenceRepository",
    "ExpertiseRecord",
    "ExpertiseRepository",
    "GasLanguageModel",
    "GraphSurroundings",
    "IdentityDirectory",
    "Outbox",
    "OutboxItem",
    "ProcessedKeys",
    "QueryProfile",
    "Reads",
    "RelationRepository",
    "ScoredEntry",
    "SearchFilter",
    "Store",
    "StoreStats",
    "TextSplitter",
    "UnitOfWork",
    "WriteBudget",
]
