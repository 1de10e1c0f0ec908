"""Query, retrieve and browse (DESIGN §4 "Query")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final
from uuid import UUID

from ..errors import ValidationError
from ..model import Entry, Status
from ..normalize import normalize_tag, normalize_tags
from ..ports import AccessLogRecord, SearchFilter
from ..results import EntryView, QueryResult
from ..retrieval import LEXICAL, VECTOR, Fused, fuse
from ..validation import bounded_float
from .context import Caller, Deps, bounded_int, parse_statuses, resolve_viewer, unit_float

BROWSE_BELOW_CHARS = 3
MAX_LIMIT = 100
DEFAULT_STATUSES = (Status.CONFIRMED, Status.CANDIDATE)
#: Retrieval modes: ``hybrid`` fuses every signal, the others use one alone.
QUERY_MODES: Final = ("hybrid", "vector", "lexical")
DEFAULT_MODE: Final = "hybrid"

Ranking = list[tuple[UUID, float]]


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
    mode: object = DEFAULT_MODE,
) -> QueryResult:
    """Search (or newest-first browse for queries under three characters).

    ``mode``: ``vector`` ranks by embedding similarity, ``lexical`` by the query's terms,
    ``hybrid`` (the default) fuses both with the entity-graph fill by reciprocal rank
    fusion (:mod:`apollo_domain.retrieval`). Each result names the signals that found it.
    A vector match needs a similarity above ``min_similarity``; an entry no signal found
    is never returned, so unrelated and opposite texts are neither returned nor boosted.

    A search boosts each returned entry's confidence atomically in the store and, when
    ``count_access``, adds to its access count and writes one ``query`` access-log row per
    returned entry — all in one transaction. The access log must be writable before
    anything is embedded or looked up.
    """
    if not isinstance(query, str):
        raise ValidationError("query", "must be a string")
    if mode not in QUERY_MODES:
        raise ValidationError("mode", f"unknown mode {mode!r}; expected {', '.join(QUERY_MODES)}")
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

    vector = None
    if mode != LEXICAL:
        (vector,) = await deps.embedder.embed([text])
    depth = count if mode != "hybrid" else max(count, deps.retrieval.candidates)
    async with store.unit_of_work() as uow:
        found: dict[UUID, Entry] = {}
        rankings: dict[str, Ranking] = {}
        if vector is not None:
            hits = [
                h
                for h in await uow.entries.nearest(vector, flt, depth)
                if h.similarity > similarity_floor
            ]
            found.update((h.entry.id, h.entry) for h in hits)
            rankings[VECTOR] = [(h.entry.id, h.similarity) for h in hits]
        if mode != VECTOR:
            lexical = await uow.entries.lexical_search(text, flt, depth)
            found.update((h.entry.id, h.entry) for h in lexical)
            rankings[LEXICAL] = [(h.entry.id, h.similarity) for h in lexical]
        ranked = fuse(rankings, deps.retrieval)[:count]
        if not ranked:
            return QueryResult("semantic", ())
        now = deps.clock.now()
        ids = [r.entry_id for r in ranked]
        boosted = await uow.entries.boost(
            ids, deps.policy.retrieval_boost, now, count_access=count_access
        )
        if count_access:
            await uow.access_log.record(
                [
                    AccessLogRecord("query", caller.agent_id, r.entry_id, now, _detail(r))
                    for r in ranked
                ]
            )
        await uow.commit()
    return QueryResult("semantic", tuple(_view(found[r.entry_id], r, boosted) for r in ranked))


def _view(entry: Entry, ranked: Fused, boosted: Mapping[UUID, float]) -> EntryView:
    return EntryView.of(
        entry,
        ranked.signals.get(VECTOR),
        boosted.get(entry.id, entry.confidence),
        signals=ranked.signals,
        score=ranked.score,
    )


def _detail(ranked: Fused) -> dict[str, Any]:
    detail: dict[str, Any] = {"signals": dict(ranked.signals)}
    if VECTOR in ranked.signals:
        detail["similarity"] = ranked.signals[VECTOR]
    return detail
