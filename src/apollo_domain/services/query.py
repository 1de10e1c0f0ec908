"""Query, retrieve and browse (DESIGN §4 "Query")."""

from __future__ import annotations

from ..errors import ValidationError
from ..model import Status
from ..normalize import normalize_domain_filter, normalize_tag_filter
from ..ports import AccessLogRecord, SearchFilter
from ..results import EntryView, QueryResult
from ..validation import bounded_float
from .context import Caller, Deps, bounded_int, parse_statuses, resolve_viewer, unit_float

BROWSE_BELOW_CHARS = 3
MAX_LIMIT = 100
#: The longest query text, in characters: a search is a question, not a document (and
#: embedding a long one costs time and memory in proportion).
MAX_QUERY_CHARS = 10_000
DEFAULT_STATUSES = (Status.CONFIRMED, Status.CANDIDATE)


def query_text(query: object) -> str:
    """The stripped search text; :class:`ValidationError` naming ``query`` unless it is a
    string of at most ``MAX_QUERY_CHARS`` characters."""
    if not isinstance(query, str):
        raise ValidationError("query", "must be a string")
    if len(query) > MAX_QUERY_CHARS:
        raise ValidationError(
            "query", f"is {len(query)} characters; at most {MAX_QUERY_CHARS} are allowed"
        )
    return query.strip()


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

    Archived entries are only found when ``status`` asks for them, and are shown as they
    are: never boosted, counted or logged (archiving takes an entry out of the lifecycle;
    reading it must not bring confidence back).

    The text is at most ``MAX_QUERY_CHARS`` long; a ``tags`` or ``knowledge_domain`` filter
    that normalizes to nothing is refused rather than dropped.
    """
    text = query_text(query)
    flt_tags = normalize_tag_filter(tags)
    domain = normalize_domain_filter(knowledge_domain)
    count = bounded_int("limit", limit, 1, MAX_LIMIT)
    floor = unit_float("min_confidence", min_confidence)
    statuses = parse_statuses(status, DEFAULT_STATUSES)
    similarity_floor = bounded_float("min_similarity", min_similarity, -1.0, 1.0)
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
        live = [h for h in hits if h.entry.status is not Status.ARCHIVED]
        boosted = await uow.entries.boost(
            [h.entry.id for h in live], deps.policy.retrieval_boost, now, count_access=count_access
        )
        if count_access:
            await uow.access_log.record(
                [
                    AccessLogRecord(
                        "query", caller.agent_id, h.entry.id, now, {"similarity": h.similarity}
                    )
                    for h in live
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
