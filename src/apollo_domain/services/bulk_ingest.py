"""Bulk ingest (``store_many``): the rules and outcomes of ingesting one by one, in order,
with set-based reads and writes.

Each chunk runs in one unit of work. The store is read a fixed number of times whatever the
chunk's size: credibility of its sources, its exact duplicates, its nearest neighbours (with
the similarities between its own texts), the entries it may write evidence on, locked, and
their evidence. The steps of :mod:`.ingest` are then decided in memory, in order, over a
view that holds what the chunk itself wrote so far (an entry it created deduplicates or
neighbours a later one, evidence it recorded counts for the independence rule, a boost
raises the confidence a later one sees), and the chunk's writes go out table by table. When
a concurrent writer got in the way (an entry the reads found is gone or archived, a content
hash taken meanwhile), the chunk is redone one request after the other
(:func:`.ingest.ingest_chunk_in_order`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from attrs import define, evolve, field

from .. import admission
from ..bounds import STORE_MANY
from ..commands import StoreMany
from ..entities import Extraction
from ..episodes import Episode
from ..errors import TransientConflict, ValidationError
from ..model import DedupKey, Entry, Evidence, EvidenceKind, Outcome, Viewer
from ..ports import AccessLogRecord, ScoredEntry, SearchFilter, UnitOfWork
from ..results import IngestResult
from .context import (
    ACTIVE,
    INGEST_PARTS,
    Caller,
    Deps,
    as_floats,
    embed_readings,
    first_application,
    resolve_viewer,
)
from .entities import extract, index_entries
from .ingest import (
    CONTRADICTION_SCAN,
    NEIGHBOURS,
    IngestRequest,
    admit_new,
    credibility_of,
    duplicate_kind,
    duplicate_outcome,
    ingest_chunk_in_order,
    ingest_log_record,
    new_entry,
    prepare,
    replayed,
    support_outcome,
    supports,
)
from .write_rate import charge_write

BATCH_SIZE = 256


async def store_many(
    deps: Deps, caller: Caller, command: StoreMany, idempotency_key: str | None = None
) -> list[IngestResult]:
    """The ``store_many`` use case: every item prepared first (:func:`.ingest.prepare`; a
    bad one is refused naming ``items[<index>].<field>`` before anything is written), then
    :func:`ingest_many` as the agent the command credits."""
    acting = caller.acting_as(command.agent_id)
    STORE_MANY.check(len(command.items))
    requests = []
    for index, item in enumerate(command.items):
        try:
            requests.append(prepare(acting, item))
        except ValidationError as exc:
            raise ValidationError(f"items[{index}].{exc.field}", exc.message) from None
    await charge_write(deps, caller, len(requests))  # one token per item, all at once
    return await ingest_many(deps, acting, requests, idempotency_key=idempotency_key)


async def ingest_many(
    deps: Deps,
    caller: Caller,
    requests: Sequence[IngestRequest],
    *,
    idempotency_key: str | None = None,
) -> list[IngestResult]:
    """Bulk ingest with the same rules and outcomes as ingesting the requests one by one,
    in order. Each chunk of up to ``BATCH_SIZE`` requests is embedded in one call, searched
    against the store in one pass, and committed in one transaction (all or nothing).

    ``idempotency_key`` (a message id) is recorded per chunk in that chunk's transaction: a
    redelivery writes nothing for the chunks already committed and reports each of their
    requests as a replayed ingest does."""
    results: list[IngestResult] = []
    for number, start in enumerate(range(0, len(requests), BATCH_SIZE)):
        key = None if idempotency_key is None else f"{idempotency_key}:{number}"
        chunk = requests[start : start + BATCH_SIZE]
        results.extend(await ingest_chunk(deps, caller, chunk, idempotency_key=key))
    return results


#: The statements on either side of one in its episode whose entities co-occur with its own.
EPISODE_WINDOW = 1


def beside_each_other(extractions: Sequence[Extraction]) -> list[Extraction]:
    """Each statement's extraction with the entities of the :data:`EPISODE_WINDOW`
    statements before and after it as ``nearby``: the graph treats statements said next to
    each other as co-occurring (what one turn names, the next answers about)."""
    window = EPISODE_WINDOW
    said = list(extractions)
    return [
        evolve(
            extraction,
            nearby=tuple(
                mention
                for other in said[max(0, i - window) : i] + said[i + 1 : i + 1 + window]
                for mention in other.resolvable()
            ),
        )
        for i, extraction in enumerate(said)
    ]


class Interrupted(Exception):
    """A concurrent writer changed what the chunk's reads found: redo it in order (here,
    and in :mod:`.group_ingest`, which decides its groups with a :class:`Chunk` too)."""


async def ingest_chunk(
    deps: Deps,
    caller: Caller,
    requests: Sequence[IngestRequest],
    *,
    idempotency_key: str | None = None,
    kind: str = "store_many",
    episode: Episode | None = None,
    extractions: Sequence[Extraction | None] | None = None,
) -> list[IngestResult]:
    """At most ``BATCH_SIZE`` requests ingested in one unit of work (all or nothing) that
    records ``idempotency_key`` (as ``<kind>:<key>``) and ``episode`` (the text whose
    statements the requests are: :mod:`.texts`); either already recorded, nothing is
    written and each request is reported as a replayed ingest. ``extractions``: what a
    language model read in each request (None for one the entity extractor is to read)."""
    if len(requests) > BATCH_SIZE:
        raise ValueError(f"a chunk holds at most {BATCH_SIZE} requests, not {len(requests)}")
    store = deps.store
    await store.preflight(INGEST_PARTS)
    viewer = await resolve_viewer(store.directory, caller.principal)
    vectors = await embed_readings(deps, [r.content for r in requests])
    embeddings = [as_floats(v) for v in vectors]
    given = extractions or [None] * len(requests)
    read = [
        known if known is not None else await extract(deps.extractor, r.content)
        for r, known in zip(requests, given, strict=True)
    ]
    if episode is not None:
        read = beside_each_other(read)
    try:
        async with store.unit_of_work() as uow:
            if not await first_application(uow, kind, idempotency_key, deps.clock.now()) or (
                episode is not None and not await uow.episodes.add(episode)
            ):
                return replayed(await uow.entries.find_by_hashes([r.dedup_key for r in requests]))
            chunk = await Chunk.read(deps, uow, viewer, requests, embeddings)
            results = [chunk.decide(i, deps.clock.now()) for i in range(len(requests))]
            await chunk.write(uow, read)
            await uow.commit()
            return results
    except (Interrupted, TransientConflict):  # redone in order, each request alone
        return await ingest_chunk_in_order(
            deps, caller, requests, embeddings, read, idempotency_key, episode, kind
        )


@define
class Chunk:
    """A chunk's requests, what the store held for them when read, and the chunk's own
    writes so far: the view one-by-one ingest would have at each request. Bulk ingest
    decides each chunk with one, group commit (:mod:`.group_ingest`) each principal's part
    of a group."""

    deps: Deps
    viewer: Viewer
    requests: Sequence[IngestRequest]
    embeddings: Sequence[tuple[float, ...]]
    credibility: dict[str, float]
    #: each request's live entry holding its content (store or chunk), by partition key
    live: dict[DedupKey, uuid.UUID]
    #: each searched request's stored neighbours and earlier requests of its batch
    stored: dict[int, list[ScoredEntry]]
    earlier: dict[int, list[tuple[int, float]]]
    #: the current state of the entries this chunk may write on: locked or its own
    entries: dict[uuid.UUID, Entry]
    evidence: dict[uuid.UUID, list[Evidence]]
    created: dict[int, Entry] = field(factory=dict)
    # the writes, in request order
    new_entries: list[Entry] = field(factory=list)
    new_evidence: list[Evidence] = field(factory=list)
    boosts: list[tuple[uuid.UUID, float, datetime]] = field(factory=list)
    scans: list[tuple[uuid.UUID, datetime]] = field(factory=list)
    activities: list[tuple[str, str, datetime]] = field(factory=list)
    log: list[AccessLogRecord] = field(factory=list)

    # ------------------------------------------------------------------ reads

    @classmethod
    async def read(
        cls,
        deps: Deps,
        uow: UnitOfWork,
        viewer: Viewer,
        requests: Sequence[IngestRequest],
        embeddings: Sequence[tuple[float, ...]],
    ) -> Chunk:
        policy = deps.policy
        credibility = {
            agent: credibility_of(await uow.credibility.get(agent))
            for agent in dict.fromkeys(r.source.agent_id for r in requests)
        }
        admitted = [
            i
            for i, r in enumerate(requests)
            if admission.check_credibility(policy, credibility[r.source.agent_id]).admitted
        ]
        found = await uow.entries.find_by_hashes([requests[i].dedup_key for i in admitted])
        duplicates = {i: e for i, e in zip(admitted, found, strict=True) if e is not None}
        stored: dict[int, list[ScoredEntry]] = {}
        earlier: dict[int, list[tuple[int, float]]] = {}
        searched = [i for i in admitted if i not in duplicates]
        for scope in dict.fromkeys(requests[i].access_scope for i in searched):
            batch = [i for i in searched if requests[i].access_scope is scope]
            neighbours = await uow.entries.nearest_batch(
                [embeddings[i] for i in batch],
                SearchFilter(viewer, ACTIVE, access_scope=scope),
                NEIGHBOURS,
            )
            for i, near in zip(batch, neighbours, strict=True):
                stored[i] = near.stored
                earlier[i] = [(batch[j], similarity) for j, similarity in near.earlier]

        # Every entry the chunk may record evidence on is locked before its evidence is
        # read: the exact duplicates, and each neighbour that could be supported by a
        # request whatever evidence it holds (the independence rule can only say no).
        targets = {e.id for e in duplicates.values()}
        for i, nearest in stored.items():
            for n in nearest:
                if any(
                    supports(policy, viewer, requests[i], n.entry, n.similarity, (), kind)
                    for kind in (EvidenceKind.CORROBORATION, EvidenceKind.AGREEMENT)
                ):
                    targets.add(n.entry.id)
        entries = await uow.entries.lock_many(targets)
        for duplicate in duplicates.values():
            locked = entries.get(duplicate.id)
            if locked is None or not locked.status.is_active:
                raise Interrupted  # removed or archived since it was found
        repeat_checked = {
            n.entry.id for nearest in stored.values() for n in nearest
            if policy.is_near_duplicate(n.similarity)
        }  # fmt: skip
        evidence = await uow.evidence.for_entries(sorted(set(entries) | repeat_checked))
        return cls(
            deps=deps,
            viewer=viewer,
            requests=requests,
            embeddings=embeddings,
            credibility=credibility,
            live={requests[i].dedup_key: e.id for i, e in duplicates.items()},
            stored=stored,
            earlier=earlier,
            entries=entries,
            evidence={k: list(v) for k, v in evidence.items()},
        )

    # ------------------------------------------------------------------ decisions

    def decide(self, i: int, now: datetime) -> IngestResult:
        """Request ``i`` decided as :func:`.ingest.ingest` decides it, on the chunk's view."""
        request = self.requests[i]
        credibility = self.credibility[request.source.agent_id]
        floor = admission.check_credibility(self.deps.policy, credibility)
        if not floor.admitted:
            return IngestResult(Outcome.REJECTED, reason=f"{floor.reason}: {floor.detail}")
        existing = self.live.get(request.dedup_key)
        if existing is not None:  # step 4
            result = self._duplicate(request, self.entries[existing], credibility, now)
        else:
            result = self._place(i, request, credibility, now)
        if result.outcome is not Outcome.REJECTED:
            self.activities.append((request.source.agent_id, request.knowledge_domain, now))
            self.log.append(ingest_log_record(request, result, now))
        return result

    def _neighbours(self, i: int) -> list[ScoredEntry]:
        """Request ``i``'s nearest: the stored ones and the entries earlier requests of the
        chunk created, ranked as one search of the store would rank them."""
        mine = [
            ScoredEntry(self.created[j], similarity)
            for j, similarity in self.earlier.get(i, ())
            if j in self.created
        ]
        ranked = sorted(
            [*self.stored.get(i, ()), *mine], key=lambda n: (-n.similarity, str(n.entry.id))
        )
        return [
            ScoredEntry(self.entries.get(n.entry.id, n.entry), n.similarity)
            for n in ranked[:NEIGHBOURS]
        ]

    def _place(
        self, i: int, request: IngestRequest, credibility: float, now: datetime
    ) -> IngestResult:
        policy, viewer = self.deps.policy, self.viewer
        neighbours = self._neighbours(i)
        if any(n.entry.dedup_key == request.dedup_key for n in neighbours):
            raise Interrupted  # a concurrent writer committed this very content
        for kind in (EvidenceKind.CORROBORATION, EvidenceKind.AGREEMENT):  # step 6
            for n in neighbours:
                recorded = self.evidence.get(n.entry.id, [])
                if supports(policy, viewer, request, n.entry, n.similarity, recorded, kind):
                    if n.entry.id not in self.entries:
                        raise Interrupted  # it was not a possible target when locked
                    added = self._record(
                        Evidence(n.entry.id, request.source, n.similarity, now, kind, credibility)
                    )
                    confidence = self._boost(n.entry.id, added, kind, credibility, now)
                    return support_outcome(self.entries[n.entry.id], n.similarity, kind, confidence)
        decision = admit_new(policy, request, credibility, neighbours, self.evidence)
        if not decision.admitted:
            return IngestResult(Outcome.REJECTED, reason=f"{decision.reason}: {decision.detail}")
        entry = new_entry(policy, request, self.embeddings[i], now)  # step 8
        self.created[i] = self.entries[entry.id] = entry
        self.live[request.dedup_key] = entry.id
        self.new_entries.append(entry)
        self._record(Evidence(entry.id, request.source, 1.0, now, EvidenceKind.ORIGIN, credibility))
        self.scans.append((entry.id, now))
        return IngestResult(Outcome.CREATED, entry.id, entry.status, entry.confidence, None)

    def _duplicate(
        self, request: IngestRequest, existing: Entry, credibility: float, now: datetime
    ) -> IngestResult:
        recorded = self.evidence.get(existing.id, [])
        kind = duplicate_kind(self.deps.policy, self.viewer, request, existing, recorded)
        added = self._record(Evidence(existing.id, request.source, 1.0, now, kind, credibility))
        confidence = self._boost(existing.id, added, kind, credibility, now)
        return duplicate_outcome(self.entries[existing.id], kind, added, confidence)

    def _record(self, item: Evidence) -> bool:
        """Evidence, unless that exact source is already recorded on the entry."""
        recorded = self.evidence.setdefault(item.entry_id, [])
        if any(_same_source(e, item) for e in recorded):
            return False
        recorded.append(item)
        self.new_evidence.append(item)
        return True

    def _boost(
        self,
        entry_id: uuid.UUID,
        added: bool,
        kind: EvidenceKind,
        credibility: float,
        now: datetime,
    ) -> float:
        """The corroboration boost of newly recorded corroboration; the confidence after."""
        entry = self.entries[entry_id]
        if added and kind is EvidenceKind.CORROBORATION:
            policy = self.deps.policy
            entry = self.entries[entry_id] = evolve(
                entry,
                confidence=policy.after_corroboration(entry.confidence, credibility),
                updated_at=now,
            )
            self.boosts.append((entry_id, policy.corroboration_amount(credibility), now))
        return entry.confidence

    # ------------------------------------------------------------------ writes

    async def write(self, uow: UnitOfWork, extractions: Sequence[Extraction]) -> None:
        inserted = await uow.entries.add_many(self.new_entries)
        if len(inserted) != len(self.new_entries):
            raise Interrupted  # a concurrent writer took one of these content hashes
        if not all(await uow.evidence.add_many(self.new_evidence)):
            raise Interrupted
        await uow.entries.boost_each(self.boosts)
        await uow.outbox.enqueue_many(
            [(CONTRADICTION_SCAN, {"entry_id": str(entry_id)}, now) for entry_id, now in self.scans]
        )
        await index_entries(
            uow, [(e.id, extractions[i], e.created_at) for i, e in self.created.items()]
        )
        await uow.expertise.record_activities(self.activities)
        await uow.access_log.record(self.log)


def _same_source(a: Evidence, b: Evidence) -> bool:
    """The evidence uniqueness rule: one row per (entry, agent, provider, channel), an
    absent channel equal to an empty one."""
    return (a.source.agent_id, a.source.provider, a.source.channel or "") == (
        b.source.agent_id,
        b.source.provider,
        b.source.channel or "",
    )
