"""Use cases: application services over the ports. Async, I/O only through ports."""

from .bulk_ingest import ingest_many
from .context import Caller, Deps, resolve_viewer, scoped_key
from .curation import (
    agent_profile,
    aggregate_expertise,
    archive_stale,
    deprecate_entry,
    domains_at_risk,
    force_decay,
    get_expertise,
    get_source,
    label_source,
    resolve_dispute,
    run_decay_cycle,
    unlabel_source,
)
from .entity_reads import entity_history, get_entity, list_entities, related_entities
from .erasure import erase_agent
from .gas import process_gas_event
from .graph import entry_relations, link_entries, related_entries
from .group_ingest import IngestItem, ingest_each
from .ingest import IngestRequest, ingest, prepare
from .maintenance import check_corroboration, process_outbox, trim_access_log
from .query import query

__all__ = [
    "Caller",
    "Deps",
    "IngestItem",
    "IngestRequest",
    "agent_profile",
    "aggregate_expertise",
    "archive_stale",
    "check_corroboration",
    "deprecate_entry",
    "domains_at_risk",
    "entity_history",
    "entry_relations",
    "erase_agent",
    "force_decay",
    "get_entity",
    "get_expertise",
    "get_source",
    "ingest",
    "ingest_each",
    "ingest_many",
    "label_source",
    "link_entries",
    "list_entities",
    "prepare",
    "process_gas_event",
    "process_outbox",
    "query",
    "related_entities",
    "related_entries",
    "resolve_dispute",
    "resolve_viewer",
    "run_decay_cycle",
    "scoped_key",
    "trim_access_log",
    "unlabel_source",
]
