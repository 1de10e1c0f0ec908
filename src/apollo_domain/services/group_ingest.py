"""Group commit of single ingests: many ``store_knowledge`` requests, each with its own
caller and idempotency key, ingested with the set-based bulk path in ONE unit of work.

Each request keeps what ingesting it alone would give it: its ``ingest:<key>`` record (the
key format of :func:`.ingest.ingest`, so a message first handled alone is recognized when
it comes back in a group, and the other way round), its caller's visibility and
attribution, and its outcome as if the requests had been ingested one by one, in order,
by principal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from attrs import frozen

from ..entities import Extraction
from ..errors import TransientConflict
from ..model import Entry, Outcome, Principal, Viewer
from ..ports import UnitOfWork
from ..results import IngestResult
from .bulk_ingest import Chunk, Interrupted
from .context import INGEST_PARTS, Caller, Deps, as_floats, embed_readings, resolve_viewer
from .entities import extract
from .ingest import IngestRequest, ingest, replayed


@frozen
class IngestItem:
    """One request of a group: who asks (the caller credited, the principal it acts as),
    what (step 1 done: validated and normalized) and its idempotency key (a message id)."""

    caller: Caller
    request: IngestRequest
    idempotency_key: str | None = None


async def ingest_each(deps: Deps, items: Sequence[IngestItem]) -> list[IngestResult]:
    """The items' results, in order, from one unit of work: all committed or none.

    The texts are embedded in one call, before the transaction. In it, every item's key is
    recorded (one statement); an item whose key was already recorded, by an earlier unit of
    work or by an earlier item of this group, writes nothing and gets the replayed result
    of :func:`.ingest.ingest` (the entry holding its text, ``already processed``). The
    others are ingested as :func:`.bulk_ingest.ingest_many` ingests a chunk, one chunk per
    principal (in order of first appearance, each seeing what the earlier ones wrote), so
    each is searched and decided with its own principal's visibility; a replay is reported
    at its place in its principal's order.

    An item rejected by admission writes nothing and keeps no key, as alone (a redelivery
    is decided again); a repeat of it in the group gets the same rejection. When a
    concurrent writer gets in the way of the set-based reads, or the store breaks the group's
    transaction apart for a concurrent one (:class:`TransientConflict`), the items are
    ingested one by one instead, each in its own unit of work with its own key (what the
    group had written is rolled back)."""
    if not items:
        return []
    store = deps.store
    await store.preflight(INGEST_PARTS)
    principals = list(dict.fromkeys(item.caller.principal for item in items))
    viewers = {p: await resolve_viewer(store.directory, p) for p in principals}
    vectors = await embed_readings(deps, [item.request.content for item in items])
    embeddings = [as_floats(v) for v in vectors]
    extractions = [await extract(deps.extractor, item.request.content) for item in items]
    try:
        async with store.unit_of_work() as uow:
            results, applied = await _in_order(
                deps, uow, items, principals, viewers, embeddings, extractions
            )
            if applied:  # a group of replays recorded nothing: nothing to commit
                await uow.commit()
            return results
    except (Interrupted, TransientConflict):  # the store broke the group apart: alone
        return [
            await ingest(deps, item.caller, item.request, idempotency_key=item.idempotency_key)
            for item in items
        ]


async def _in_order(
    deps: Deps,
    uow: UnitOfWork,
    items: Sequence[IngestItem],
    principals: Sequence[Principal],
    viewers: Mapping[Principal, Viewer],
    embeddings: Sequence[tuple[float, ...]],
    extractions: Sequence[Extraction],
) -> tuple[list[IngestResult], bool]:
    """The group in ``uow``: keys recorded, each principal's items decided in order on one
    chunk (a replay at its place, seeing what the items before it wrote), keys of rejected
    items forgotten; the results, and whether any item was applied."""
    keys = list(dict.fromkeys(key for key in map(_key, items) if key is not None))
    marked = await uow.processed.mark_many(keys, deps.clock.now())
    new = {key for key, fresh in zip(keys, marked, strict=True) if fresh}
    applying: dict[str, int] = {}  # each new key: the item that applies it
    replays: list[int] = []
    for principal in principals:
        for i, item in enumerate(items):
            if item.caller.principal == principal:
                key = _key(item)
                if key is None:
                    continue
                if key in new and key not in applying:
                    applying[key] = i
                else:
                    replays.append(i)
    stored = dict(
        zip(
            replays,
            await uow.entries.find_by_hashes([items[i].request.dedup_key for i in replays]),
            strict=True,
        )
    )
    applied = {*applying.values(), *(i for i, item in enumerate(items) if _key(item) is None)}
    results: list[IngestResult | None] = [None] * len(items)
    for principal in principals:
        mine = [i for i, item in enumerate(items) if item.caller.principal == principal]
        chunk_items = [i for i in mine if i in applied]
        chunk = None
        if chunk_items:
            chunk = await Chunk.read(
                deps,
                uow,
                viewers[principal],
                [items[i].request for i in chunk_items],
                [embeddings[i] for i in chunk_items],
            )
        place = {i: j for j, i in enumerate(chunk_items)}
        for i in mine:
            key = _key(items[i])
            if chunk is not None and i in place:
                results[i] = chunk.decide(place[i], deps.clock.now())
                continue
            first = None if key is None else applying.get(key)
            earlier = None if first is None else results[first]
            if earlier is not None and earlier.outcome is Outcome.REJECTED:
                results[i] = earlier  # decided again alone, it is rejected again
            else:
                results[i] = _replay(chunk, items[i].request, stored[i])
        if chunk is not None:
            await chunk.write(uow, [extractions[i] for i in chunk_items])
    # a rejection writes nothing and keeps no key, as alone
    await uow.processed.forget_many(
        [
            key
            for key, i in applying.items()
            if (result := results[i]) is not None and result.outcome is Outcome.REJECTED
        ]
    )
    return [result for result in results if result is not None], bool(applied)


def _replay(chunk: Chunk | None, request: IngestRequest, stored: Entry | None) -> IngestResult:
    """A replayed ingest's result: the entry holding the request's text as the chunk sees
    it now (its own writes included), else as stored."""
    entry = stored
    if chunk is not None:
        entry_id = chunk.live.get(request.dedup_key)
        if entry_id is None and stored is not None:
            entry_id = stored.id
        entry = None if entry_id is None else chunk.entries.get(entry_id, stored)
    (result,) = replayed([entry])
    return result


def _key(item: IngestItem) -> str | None:
    """The key :func:`.ingest.ingest` records for the item's idempotency key."""
    return None if item.idempotency_key is None else f"ingest:{item.idempotency_key}"
