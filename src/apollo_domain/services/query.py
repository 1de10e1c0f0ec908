"""Query, retrieve and browse (docs/retrieval.md, "How retrieval works")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from attrs import evolve

from ..bounds import QUERY
from ..commands import QueryKnowledge, Retrieve
from ..credibility import SourceCredibility
from ..errors import ValidationError
from ..fairness import Placed, candidate_depth, fair_page, foldable, source_depth
from ..limits import DEFAULT_STATUSES, MAX_CONTEXT_WINDOW, MAX_LIMIT, QUERY_MODES
from ..model import Entry, Status, Viewer
from ..normalize import normalize_domain_filter, normalize_tag_filter
from ..ports import AccessLogRecord, Reads, SearchFilter, UnitOfWork
from ..results import EntryView, Neighbour, QueryResult
from ..retrieval import GRAPH, LEXICAL, VECTOR, carry, fuse
from ..temporal import TEMPORAL, in_window, time_window
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
    A vector match needs a similarity above ``min_similarity`` and to clear the embedder's
    relevance rule (:meth:`RetrievalSettings.relevance_cutoff`, decided from the query's
    candidates; a lexical or graph match is relevant by itself); an entry no signal found
    is never returned, so unrelated and opposite texts are neither returned nor boosted.
    A day or span of time the text names ("on 23 March", "last week") puts the candidates
    said or stored in it first (:mod:`apollo_domain.temporal`), in every mode.

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
    window = bounded_int("context_window", command.context_window, 0, MAX_CONTEXT_WINDOW)
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
            around = await neighbours(uow, entries, window, viewer)
        return QueryResult(
            "browse", tuple(with_neighbours(EntryView.of(e), around) for e in entries)
        )

    fused = mode == "hybrid"
    # a day or span the question names puts the candidates of that time first
    cue = time_window(text, deps.clock.now()) if deps.retrieval.temporal_cues else None
    vector = None
    if mode == VECTOR:  # the search needs the vector first; a fused one embeds in its read
        started = _started(deps)
        vector = await embed_query(deps, text)
        _lap(deps, "embed", started)
    # Every signal reads ids and scores of a bounded multiple of the page (the fair page
    # needs room for the entries its share cap and folding set aside); the candidates are
    # read whole, with their embeddings, once fused (apollo_domain.fairness).
    depth = candidate_depth(count, deps.retrieval.candidates)
    reads: dict[str, Callable[[Reads], Awaitable[Candidates]]] = {}
    if mode != LEXICAL:
        # The relevance rule weighs a query's best match against the candidates after
        # it, so the vector read goes that much deeper than the ranking keeps.
        vector_depth = max(depth, count + deps.retrieval.vector_depth)

        def relevant(similarities: list[float]) -> Callable[[float], bool]:
            cutoff = deps.retrieval.relevance_cutoff(similarities)
            return lambda similarity: similarity > similarity_floor and similarity >= cutoff

        async def nearest(reads: Reads) -> Candidates:
            embedding = vector
            if embedding is None:  # fused: the model runs while the other signals read
                started = _started(deps)
                embedding = await embed_query(deps, text)
                _lap(deps, "embed", started)
            started = _started(deps)
            # Each source capped in the store (a fair page needs the other sources'
            # matches among the candidates), never within the best match and the
            # background the relevance rule weighs it against: those are the plain
            # nearest, so the rule decides as it would without the cap.
            per_source = max(source_depth(count), 1 + deps.retrieval.vector_depth)
            ids = await reads.entries.nearest_ids(
                embedding, flt, vector_depth, per_source=per_source
            )
            _lap(deps, VECTOR, started)
            admit = relevant([s for _, s in ids])
            return [(i, s) for i, s in ids[:depth] if admit(s)], []

        reads[VECTOR] = nearest
    if mode != VECTOR:

        async def lexical(reads: Reads) -> Candidates:
            ranking = await reads.entries.lexical_search_ids(
                text, flt, depth, per_source=source_depth(count)
            )
            return ranking, []

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
        fused_ranking = fuse(rankings, deps.retrieval)
        _lap(deps, "fuse", started)
        if not fused_ranking:
            return QueryResult(mode, ())
        started = _started(deps)  # the candidates whole (one deleted since is left out)
        ids = [r.entry_id for r in fused_ranking]
        fold = deps.policy.corroboration_similarity
        found.update(await uow.entries.get_many(ids))
        dated = set() if cue is None else in_window(fused_ranking, found, cue)
        if dated:
            fused_ranking = [
                evolve(r, signals={**r.signals, TEMPORAL: 1.0}) if r.entry_id in dated else r
                for r in fused_ranking
            ]
        # compared where they are stored, among the candidates that share a source
        shared = foldable(found[i] for i in ids if i in found)
        near = await uow.entries.near_pairs(shared, fold) if len(shared) > 1 else set()
        credibility = await _credibility(uow, found.values())
        ranked = fair_page(fused_ranking, found, credibility, count, fold, near, dated)
        _lap(deps, "read winners", started)
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
        around = await neighbours(uow, [found[r.entry_id] for r in ranked], window, viewer)
        await uow.commit()
        _lap(deps, "boost", started)
        return QueryResult(
            mode,
            tuple(with_neighbours(_view(found[r.entry_id], r, boosted), around) for r in ranked),
        )

    # Run whole again when the store broke it apart for a concurrent unit of work.
    return await in_unit_of_work(store, search_and_boost)


async def neighbours(
    uow: UnitOfWork, entries: Sequence[Entry], window: int, viewer: Viewer
) -> dict[UUID, list[Entry]]:
    """The episode neighbours of each of ``entries`` stored from a text: the unarchived
    entries ``viewer`` may see up to ``window`` places before and after it in its episode
    (itself left out), in order; read in one statement for all of them, none when
    ``window`` is 0."""
    placed: list[Entry] = []
    spans: list[tuple[UUID, int, int]] = []
    for entry in entries:
        if window > 0 and entry.episode_id is not None and entry.position is not None:
            placed.append(entry)
            spans.append((entry.episode_id, entry.position - window, entry.position + window))
    if not spans:
        return {}
    found = await uow.entries.in_episodes(spans, viewer)
    return {
        entry.id: [
            other
            for other in found
            if other.episode_id == entry.episode_id
            and other.id != entry.id
            and abs((other.position or 0) - (entry.position or 0)) <= window
        ]
        for entry in placed
    }


def with_neighbours(view: EntryView, around: Mapping[UUID, list[Entry]]) -> EntryView:
    """``view`` with its episode neighbours (:func:`neighbours`), shown as they are."""
    near = around.get(view.id)
    if not near:
        return view
    return evolve(view, neighbours=tuple(Neighbour.of(e) for e in near))


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


async def _credibility(uow: UnitOfWork, entries: Iterable[Entry]) -> dict[str, float]:
    """The credibility of the sources of the candidates among ``entries`` (a confirmed
    entry's is not needed), read in one statement."""
    agents = {e.source.agent_id for e in entries if e.status is not Status.CONFIRMED}
    if not agents:
        return {}
    records = await uow.credibility.get_many(sorted(agents))
    return {
        agent: SourceCredibility(agent, r.alpha, r.beta, r.label).credibility
        for agent, r in records.items()
    }


def _view(entry: Entry, ranked: Placed, boosted: Mapping[UUID, float]) -> EntryView:
    return EntryView.of(
        entry,
        ranked.fused.signals.get(VECTOR),
        boosted.get(entry.id, entry.confidence),
        signals=ranked.fused.signals,
        score=ranked.score,
        folded=ranked.folded,
    )


def _detail(ranked: Placed) -> dict[str, Any]:
    detail: dict[str, Any] = {"signals": dict(ranked.fused.signals)}
    if VECTOR in ranked.fused.signals:
        detail["similarity"] = ranked.fused.signals[VECTOR]
    if ranked.folded:
        detail["folded"] = ranked.folded
    return detail
