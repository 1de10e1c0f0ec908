"""Rows to domain values and back: the columns read, and how each row becomes a value."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from pgvector import Vector
from psycopg import sql

from apollo_domain.model import (
    AccessScope,
    ContentType,
    Entry,
    Evidence,
    Relation,
    RelationType,
    SourceRef,
    Status,
)
from apollo_domain.ports import ExpertiseRecord

from .session import Row

_ENTRY_COLUMN_NAMES = (
    "id, content, content_hash, content_type, knowledge_domain, tags, confidence, status,"
    " source_agent, source_provider, source_channel, submitted_by, submitted_from,"
    " access_scope, owner_id, source_context, access_count, created_at, updated_at,"
    " confirmed_at, decayed_at, episode_id, episode_position"
)
ENTRY_COLUMN_NAMES = _ENTRY_COLUMN_NAMES
ENTRY_COLUMNS = sql.SQL(_ENTRY_COLUMN_NAMES)
ENTRY_COLUMNS_WITH_EMBEDDING = sql.SQL(_ENTRY_COLUMN_NAMES + ", embedding")

# The rows whose source_context may name an agent (a JSON string equal to the parameter,
# as a value or a key); the caller redacts them exactly with apollo_domain.redaction.
MENTIONS = "strpos(source_context::text, to_jsonb(%s::text)::text) > 0"


def as_utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def entry_from_row(row: Row) -> Entry:
    embedding = row.get("embedding")
    return Entry(
        id=row["id"],
        content=row["content"],
        content_hash=row["content_hash"],
        content_type=ContentType(row["content_type"]),
        knowledge_domain=row["knowledge_domain"],
        tags=tuple(row["tags"]),
        confidence=row["confidence"],
        status=Status(row["status"]),
        source=SourceRef(
            agent_id=row["source_agent"],
            provider=row["source_provider"],
            channel=row["source_channel"],
            submitted_by=row["submitted_by"],
            submitted_from=row["submitted_from"],
        ),
        access_scope=AccessScope(row["access_scope"]),
        owner_id=row["owner_id"],
        created_at=row["created_at"].astimezone(UTC),
        updated_at=row["updated_at"].astimezone(UTC),
        source_context=row["source_context"],
        embedding=None if embedding is None else tuple(embedding.to_list()),
        access_count=row["access_count"],
        confirmed_at=as_utc(row["confirmed_at"]),
        decayed_at=as_utc(row["decayed_at"]),
        episode_id=row["episode_id"],
        position=row["episode_position"],
    )


def as_vector(embedding: Sequence[float]) -> Vector:
    return Vector([float(x) for x in embedding])


def relation_from_row(row: Row) -> Relation:
    return Relation(
        from_id=row["from_id"],
        to_id=row["to_id"],
        relation_type=RelationType(row["relation_type"]),
        weight=row["weight"],
        created_at=as_utc(row["created_at"]),
        source_context=row["source_context"],
    )


def evidence_from_row(row: Row) -> Evidence:
    return Evidence(
        entry_id=row["entry_id"],
        source=SourceRef(
            agent_id=row["agent_id"],
            provider=row["provider"],
            channel=row["channel"],
            submitted_by=row["submitted_by"],
            submitted_from=row["submitted_from"],
        ),
        similarity=row["similarity"],
        created_at=row["created_at"].astimezone(UTC),
        kind=row["kind"],
        credibility=row["credibility"],
    )


EVIDENCE_COLUMNS = (
    "entry_id, agent_id, provider, channel, submitted_by, submitted_from, similarity, kind,"
    " created_at, credibility"
)


def expertise_from_row(row: Row) -> ExpertiseRecord:
    return ExpertiseRecord(
        agent_id=row["agent_id"],
        knowledge_domain=row["knowledge_domain"],
        entry_count=row["entry_count"],
        proficiency=row["proficiency"],
        last_active_at=as_utc(row["last_active_at"]),
    )


EXPERTISE_SELECT = (
    "SELECT agent_id, knowledge_domain, entry_count, proficiency, last_active_at FROM expertise"
)
