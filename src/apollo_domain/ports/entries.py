"""The entry repository, by purpose: searching, reading, writing and maintenance.

:class:`EntryRepository` is all four, as every store's unit of work offers it
(``uow.entries``); a use case may name only the part it needs. Every read or search that
takes a :class:`~apollo_domain.ports.records.SearchFilter` never returns an entry the
filter's viewer may not see. Writes take effect only when the enclosing unit of work
commits. The confidence arithmetic of :meth:`EntryWrites.boost` and
:meth:`EntryMaintenance.decay` is the confidence policy's
(:class:`~apollo_domain.policy.ConfidencePolicy`): the store applies its formulas with the
numbers it is given, set-based, and keeps no rule of its own.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Final, Protocol
from uuid import UUID

from ..model import AccessScope, Entry, Viewer
from .records import (
    AgentDomainStats,
    BatchNeighbours,
    DecayOutcome,
    ScoredEntry,
    SearchFilter,
    StoreStats,
)

#: How many of the nearest entries a vector search capped per source looks among at least
#: (pgvector's largest ``hnsw.ef_search``).
SOURCE_SCAN: Final = 1000


class EntrySearch(Protocol):
    """Entries ranked by their similarity to an embedding or their relevance to a text."""

    async def nearest(
        self, embedding: Sequence[float], flt: SearchFilter, limit: int, *, ingest: bool = False
    ) -> list[ScoredEntry]:
        """Up to ``limit`` entries matching ``flt``, by cosine similarity, highest first.

        Returns ``limit`` rows whenever that many entries match the filter, however
        selective it is. Ties broken by id for determinism.

        ``ingest``: the search is an ingest's look for the neighbours it acts on (near
        duplicates, entries it may corroborate or agree with, its novelty), which lie close
        to the text. An approximate adapter may then search with less breadth than for a
        query (PostgreSQL: its ingest ``hnsw.ef_search``); an exact one ignores it.
        """

    async def nearest_many(
        self,
        embeddings: Sequence[Sequence[float]],
        flt: SearchFilter,
        limit: int,
        *,
        ingest: bool = False,
    ) -> list[list[ScoredEntry]]:
        """``nearest`` for each embedding, in order, against the same filter (one pass over
        the store where the adapter can batch it)."""

    async def nearest_batch(
        self, embeddings: Sequence[Sequence[float]], flt: SearchFilter, limit: int
    ) -> list[BatchNeighbours]:
        """The neighbours of a batch of new entries that are to be stored in order, each as if
        searched with :meth:`nearest` once the earlier ones of the batch were stored (the caller
        guarantees that their entries would match ``flt``). One :class:`BatchNeighbours` per
        embedding, in order: ``stored`` is ``nearest(embeddings[i], flt, limit, ingest=True)``
        over the entries stored now; ``earlier`` holds every ``j < i`` whose similarity to
        ``i`` is at least the lowest similarity in ``stored`` (every ``j < i`` when ``stored``
        has fewer than ``limit`` entries), the similarity computed exactly as :meth:`nearest`
        computes it for a stored entry. Where the adapter can, the whole batch is one pass over
        the store."""

    async def nearest_ids(
        self,
        embedding: Sequence[float],
        flt: SearchFilter,
        limit: int,
        *,
        per_source: int | None = None,
    ) -> list[tuple[UUID, float]]:
        """:meth:`nearest` (a query's search, not an ingest's) as ``(entry id, similarity)``
        pairs: the same entries, in the same order, with the same similarities and tie
        rule, without reading the entries whole (a caller that keeps only a few of many
        candidates reads those afterwards).

        ``per_source``: as :meth:`lexical_search_ids`'s, over (at least) the nearest
        :data:`SOURCE_SCAN` entries: an approximate adapter caps the sources among that
        many of its index's nearest, an exact one may look further. One statement."""

    async def lexical_search(self, query: str, flt: SearchFilter, limit: int) -> list[ScoredEntry]:
        """Up to ``limit`` entries matching ``flt`` that hold at least one of the query's
        terms (:func:`apollo_domain.lexical.query_terms`: stop words never match), most
        relevant first; ties broken by id. ``similarity`` is the entry's
        :func:`apollo_domain.lexical.rank` for the query, the same on every adapter
        (PostgreSQL's ``ts_rank`` over its ``simple`` full-text configuration, which the
        in-memory store computes the same way): positive, higher is better, and a function
        of the entry and the query alone. Sees the entries written earlier in the same
        unit of work, and nothing that unit of work rolled back."""

    async def lexical_search_ids(
        self, query: str, flt: SearchFilter, limit: int, *, per_source: int | None = None
    ) -> list[tuple[UUID, float]]:
        """:meth:`lexical_search` as ``(entry id, score)`` pairs: the same entries, in the
        same order, with the same scores and tie rule, without reading the entries whole.

        ``per_source``: at most that many entries of one source agent, and of one
        principal (the entry's ``owner_id``, else its ``source.submitted_by``; an entry
        with neither counts under its agent alone), are
        returned: the best of each, as :meth:`lexical_search` ranks them, then the next
        best entries of other sources fill the ``limit`` (a query's fair page,
        :mod:`apollo_domain.fairness`, so that one source's many tied matches cannot push
        every other source's match out of the candidates). One statement."""


