"""The graph signal of a hybrid query (DESIGN §4 "Query"): the entities a query names,
their neighbours, and one step across their typed edges.

The query's word runs that name a visible entity are its **seeds**. Each seed holds one
point and each of their neighbours over live edges (either way, ``co_occurs`` included)
``RetrievalSettings.hop_weight`` (half a point by default): one step across an edge keeps
that much of a seed's evidence. An entity's point is shared equally among the scanned
entries that mention it, and an entry scores the sum of its entities' shares, so a name
two entries mention says more about each of them than a city forty do (inverse document
frequency; the node specificity of HippoRAG, Gutiérrez et al., NeurIPS 2024).

**Two hops.** A question can name one entity and ask about another that only an edge
leads to ("In which city are the headquarters of Alice Moreau's employer?": Alice Moreau
``works_at`` Acme Corp, and the answer names only Acme Corp, so neither its words nor its
vector are near the question's). The fill follows the live typed edges of the seeds to
the entities at their far end (the **bridges**) and asks the store for the entries that
name a bridge and hold a term of the question that no entry about a seed holds (the
question's **open** terms: the seeds' names and what their own entries answer taken
out). That is the second-hop query of iterative lexical retrieval (GoldEn Retriever, Qi
et al., EMNLP 2019): the bridge stands in for the seed, and the query asks for what the
first hop left unanswered. Such an entry is scored lexically as if it named the seed at
the stepped weight: its own rank for the question's terms plus ``hop_weight`` times the
rank the seed's name earns (``ts_rank`` adds up per term), and the lexical signal takes
each entry's best of its own and its carried rank (CombMAX, Fox and Shaw, TREC-2 1994).
Only edges, entities and entries the caller may see carry anything, and whether a term is
answered is judged on the entries the caller may see.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import fsum
from uuid import UUID

from attrs import frozen

from ..entities import Entity, normalize_entity_name
from ..lexical import STOPWORDS, query_terms, rank
from ..ports import Reads, SearchFilter
from ..retrieval import RetrievalSettings

Ranking = list[tuple[UUID, float]]
#: Names of up to this many words are looked for in the query text.
MAX_NAME_WORDS = 4
_EDGE_PUNCTUATION = ".,;:!?\"'()[]{}<>“”‘’"


@frozen
class GraphFill:
    """What the graph fill found: its own ranking (the ``graph`` signal) and the entries
    reached across a typed edge with the lexical rank carried to them (best first)."""

    ranking: Ranking
    carried: Ranking


NOTHING = GraphFill([], [])


def query_names(text: str) -> list[str]:
    """The normalized names a query may mention: every run of one to ``MAX_NAME_WORDS``
    words (punctuation at word edges and a possessive ``'s`` dropped), except a lone stop
    word; longest first."""
    words = []
    for raw in text.split():
        word = raw.strip(_EDGE_PUNCTUATION)
        for suffix in ("'s", "’s"):
            word = word.removesuffix(suffix)
        if word:
            words.append(word)
    names: dict[str, None] = {}
    for size in range(min(MAX_NAME_WORDS, len(words)), 0, -1):
        for start in range(len(words) - size + 1):
            name = normalize_entity_name(" ".join(words[start : start + size]))
            if name and not (size == 1 and name in STOPWORDS):
                names.setdefault(name)
    return list(names)


async def graph_fill(
    reads: Reads, text: str, flt: SearchFilter, settings: RetrievalSettings, limit: int
) -> GraphFill:
    """The graph signal for the query ``text`` (see the module docstring): the seeds (at
    most ``graph_seeds``, longest names first), their neighbours (at most
    ``graph_neighbours``, the most supported first) and a capped scan of ``graph_scan``
    entries naming either, newest first, scored by their entities' shares; and up to
    ``limit`` entries reached across the seeds' typed edges (through at most
    ``graph_neighbours`` bridges) with their carried lexical rank. The ranking is the
    best ``limit`` entry ids by score (newest first on ties)."""
    names = query_names(text)
    if not names:
        return NOTHING
    visible = {e.key: e for e in await reads.graph.find(names, flt.viewer)}
    seeds = [visible[name] for name in names if name in visible][: settings.graph_seeds]
    if not seeds:
        return NOTHING
    seed_ids = [seed.id for seed in seeds]
    linked = await reads.graph.neighbours(seed_ids, flt.viewer, settings.graph_neighbours)
    carried = await _across_typed_edges(reads, text, seeds, flt, settings, limit)
    tagged = await reads.graph.mentioning(
        [*seed_ids, *(entity_id for entity_id, _ in linked)], flt, settings.graph_scan
    )
    stepped = settings.hop_weight
    points = {entity_id: stepped for entity_id, _ in linked} | dict.fromkeys(seed_ids, 1.0)
    mentions: dict[UUID, int] = {}
    for _, matched in tagged:
        for entity in matched:
            mentions[entity] = mentions.get(entity, 0) + 1
    scored = [
        (entry_id, fsum(points[e] / mentions[e] for e in matched)) for entry_id, matched in tagged
    ]
    scored.sort(key=lambda item: -item[1])  # stable: newest first among equals
    return GraphFill(scored[:limit], carried)


async def _across_typed_edges(
    reads: Reads,
    text: str,
    seeds: Sequence[Entity],
    flt: SearchFilter,
    settings: RetrievalSettings,
    limit: int,
) -> Ranking:
    """The entries reached across the seeds' typed edges that hold an open term of the
    question, with their carried lexical rank, best first (then by id)."""
    asked = query_terms(text)
    named = {seed.id: set(query_terms(seed.name)).intersection(asked) for seed in seeds}
    taken = set().union(*named.values())
    residual = [term for term in asked if term not in taken]
    if not residual:
        return []
    found = await reads.graph.hop_search(
        list(named),
        " ".join(residual),
        flt,
        limit,
        bridges=settings.graph_neighbours,
    )
    # ts_rank sums its terms' shares and divides by the number of query terms: an entry's
    # rank for the residual, over the whole question, is scaled by their ratio. (A term of
    # a seed's name it holds counts in its own rank, which the lexical signal keeps when
    # that is the higher.)
    scale = len(residual) / len(asked)
    credit = {seed_id: rank([1] * len(terms), len(asked)) for seed_id, terms in named.items()}
    carried = [
        (entry_id, score * scale + settings.hop_weight * max(credit[s] for s in from_seeds))
        for entry_id, score, from_seeds in found
    ]
    carried.sort(key=lambda item: (-item[1], str(item[0])))
    return carried


__all__ = ["MAX_NAME_WORDS", "NOTHING", "GraphFill", "graph_fill", "query_names"]
