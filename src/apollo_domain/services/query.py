"""Query, retrieve and browse (docs/retrieval.md, "How retrieval works")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

from ..bounds import QUERY
from ..commands import QueryKnowledge, Retrieve
from ..errors import ValidationError
from ..limits import DEFAULT_STATUSES, MAX_LIMIT, QUERY_MODES
from ..model import Entry, Status
from ..normalize import normalize_domain_filter, normalize_tag_filter
from ..ports import AccessLogRecord, Reads, SearchFilter, UnitOfWork
from ..results import EntryView, QueryResult
from ..retrieval import GRAPH, LEXICAL, VECTOR, Fused, carry, fuse
from ..validation import bounded_float, shown
from .context import (
    Caller,
    Deps,
    bounded_int,
    embed_query,
    in_unit_of_work,
    parse_statuses,
    resolve_viewer,
    unit_float,
)
from .graph_fill import GraphFill, graph_fill

BROWSE_BELOW_CHARS = 3

Ranking = list[tuple[UUID, float]]
#: One signal's ranking (best first, each entry id with the signal's own score) and the
#: entries it read whole (none when fusing: the winners are read afterwards).
Candidates = tuple[Ranking, list[Entry]]


def query_text(query: object) -> str:
    """The stripped search text; :class:`ValidationError` naming ``query`` unless it is a
    string within the ``QUERY`` bound."""
    if not isinstance(query, str):
        raise ValidationError("query", "must be a string")
    return QUERY.text(query).strip()


async def query(deps: Deps, caller: Caller, command: QueryKnowledge | Retrieve) -> QueryResult:
    """The ``query_knowledge`` and ``retrieve`` use cases, as the agent the command credits:
    search (or newest-first browse for queries under three characters). The result's
    ``mode`` names what ran: the search mode asked for, or ``browse``.

    ``mode``: ``vector`` ranks by embedding similarity, ``lexical`` by the query's terms,
    ``hybrid`` (the default) fuses both with the entity-graph fill by reciprocal rank
    fusion (:mod:`apollo_domain.retrieval`). Each result names the signals that found it.
    A vector match needs a similarity above ``min_similarity`` and at least the embedder's
    relevance floor (``RetrievalSettings.relevance_floor``: a lexical or graph match is
    relevant by itself); an entry no signal found is never returned, so unrelated and
    opposite texts are neither returned nor boosted.

    A search boosts each returned entry's confidence atomically in the store, once per
    boost window for each principal (the agent, for a caller without one), and, for
    ``query_knowledge``, adds to its access count and writes one ``query`` access-log row
    per returned entry — all in one transaction. The access log must be writable before
    anything is embedded or looked up. A ``retrieve`` does neither, and looks at the
    confirmed and candidate entries.

    Archived entries are only found when ``status`` asks for them, and are shown as they
    are: never boosted, counted or logged (archiving takes an entry out of the lifecycle;
    reading it must not bring confidence back).

    The text is at most ``MAX_QUERY_CHARS`` long; a ``tags`` or ``knowledge_domain`` filter
    that normalizes to nothing is refused rather than dropped.
    """
    caller = caller.acting_as(command.agent_id)
    counted = isinstance(command, QueryKnowledge)
    text = query_text(command.query)
    mode: object = command.mode
    if not isinstance(mode, str) or mode not in QUERY_MODES:
        raise ValidationError(
            "mode", f"unknown mode {shown(mode)}; expected {', '.join(QUERY_MODES)}"
        )
    flt_tags = normalize_tag_filter(command.tags)
    domain = normalize_domain_filter(command.knowledge_domain)
    count = bounded_int("limit", command.limit, 1, MAX_LIMIT)
    floor = unit_float("min_confidence", command.min_confidence)
    asked = command.status if isinstance(command, QueryKnowledge) else None
    statuses = parse_statuses(asked, DEFAULT_STATUSES)
    similarity_floor = bounded_float("min_similarity", command.min_similarity, -1.0, 1.0)
    semantic = len(text) >= BROWSE_BELOW_CHARS
    store = deps.store
    if semantic and counted:
        await store.preflight(("access_log", "entries"))
    viewer = await resolve_viewer(store.directory, caller.principal)
    flt = SearchFilter(
        viewer, statuses, min_confidence=floor, tags=flt_tags, knowledge_domain=domain
    )
    if not semantic:
        async with store.unit_of_work() as uow:
            entries = await uow.entries.browse(flt, count)
        return QueryResult("browse", tuple(EntryView.of(e) for e in entries))

    fused = mode == "hybrid"
    vector = None
    if mode == VECTOR:  # the search needs the vector first; a fused one embeds in its read
        started = _started(deps)
        vector = await embed_query(deps, text)
        _lap(deps, "embed", started)
    depth = max(count, deps.retrieval.candidates) if fused else count
    reads: dict[str, Callable[[Reads], Awaitable[Candidates]]] = {}
    # Fusing reads only ids and scores for the candidates (``depth`` of each signal) and
    # the at most ``count`` winners whole afterwards: decoding every candidate row costs
    # more than the one read of the winners. A single signal returns all it reads.
    if mode != LEXICAL:

        def relevant(similarity: float) -> bool:
            return similarity > similarity_floor and deps.retrieval.relevant(similarity)

        async def nearest(reads: Reads) -> Candidates:
            embedding = vector
            if embedding is None:  # fused: the model runs while the other signals read
                started = _started(deps)
                embedding = await embed_query(deps, text)
                _lap(deps, "embed", started)
            started = _started(deps)
            if fused:
                ids = await reads.entries.nearest_ids(embedding, flt, depth)
                _lap(deps, VECTOR, started)
                return [(i, s) for i, s in ids if relevant(s)], []
            found = await reads.entries.nearest(embedding, flt, depth)
            _lap(deps, VECTOR, started)
            hits = [h for h in found if relevant(h.similarity)]
            return [(h.entry.id, h.similarity) for h in hits], [h.entry for h in hits]

        reads[VECTOR] = nearest
    if mode != VECTOR:

        async def lexical(reads: Reads) -> Candidates:
            if fused:
                return await reads.entries.lexical_search_ids(text, flt, depth), []
            hits = await reads.entries.lexical_search(text, flt, depth)
            return [(h.entry.id, h.similarity) for h in hits], [h.entry for h in hits]

        reads[LEXICAL] = lexical
    filled: list[GraphFill] = []
    if fused:

        async def graph(reads: Reads) -> Candidates:
            fill = await graph_fill(reads, text, flt, deps.retrieval, depth)
            filled.append(fill)
            return fill.ranking, []

        reads[GRAPH] = graph
    # The signals are independent reads: the store may run them at once, the query's
    # embedding included (the graph fill and the lexical search need none). The vector
    # read, which waits for the model first, goes first: on the unit of work's own
    # connection, already open, so no spare connection is held while the model runs.
    order = sorted(reads, key=lambda signal: signal != VECTOR)
    timed = [
        reads[signal] if signal == VECTOR else _timed(deps, signal, reads[signal])
        for signal in order
    ]

    async def search_and_boost(uow: UnitOfWork) -> QueryResult:
        candidates = dict(zip(order, await uow.read_concurrently(timed), strict=True))
        started = _started(deps)
        found: dict[UUID, Entry] = {}
        rankings: dict[str, Ranking] = {}
        for signal in reads:
            ranking, entries = candidates[signal]
            found.update((entry.id, entry) for entry in entries)
            rankings[signal] = ranking
        if filled:  # the lexical rank carried across the seeds' typed edges
            rankings[LEXICAL] = carry(rankings[LEXICAL], filled[-1].carried)
        ranked = fuse(rankings, deps.retrieval)[:count]
        _lap(deps, "fuse", started)
        unread = [r.entry_id for r in ranked if r.entry_id not in found]
        if unread:  # read by id alone: read now (one deleted since is left out)
            started = _started(deps)
            found.update(await uow.entries.get_many(unread))
            _lap(deps, "read winners", started)
            ranked = [r for r in ranked if r.entry_id in found]
        if not ranked:
            return QueryResult(mode, ())
        started = _started(deps)
        now = deps.clock.now()
        live = [r for r in ranked if found[r.entry_id].status is not Status.ARCHIVED]
        boosted = await uow.entries.boost(
            [r.entry_id for r in live],
            deps.policy.retrieval_boost,
            now,
            count_access=counted,
            earner=caller.principal.id or caller.agent_id,
            window=deps.boost_window,
        )
        if counted:
            await uow.access_log.record(
                [
                    AccessLogRecord("query", caller.agent_id, r.entry_id, now, _detail(r))
                    for r in live
                ]
            )
        await uow.commit()
        _lap(deps, "boost", started)
        return QueryResult(mode, tuple(_view(found[r.entry_id], r, boosted) for r in ranked))

    # Run whole again when the store broke it apart for a concurrent unit of work.
    return await in_unit_of_work(store, search_and_boost)


def _started(deps: Deps) -> datetime | None:
    """When a profiled stage starts (None when no :class:`QueryProfile` listens)."""
    return None if deps.query_profile is None else deps.clock.now()


def _lap(deps: Deps, stage: str, started: datetime | None) -> None:
    """Tell the query profile how long ``stage`` took since ``started``."""
    if started is not None and deps.query_profile is not None:
        deps.query_profile.stage(stage, (deps.clock.now() - started).total_seconds())


def _timed(
    deps: Deps, stage: str, read: Callable[[Reads], Awaitable[Candidates]]
) -> Callable[[Reads], Awaitable[Candidates]]:
    """``read``, its time told to the query profile as ``stage``."""

    async def run(reads: Reads) -> Candidates:
        started = _started(deps)
        found = await read(reads)
        _lap(deps, stage, started)
        return found

    return run


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