class EntryReads(Protocol):
    """Entries by id, by content, newest first, and counted."""

    async def get(self, entry_id: UUID, *, with_embedding: bool = False) -> Entry | None:
        """The entry regardless of visibility (callers check it), or None."""

    async def get_many(
        self, entry_ids: Collection[UUID], *, with_embedding: bool = False
    ) -> dict[UUID, Entry]:
        """Entries by id (missing ids are absent from the result); their embeddings only
        when ``with_embedding``. One statement where the adapter can."""

    async def near_pairs(
        self, entry_ids: Collection[UUID], similarity: float
    ) -> set[tuple[UUID, UUID]]:
        """The pairs of distinct embedded entries among ``entry_ids`` whose embeddings'
        cosine is at least ``similarity``, each as (smaller id, larger id): one read, the
        embeddings compared where they are stored (a fair page's folding,
        :func:`apollo_domain.fairness.fair_page`)."""

    async def find_by_hash(
        self,
        content_hash: str,
        access_scope: AccessScope,
        owner_id: str | None,
        *,
        lock: bool = False,
    ) -> Entry | None:
        """The non-archived entry of that dedup partition with that content hash, or None.

        The partition is (access_scope, owner_id), except that every global entry belongs
        to one partition whatever its owner (``owner_id`` is ignored for global).

        ``lock``: the entry is returned with its row locked until the unit of work ends, as
        by :meth:`lock`. A concurrent unit of work that holds the row lock is waited for,
        then the entry is judged as it committed: one it archived is not found."""

    async def find_by_hashes(
        self, keys: Sequence[tuple[str, AccessScope, str | None]]
    ) -> list[Entry | None]:
        """:meth:`find_by_hash` for each ``(content_hash, access_scope, owner_id)``, in order
        (one statement where the adapter can)."""

    async def in_episodes(
        self, spans: Sequence[tuple[UUID, int, int]], viewer: Viewer | None
    ) -> list[Entry]:
        """The unarchived entries ``viewer`` may see (None: every one, for the embedding
        program) whose place in an episode falls within one of ``spans`` (episode id,
        first position, last position, both included), each once, ordered by episode id,
        then position: one read for every span."""

    async def browse(self, flt: SearchFilter, limit: int) -> list[Entry]:
        """Up to ``limit`` entries matching ``flt``, newest first (created_at, then id)."""

    async def by_agent(self, agent_id: str) -> list[Entry]:
        """Every entry whose source agent is ``agent_id`` (any status)."""

    async def stats(self, viewer: Viewer, now: datetime) -> StoreStats:
        """Counts over the entries the viewer can see (total relations included)."""

    async def agent_domain_stats(
        self,
        viewer: Viewer | None = None,
        *,
        domain: str | None = None,
        agent_id: str | None = None,
    ) -> list[AgentDomainStats]:
        """Per (source agent, domain) with active entries: their count, average confidence
        and confirmed count, and the corroboration and agreement evidence the agent holds on
        active entries of the domain; over the entries ``viewer`` may see (``None``: every
        entry), optionally of one domain or one agent; ordered by agent, then domain."""


