"""The graph signal of a hybrid query (docs/retrieval.md, "How retrieval works"): the entities a
query names,
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
    hop = _Hop(text, seeds)
    around = await reads.graph.surroundings(
        seed_ids,
        flt,
        neighbours=settings.graph_neighbours,
        scan=settings.graph_scan,
        hop_text=hop.text,
        hop_limit=limit,
        bridges=settings.graph_neighbours,
    )
    stepped = settings.hop_weight
    points = {e: stepped for e, _ in around.neighbours} | dict.fromkeys(seed_ids, 1.0)
    mentions: dict[UUID, int] = {}
    for _, matched in around.mentioning:
        for entity in matched:
            mentions[entity] = mentions.get(entity, 0) + 1
    scored = [
        (entry_id, fsum(points[e] / mentions[e] for e in matched))
        for entry_id, matched in around.mentioning
    ]
    scored.sort(key=lambda item: -item[1])  # stable: newest first among equals
    return GraphFill(scored[:limit], hop.carried(around.hops, settings.hop_weight))


class _Hop:
    """The second hop of a question: its terms other than the seeds' names (the store
    keeps those no entry about a seed holds), and the lexical rank carried to what the
    hop reaches."""

    def __init__(self, text: str, seeds: Sequence[Entity]) -> None:
        self.asked = query_terms(text)
        self.named = {
            seed.id: set(query_terms(seed.name)).intersection(self.asked) for seed in seeds
        }
        taken = set().union(*self.named.values())
        self.residual = [term for term in self.asked if term not in taken]
        #: The text of the hop search, or None when the names are the whole question.
        self.text = " ".join(self.residual) if self.residual else None

    def carried(
        self, found: Sequence[tuple[UUID, float, frozenset[UUID]]], weight: float
    ) -> Ranking:
        """The lexical rank carried to each entry the hop reached, best first (then by id).

        ts_rank sums its terms' shares and divides by the number of query terms: an
        entry's rank for the residual, over the whole question, is scaled by their ratio,
        and the seed's name adds ``weight`` times the rank it earns. (A term of a seed's
        name the entry holds counts in its own rank, which the lexical signal keeps when
        that is the higher.)"""
        if not found:
            return []
        asked = len(self.asked)
        scale = len(self.residual) / asked
        credit = {seed: rank([1] * len(terms), asked) for seed, terms in self.named.items()}
        carried = [
            (entry_id, score * scale + weight * max(credit[s] for s in from_seeds))
            for entry_id, score, from_seeds in found
        ]
        carried.sort(key=lambda item: (-item[1], str(item[0])))
        return carried


__all__ = ["MAX_NAME_WORDS", "NOTHING", "GraphFill", "graph_fill", "query_names"]
