"""Query, retrieve and browse (DESIGN §4 "Query")."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ValidationError
from ..model import Status
from ..normalize import normalize_tag, normalize_tags
from ..ports import AccessLogRecord, SearchFilter
from ..results import EntryView, QueryResult
from ..validation import bounded_float
from .context import Caller, Deps, bounded_int, parse_statuses, resolve_viewer, unit_float

BROWSE_BELOW_CHARS = 3
MAX_LIMIT = 100
DEFAULT_STATUSES = (Status.CONFIRMED, Status.CANDIDATE)


async def query(
    deps: Deps,
    caller: Caller,
    query: object,
    *,
    min_confidence: object = 0.3,
    limit: object = 10,
    status: object = None,
    tags: object = None,
    knowledge_domain: object = None,
    count_access: bool = True,
    min_similarity: object = 0.0,
) -> QueryResult:
    """Semantic search (or newest-first browse for queries under three characters).

    A semantic query boosts each returned entry's confidence atomically in the store and,
    when ``count_access``, adds to its access count and writes one ``query`` access-log row
    per returned entry — all in one transaction. The access log must be writable before
    anything is embedded or looked up. Only entries whose similarity is above
    ``min_similarity`` match (by default, unrelated and opposite texts never do, so they are
    neither returned nor boosted).
    """
    if not isinstance(query, str):
        raise ValidationError("query", "must be a string")
    if tags is not None and (isinstance(tags, str) or not isinstance(tags, Sequence)):
        raise ValidationError("tags", "must be a list of strings")
    flt_tags = normalize_tags(tags) or None
    domain = normalize_tag(knowledge_domain) if knowledge_domain is not None else None
    count = bounded_int("limit", limit, 1, MAX_LIMIT)
    floor = unit_float("min_confidence", min_confidence)
    statuses = parse_statuses(status, DEFAULT_STATUSES)
    similarity_floor = bounded_float("min_similarity", min_similarity, -1.0, 1.0)
    text = query.strip()
    semantic = len(text) >= BROWSE_BELOW_CHARS
    store = deps.store
    if semantic and count_access:
        await store.preflight(("access_log", "entries"))
    viewer = await resolve_viewer(store.directory, caller.principal)
    flt = SearchFilter(
        viewer, statuses, min_confidence=floor, tags=flt_tags, knowledge_domain=domain
    )
    if not semantic:
        async with store.unit_of_work() as uow:
            entries = await uow.entries.browse(flt, count)
        return QueryResult("browse", tuple(EntryView.of(e) for e in entries))

    (vector,) = await deps.embedder.embed([text])
    async with store.unit_of_work() as uow:
        hits = [
            h
            for h in await uow.entries.nearest(vector, flt, count)
            if h.similarity > similarity_floor
        ]
        if not hits:
            return QueryResult("semantic", ())
        now = deps.clock.now()
        ids = [h.entry.id for h in hits]
        boosted = await uow.entries.boost(
            ids, deps.policy.retrieval_boost, now, count_access=count_access
        )
        if count_access:
            await uow.access_log.record(
                [
                    AccessLogRecord(
                        "query", caller.agent_id, h.entry.id, now, {"similarity": h.similarity}
                    )
                    for h in hits
                ]
            )
        await uow.commit()
    return QueryResult(
        "semantic",
        tuple(
            EntryView.of(h.entry, h.similarity, boosted.get(h.entry.id, h.entry.confidence))
            for h in hits
        ),
    )