class EntryWrites(Protocol):
    """New entries, changed entries, row locks and confidence boosts."""

    async def add(self, entry: Entry) -> None:
        """Insert a new entry (with ``entry.embedding`` when present).

        Raises :class:`Conflict` when an active entry with the same
        (content_hash, access_scope, owner_id) exists — the dedup uniqueness rule — and
        then writes nothing: the unit of work goes on as if the call had not been made. A
        confidence outside [0, 1] is :class:`PersistenceFailed` (on :meth:`update` too).
        """

    async def add_many(self, entries: Sequence[Entry]) -> set[UUID]:
        """:meth:`add` for each entry, in order, except that an entry whose dedup partition
        already holds an active entry with its content hash is skipped, not raised; returns
        the ids of the entries inserted. The entries' own (content_hash, access_scope,
        owner_id) keys must be distinct."""

    async def update(self, entry: Entry) -> None:
        """Replace the mutable fields of an existing entry: status, confidence, tags,
        knowledge domain, source, owner, access scope, source_context, confirmed_at,
        updated_at and decayed_at (its content, content type, embedding, access count and
        creation time never change). Raises :class:`NotFound` for an unknown entry, and
        :class:`Conflict` (changing nothing) when the change would make it a second active
        entry of its dedup partition."""

    async def lock(self, entry_id: UUID) -> Entry | None:
        """The entry (no embedding) with its row locked until the unit of work ends, or
        None. A use case that reads an entry's state (its evidence included) and then
        writes on its strength locks it first: a concurrent unit of work locking the same
        entry waits, then sees the first one's committed writes."""

    async def lock_many(self, entry_ids: Collection[UUID]) -> dict[UUID, Entry]:
        """:meth:`lock` for each id (missing ids are absent from the result), the locks taken
        in id order so that two units of work locking overlapping sets cannot deadlock."""

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
        """Atomically ``confidence = LEAST(confidence + amount, 1.0)`` (and
        ``access_count += 1`` when ``count_access``) for each id, once per id however often
        it is named; returns the confidences after it. This is the confidence policy's
        boost (``after_retrieval`` with its ``retrieval_boost``, ``after_corroboration``
        with its ``corroboration_amount``), which the store applies and never restates.

        With an ``earner`` (a retrieval boost: the principal whose query returned the
        entries), an entry gains ``amount`` only when that earner earned none on it within
        ``window`` before ``now``; the earning is recorded (entry, earner) → ``now`` in the
        same atomic step. The others are counted, not boosted. The records go with their
        entry, and :meth:`forget_earner` erases an earner's.

        Archived entries are never boosted: they are skipped and absent from the result,
        like unknown ids. Concurrent boosts are never lost (no read-modify-write), and the
        rows are locked in id order, so boosts and other writers locking several entries
        in id order never deadlock."""

    async def boost_each(self, boosts: Sequence[tuple[UUID, float, datetime]]) -> dict[UUID, float]:
        """:meth:`boost` (``count_access=False``) of each ``(entry_id, amount, now)``, in
        order: an entry named twice is boosted twice. Returns the final confidences."""


class EntryMaintenance(Protocol):
    """Set-based passes over every entry (decay, scaling, archiving, the checker's
    candidates) and erasure."""

    async def decay(
        self, now: datetime, factor_per_hour: float, archive_below: float
    ) -> DecayOutcome:
        """One set-based pass: each active entry's confidence times
        ``factor_per_hour ** hours since its last decay (or creation)`` (the confidence
        policy's ``decayed``), then archive active entries below ``archive_below`` (its
        ``should_archive``) with ``source_context.archive_reason = 'decayed'``. An entry's
        last decay time never moves back: one created after ``now`` keeps its creation
        time."""

    async def scale_confidence(self, factor: float, now: datetime) -> int:
        """Multiply the confidence of every non-archived entry; returns the count."""

    async def archive_stale(self, cutoff: datetime, now: datetime) -> int:
        """Archive non-archived entries with COALESCE(updated_at, created_at) < cutoff."""

    async def candidates(self, limit: int, now: datetime) -> list[Entry]:
        """Up to ``limit`` candidate entries with embeddings, least recently checked first
        (never checked first, then created_at, id), each stamped as checked at ``now``; the
        stamps commit with the unit of work, so successive runs reach every candidate.
        The candidates are returned with their rows locked, as by :meth:`lock`: one a
        concurrent unit of work holds is waited for, and left out when it committed a
        status other than candidate. The stamp changes no field of the entry."""

    async def forget_boosts_before(self, cutoff: datetime) -> int:
        """Forget every record of a retrieval boost earned at or before ``cutoff`` (one a
        window ending at or before now no longer holds back: see :meth:`boost`); returns
        how many there were."""

    async def forget_earner(self, earner: str) -> int:
        """Erasure: forget when ``earner`` earned retrieval boosts (see :meth:`boost`);
        returns how many records there were."""

    async def delete(self, entry_ids: Collection[UUID]) -> int:
        """Delete entries with their evidence and relations; returns the count deleted."""

    async def redact_context(self, agent_id: str, replacement: str, now: datetime) -> int:
        """Erasure: in every entry's ``source_context``, replace each string equal to
        ``agent_id`` (a value or a key, at any depth; see
        :func:`apollo_domain.redaction.redact_value`) with ``replacement`` and set
        ``updated_at = now``; returns the number of entries changed."""


class EntryRepository(EntrySearch, EntryReads, EntryWrites, EntryMaintenance, Protocol):
    """Entries and their embeddings: every part above, as ``uow.entries`` offers them."""


__all__ = ["EntryMaintenance", "EntryReads", "EntryRepository", "EntrySearch", "EntryWrites"]
