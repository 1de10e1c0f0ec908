"""Use cases: application services over the ports. Async, I/O only through ports."""

from .access_log import trim_access_log
from .bulk_ingest import ingest_many, store_many
from .context import Caller, Deps, resolve_viewer, scoped_key
from .corroboration import check_corroboration
from .decay import archive_stale, force_decay, run_decay_cycle
from .entity_reads import entity_history, get_entity, list_entities, related_entities
from .entries import get_entry, get_evidence, stats
from .erasure import erase_agent
from .expertise import agent_profile, aggregate_expertise, domains_at_risk, get_expertise
from .gas import process_gas_event
from .graph import get_relations, link_entries, related_entries
from .group_ingest import IngestItem, ingest_each
from .ingest import IngestRequest, ingest, prepare, store_knowledge, store_writeback
from .lifecycle import deprecate_entry, resolve_dispute
from .outbox import process_outbox
from .query import query
from .sources import get_source, label_source, unlabel_source
from .texts import get_episode, store_text

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
    "erase_agent",
    "force_decay",
    "get_entity",
    "get_entry",
    "get_episode",
    "get_evidence",
    "get_expertise",
    "get_relations",
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
    "stats",
    "store_knowledge",
    "store_many",
    "store_text",
    "store_writeback",
    "trim_access_log",
    "unlabel_source",
]
