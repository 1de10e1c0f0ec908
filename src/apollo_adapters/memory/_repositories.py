"""The repositories of an in-memory unit of work: each checks its part, then uses the tables."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol
from uuid import UUID

import attrs

from apollo_adapters.threads import off_loop
from apollo_domain.entities import Entity, EntityEdge, EntityMention
from apollo_domain.episodes import Episode
from apollo_domain.lexical import occurrences, query_terms
from apollo_domain.model import (
    AccessScope,
    Entry,
    Evidence,
    Relation,
    RelationType,
    SourceRef,
    Viewer,
)
from apollo_domain.ports import (
    AccessLogRecord,
    AgentDomainStats,
    BatchNeighbours,
    CredibilityRecord,
    DecayOutcome,
    ExpertiseRecord,
    GraphSurroundings,
    OutboxItem,
    ScoredEntry,
    SearchFilter,
    StoreStats,
)

from ._columns import Undo
from ._entries import EntryTable
from ._records import (
    AccessLogTable,
    CredibilityTable,
    EpisodeTable,
    ExpertiseTable,
    OutboxTable,
    ProcessedTable,
)


class _Tables(Protocol):
    """What the repositories use of the store: its tables."""

    _entries: EntryTable
    _expertise: ExpertiseTable
    _access_log: AccessLogTable
    _credibility: CredibilityTable
    _outbox: OutboxTable
    _processed: ProcessedTable
    _episodes: EpisodeTable


class _Work(Protocol):
    """What the repositories use of their unit of work: the store, and the undo log of a
    part once checked that it may be used now."""

    @property
    def _store(self) -> _Tables: ...

    def _open(self, part: str) -> Undo: ...


def _occurrences_of(entries: Sequence[Entry]) -> list[dict[str, int]]:
    """The lexical terms of each entry (for the index), computed together: off the event
    loop when the texts are long."""
    return [occurrences(entry.content) for entry in entries]


class _Repository:
    __slots__ = ("_store", "_uow")

    def __init__(self, uow: _Work) -> None:
        self._uow = uow
        self._store = uow._store


class InMemoryEntryRepository(_Repository):
    __slots__ = ()

    async def add(self, entry: Entry) -> None:
        undo = self._uow._open("entries")
        terms = await off_loop(len(entry.content), occurrences, entry.content)
        self._store._entries.add(entry, undo, terms)

    async def get(self, entry_id: UUID, *, with_embedding: bool = False) -> Entry | None:
        self._uow._open("entries")
        return self._store._entries.get(entry_id, with_embedding)

    async def get_many(
        self, entry_ids: Collection[UUID], *, with_embedding: bool = False
    ) -> dict[UUID, Entry]:
        self._uow._open("entries")
        return self._store._entries.get_many(entry_ids, with_embedding)

    async def near_pairs(
        self, entry_ids: Collection[UUID], similarity: float
    ) -> set[tuple[UUID, UUID]]:
        self._uow._open("entries")
        return self._store._entries.near_pairs(list(entry_ids), similarity)

    async def in_episodes(
        self, spans: Sequence[tuple[UUID, int, int]], viewer: Viewer | None
    ) -> list[Entry]:
        self._uow._open("entries")
        return self._store._entries.in_episodes(spans, viewer)

    async def find_by_hash(
        self,
        content_hash: str,
        access_scope: AccessScope,
        owner_id: str | None,
        *,
        lock: bool = False,
    ) -> Entry | None:
        self._uow._open("entries")  # units of work are serialized: a found entry is ours
        return self._store._entries.find_by_hash(content_hash, access_scope, owner_id)

    async def find_by_hashes(
        self, keys: Sequence[tuple[str, AccessScope, str | None]]
    ) -> list[Entry | None]:
        self._uow._open("entries")
        return [self._store._entries.find_by_hash(*key) for key in keys]

    async def nearest(
        self, embedding: Sequence[float], flt: SearchFilter, limit: int, *, ingest: bool = False
    ) -> list[ScoredEntry]:
        # exact: ``ingest`` searches with the same breadth
        self._uow._open("entries")
        return self._store._entries.nearest(embedding, flt, limit)

    async def nearest_batch(
        self, embeddings: Sequence[Sequence[float]], flt: SearchFilter, limit: int
    ) -> list[BatchNeighbours]:
        self._uow._open("entries")
        return self._store._entries.nearest_batch(embeddings, flt, limit)

    async def nearest_many(
        self,
        embeddings: Sequence[Sequence[float]],
        flt: SearchFilter,
        limit: int,
        *,
        ingest: bool = False,  # exact: every search has the same breadth
    ) -> list[list[ScoredEntry]]:
        self._uow._open("entries")
        return self._store._entries.nearest_many(embeddings, flt, limit)

    async def lexical_search(self, query: str, flt: SearchFilter, limit: int) -> list[ScoredEntry]:
        self._uow._open("entries")
        return self._store._entries.lexical_search(query, flt, limit)

    async def nearest_ids(
        self,
        embedding: Sequence[float],
        flt: SearchFilter,
        limit: int,
        *,
        per_source: int | None = None,
    ) -> list[tuple[UUID, float]]:
        if per_source is None:
            return [(h.entry.id, h.similarity) for h in await self.nearest(embedding, flt, limit)]
        self._uow._open("entries")  # exact: looks among every entry
        return self._store._entries.nearest_capped(embedding, flt, limit, per_source)

    async def lexical_search_ids(
        self, query: str, flt: SearchFilter, limit: int, *, per_source: int | None = None
    ) -> list[tuple[UUID, float]]:
        if per_source is None:
            hits = await self.lexical_search(query, flt, limit)
            return [(h.entry.id, h.similarity) for h in hits]
        self._uow._open("entries")
        return self._store._entries.lexical_capped(query, flt, limit, per_source)

    async def browse(self, flt: SearchFilter, limit: int) -> list[Entry]:
        self._uow._open("entries")
        return self._store._entries.browse(flt, limit)

    async def lock(self, entry_id: UUID) -> Entry | None:
        self._uow._open("entries")  # units of work are serialized: the entry is ours
        return self._store._entries.get(entry_id, False)

    async def lock_many(self, entry_ids: Collection[UUID]) -> dict[UUID, Entry]:
        self._uow._open("entries")  # units of work are serialized: the entries are ours
        return self._store._entries.get_many(entry_ids)

    async def add_many(self, entries: Sequence[Entry]) -> set[UUID]:
        undo = self._uow._open("entries")
        table = self._store._entries
        size = sum(len(entry.content) for entry in entries)
        terms = await off_loop(size, _occurrences_of, entries)
        inserted = set()
        for entry, counts in zip(entries, terms, strict=True):
            if table.find_by_hash(entry.content_hash, entry.access_scope, entry.owner_id) is None:
                table.add(entry, undo, counts)
                inserted.add(entry.id)
        return inserted

    async def update(self, entry: Entry) -> None:
        self._store._entries.update(entry, self._uow._open("entries"))

    async def boost(
        self,
        entry_ids: Sequence[UUID],
        amount: float,
        now: datetime,
        *,
        count_access: bool,
        earner: str | None = None,
        window: timedelta = timedelta(0),
    ) -> dict[UUID, float]:
        undo = self._uow._open("entries")
        return self._store._entries.boost(
            entry_ids, amount, now, count_access, undo, earner, window
        )

    async def forget_earner(self, earner: str) -> int:
        return self._store._entries.boosts.forget(earner, self._uow._open("entries"))

    async def forget_boosts_before(self, cutoff: datetime) -> int:
        return self._store._entries.boosts.forget_before(cutoff, self._uow._open("entries"))

    async def boost_each(self, boosts: Sequence[tuple[UUID, float, datetime]]) -> dict[UUID, float]:
        undo = self._uow._open("entries")
        final: dict[UUID, float] = {}
        for entry_id, amount, now in boosts:
            final.update(self._store._entries.boost([entry_id], amount, now, False, undo))
        return final

    async def decay(
        self, now: datetime, factor_per_hour: float, archive_below: float
    ) -> DecayOutcome:
        undo = self._uow._open("entries")
        return self._store._entries.decay(now, factor_per_hour, archive_below, undo)

    async def scale_confidence(self, factor: float, now: datetime) -> int:
        return self._store._entries.scale_confidence(factor, self._uow._open("entries"))

    async def archive_stale(self, cutoff: datetime, now: datetime) -> int:
        return self._store._entries.archive_stale(cutoff, now, self._uow._open("entries"))

    async def candidates(self, limit: int, now: datetime) -> list[Entry]:
        undo = self._uow._open("entries")
        return self._store._entries.candidates(limit, now, undo)

    async def agent_domain_stats(
        self,
        viewer: Viewer | None = None,
        *,
        domain: str | None = None,
        agent_id: str | None = None,
    ) -> list[AgentDomainStats]:
        self._uow._open("entries")
        return self._store._entries.agent_domain_stats(viewer, domain=domain, agent_id=agent_id)

    async def stats(self, viewer: Viewer, now: datetime) -> StoreStats:
        self._uow._open("entries")
        return self._store._entries.stats(viewer, now)

    async def by_agent(self, agent_id: str) -> list[Entry]:
        self._uow._open("entries")
        return self._store._entries.by_agent(agent_id)

    async def delete(self, entry_ids: Collection[UUID]) -> int:
        return self._store._entries.delete(entry_ids, self._uow._open("entries"))

    async def redact_context(self, agent_id: str, replacement: str, now: datetime) -> int:
        undo = self._uow._open("entries")
        return self._store._entries.redact_context(agent_id, replacement, now, undo)


class InMemoryRelationRepository(_Repository):
    __slots__ = ()

    async def add(self, relation: Relation) -> bool:
        return self._store._entries.relations.add(relation, self._uow._open("relations"))

    async def outgoing(
        self, entry_ids: Collection[UUID], types: Collection[RelationType] | None = None
    ) -> list[Relation]:
        self._uow._open("relations")
        return self._store._entries.relations.outgoing(entry_ids, types)

    async def incoming(
        self, entry_ids: Collection[UUID], types: Collection[RelationType] | None = None
    ) -> list[Relation]:
        self._uow._open("relations")
        return self._store._entries.relations.incoming(entry_ids, types)

    async def exists(self, from_id: UUID, to_id: UUID, relation_type: RelationType) -> bool:
        self._uow._open("relations")
        return self._store._entries.relations.exists((from_id, to_id, RelationType(relation_type)))

    async def count(self) -> int:
        self._uow._open("relations")
        return self._store._entries.relations.count()

    async def redact_context(self, agent_id: str, replacement: str) -> int:
        undo = self._uow._open("relations")
        return self._store._entries.relations.redact_context(agent_id, replacement, undo)


class InMemoryEntityGraph(_Repository):
    __slots__ = ()

    async def resolve(self, mentions: Sequence[EntityMention], now: datetime) -> list[Entity]:
        return self._store._entries.graph.resolve(mentions, now, self._uow._open("graph"))

    async def index_many(
        self, entries: Sequence[tuple[UUID, Sequence[UUID], Sequence[UUID], datetime]]
    ) -> None:
        undo = self._uow._open("graph")
        graph = self._store._entries.graph
        for entry_id, entity_ids, beside, now in entries:
            graph.tag(entry_id, entity_ids, undo)
            graph.link_co_occurring(entry_id, entity_ids, now, undo, beside)

    async def relate(
        self, src_id: UUID, relation: str, dst_id: UUID, entry_id: UUID, now: datetime
    ) -> EntityEdge:
        undo = self._uow._open("graph")
        return self._store._entries.graph.relate(src_id, relation, dst_id, entry_id, now, undo)

    async def entities_of(self, entry_id: UUID) -> list[Entity]:
        self._uow._open("graph")
        return self._store._entries.graph.entities_of(entry_id)

    async def find(self, keys: Collection[str], viewer: Viewer) -> list[Entity]:
        self._uow._open("graph")
        return self._store._entries.graph.find(keys, viewer)

    async def counted(self, keys: Collection[str], viewer: Viewer) -> list[tuple[Entity, int]]:
        self._uow._open("graph")
        return self._store._entries.graph.counted(keys, viewer)

    async def with_prefix(
        self, prefix: str, viewer: Viewer, limit: int
    ) -> list[tuple[Entity, int]]:
        self._uow._open("graph")
        return self._store._entries.graph.with_prefix(prefix, viewer, limit)

    async def get_many(self, entity_ids: Collection[UUID]) -> dict[UUID, Entity]:
        self._uow._open("graph")
        return self._store._entries.graph.get_many(entity_ids)

    async def edges(
        self,
        entity_ids: Collection[UUID],
        viewer: Viewer,
        *,
        as_of: datetime | None = None,
        history: bool = False,
        typed: bool | None = None,
        limit: int | None = None,
    ) -> list[EntityEdge]:
        self._uow._open("graph")
        graph = self._store._entries.graph
        return graph.edges(entity_ids, viewer, as_of, history=history, typed=typed, limit=limit)

    async def neighbours(
        self, entity_ids: Collection[UUID], viewer: Viewer, limit: int
    ) -> list[tuple[UUID, int]]:
        self._uow._open("graph")
        return self._store._entries.graph.neighbours(entity_ids, viewer, limit)

    async def entries_mentioning(
        self, entity_ids: Collection[UUID], flt: SearchFilter, limit: int
    ) -> list[tuple[Entry, frozenset[UUID]]]:
        self._uow._open("graph")
        return self._store._entries.graph.entries_mentioning(entity_ids, flt, limit)

    async def mentioning(
        self, entity_ids: Collection[UUID], flt: SearchFilter, limit: int
    ) -> list[tuple[UUID, frozenset[UUID]]]:
        found = await self.entries_mentioning(entity_ids, flt, limit)
        return [(entry.id, matched) for entry, matched in found]

    async def hop_search(
        self,
        entity_ids: Collection[UUID],
        text: str,
        flt: SearchFilter,
        limit: int,
        *,
        bridges: int,
    ) -> list[tuple[UUID, float, frozenset[UUID]]]:
        self._uow._open("graph")
        entries = self._store._entries
        reached = entries.graph.reached(entity_ids, flt.viewer, bridges)
        if flt.only_ids is not None:
            reached = {e: seeds for e, seeds in reached.items() if e in flt.only_ids}
        if not reached or limit <= 0:
            return []
        about = entries.graph.mentioning_any(entity_ids)
        if flt.only_ids is not None:
            about &= flt.only_ids
        answering = entries.matching(attrs.evolve(flt, only_ids=about), embedded=False)
        unanswered = [
            term
            for term in query_terms(text)
            if answering is None or not entries.lexical.scores([term], answering)
        ]
        if not unanswered:
            return []
        holding = entries.lexical_search(
            " ".join(unanswered), attrs.evolve(flt, only_ids=frozenset(reached)), len(reached)
        )
        within = attrs.evolve(flt, only_ids=frozenset(hit.entry.id for hit in holding))
        hits = entries.lexical_search(text, within, limit)
        return [(hit.entry.id, hit.similarity, reached[hit.entry.id]) for hit in hits]

    async def surroundings(
        self,
        entity_ids: Collection[UUID],
        flt: SearchFilter,
        *,
        neighbours: int,
        scan: int,
        hop_text: str | None = None,
        hop_limit: int = 0,
        bridges: int = 0,
    ) -> GraphSurroundings:
        linked = await self.neighbours(entity_ids, flt.viewer, neighbours)
        tagged = await self.mentioning([*entity_ids, *(e for e, _ in linked)], flt, scan)
        hops = (
            []
            if hop_text is None
            else await self.hop_search(entity_ids, hop_text, flt, hop_limit, bridges=bridges)
        )
        return GraphSurroundings(linked, tagged, hops)

    async def prune(self) -> int:
        return self._store._entries.graph.prune(self._uow._open("graph"))


class InMemoryEvidenceRepository(_Repository):
    __slots__ = ()

    async def add(self, evidence: Evidence) -> bool:
        return self._store._entries.evidence.add(evidence, self._uow._open("evidence"))

    async def add_many(self, evidence: Sequence[Evidence]) -> list[bool]:
        undo = self._uow._open("evidence")
        return [self._store._entries.evidence.add(item, undo) for item in evidence]

    async def add_origin(self, evidence: Evidence) -> None:
        await self.add(evidence)

    async def for_entry(self, entry_id: UUID) -> list[Evidence]:
        self._uow._open("evidence")
        return self._store._entries.evidence.for_entry(entry_id)

    async def for_entries(self, entry_ids: Collection[UUID]) -> dict[UUID, list[Evidence]]:
        self._uow._open("evidence")
        table = self._store._entries.evidence
        found = {entry_id: table.for_entry(entry_id) for entry_id in entry_ids}
        return {entry_id: evidence for entry_id, evidence in found.items() if evidence}

    async def forget_agent(self, agent_id: str, redacted: SourceRef) -> int:
        undo = self._uow._open("evidence")
        return self._store._entries.evidence.forget_agent(agent_id, redacted, undo)


class InMemoryExpertiseRepository(_Repository):
    __slots__ = ()

    async def record_activity(self, agent_id: str, domain: str, now: datetime) -> None:
        undo = self._uow._open("expertise")
        self._store._expertise.record_activity(agent_id, domain, now, undo)

    async def record_activities(self, activities: Sequence[tuple[str, str, datetime]]) -> None:
        undo = self._uow._open("expertise")
        for agent_id, domain, now in activities:
            self._store._expertise.record_activity(agent_id, domain, now, undo)

    async def replace_all(self, records: Sequence[ExpertiseRecord]) -> None:
        self._store._expertise.replace_all(records, self._uow._open("expertise"))

    async def for_domain(self, domain: str, min_proficiency: float) -> list[ExpertiseRecord]:
        self._uow._open("expertise")
        records = self._store._expertise.ordered(
            lambda r: r.knowledge_domain == domain and r.proficiency >= min_proficiency
        )
        records.sort(key=lambda r: -r.proficiency)  # stable: agent_id breaks ties
        return records

    async def all(self) -> list[ExpertiseRecord]:
        self._uow._open("expertise")
        return self._store._expertise.ordered()

    async def for_agent(self, agent_id: str) -> list[ExpertiseRecord]:
        self._uow._open("expertise")
        return self._store._expertise.ordered(lambda r: r.agent_id == agent_id)

    async def forget_agent(self, agent_id: str) -> int:
        return self._store._expertise.forget_agent(agent_id, self._uow._open("expertise"))


class InMemoryAccessLog(_Repository):
    __slots__ = ()

    async def record(self, records: Sequence[AccessLogRecord]) -> None:
        self._store._access_log.record(records, self._uow._open("access_log"))

    async def count(self, action: str | None = None) -> int:
        self._uow._open("access_log")
        return self._store._access_log.count(action)

    async def for_agent(self, agent_id: str) -> list[AccessLogRecord]:
        self._uow._open("access_log")
        return self._store._access_log.for_agent(agent_id)

    async def redact_agent(self, agent_id: str, replacement: str) -> int:
        undo = self._uow._open("access_log")
        return self._store._access_log.redact_agent(agent_id, replacement, undo)

    async def trim(self, cutoff: datetime, limit: int) -> int:
        undo = self._uow._open("access_log")
        return self._store._access_log.trim(cutoff, limit, undo)


class InMemoryCredibilityRegistry(_Repository):
    __slots__ = ()

    async def get(self, agent_id: str) -> CredibilityRecord:
        self._uow._open("credibility")
        return self._store._credibility.get(agent_id)

    async def get_many(self, agent_ids: Collection[str]) -> dict[str, CredibilityRecord]:
        self._uow._open("credibility")
        return {agent: self._store._credibility.get(agent) for agent in agent_ids}

    async def save(self, record: CredibilityRecord) -> None:
        self._store._credibility.save(record, self._uow._open("credibility"))

    async def add(self, agent_id: str, alpha_delta: float, beta_delta: float) -> CredibilityRecord:
        undo = self._uow._open("credibility")
        return self._store._credibility.add(agent_id, alpha_delta, beta_delta, undo)

    async def set_label(self, agent_id: str, label: str | None) -> CredibilityRecord:
        undo = self._uow._open("credibility")
        return self._store._credibility.set_label(agent_id, label, undo)

    async def forget(self, agent_id: str) -> bool:
        return self._store._credibility.forget(agent_id, self._uow._open("credibility"))


class InMemoryOutbox(_Repository):
    __slots__ = ()

    async def enqueue(self, kind: str, payload: Mapping[str, Any], now: datetime) -> None:
        self._store._outbox.enqueue(kind, payload, now, self._uow._open("outbox"))

    async def enqueue_many(self, items: Sequence[tuple[str, Mapping[str, Any], datetime]]) -> None:
        undo = self._uow._open("outbox")
        for kind, payload, now in items:
            self._store._outbox.enqueue(kind, payload, now, undo)

    async def claim(self, limit: int, now: datetime, *, lease_until: datetime) -> list[OutboxItem]:
        undo = self._uow._open("outbox")
        return self._store._outbox.claim(limit, now, lease_until, undo)

    async def complete(self, item_id: int) -> None:
        self._store._outbox.complete(item_id, self._uow._open("outbox"))

    async def fail(self, item_id: int, error: str, *, retry_at: datetime | None) -> None:
        self._store._outbox.fail(item_id, error, retry_at, self._uow._open("outbox"))

    async def pending(self) -> int:
        self._uow._open("outbox")
        return self._store._outbox.pending()


class InMemoryProcessedKeys(_Repository):
    __slots__ = ()

    async def mark(self, key: str, now: datetime) -> bool:
        return self._store._processed.mark(key, now, self._uow._open("processed"))

    async def mark_many(self, keys: Sequence[str], now: datetime) -> list[bool]:
        undo = self._uow._open("processed")
        return [self._store._processed.mark(key, now, undo) for key in keys]

    async def forget_many(self, keys: Sequence[str]) -> None:
        undo = self._uow._open("processed")
        for key in keys:
            self._store._processed.forget(key, undo)

    async def seen(self, key: str) -> bool:
        self._uow._open("processed")
        return key in self._store._processed.keys


class InMemoryEpisodeRepository(_Repository):
    __slots__ = ()

    async def add(self, episode: Episode) -> bool:
        return self._store._episodes.add(episode, self._uow._open("episodes"))

    async def get(self, episode_id: UUID) -> Episode | None:
        self._uow._open("episodes")
        return self._store._episodes.episodes.get(episode_id)

    async def forget_agent(self, agent_id: str) -> int:
        return self._store._episodes.forget_agent(agent_id, self._uow._open("episodes"))
