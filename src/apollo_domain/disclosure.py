"""What an anonymous caller over an edge is shown of who wrote what: nothing.

An HTTP caller without a token (no tokens configured) or an AMQP message without a
verified ``user_id`` is anonymous. Its reads show no agent names: an entry's source (its
owner and submission metadata too), and that source or the agreeing sources of its
``bootstrap`` wherever its context names them, the agents of its evidence (pseudonyms),
the source agents of a query, the agents covering a domain. Views that are about agents
(expertise lists, profiles, a source's standing) are refused to it outright
(:data:`AGENT_VIEWS`). The embedding program's own anonymous clients see everything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attrs import evolve

from . import commands as c
from .expertise import DomainCoverage
from .model import Entry, Evidence, SourceRef
from .redaction import HIDDEN as HIDDEN_AGENT
from .redaction import redact_value
from .results import EntryView, EpisodeView, QueryResult

#: Reads whose whole answer is about named agents.
AGENT_VIEWS: frozenset[type[c.Command[Any]]] = frozenset(
    {c.GetExpertise, c.GetAgentProfile, c.GetSource}
)


def hide_agents(result: Any) -> Any:
    """``result`` (a read's result) with every agent name replaced by :data:`HIDDEN_AGENT`
    (lists of agents emptied); a result that names none is returned as it is."""
    if isinstance(result, Entry):
        return _entry(result)
    if isinstance(result, Evidence):
        return evolve(result, source=_source(result.source))
    if isinstance(result, QueryResult):
        return evolve(result, entries=tuple(_view(v) for v in result.entries))
    if isinstance(result, EpisodeView):
        return evolve(
            result,
            agent_id=HIDDEN_AGENT,
            statements=tuple(_view(v) for v in result.statements),
        )
    if isinstance(result, DomainCoverage):
        return evolve(result, agents=())
    if isinstance(result, list):
        if all(isinstance(item, Evidence) for item in result):
            return _evidence(result)
        return [hide_agents(item) for item in result]
    return result


def _evidence(evidence: list[Evidence]) -> list[Evidence]:
    """An entry's evidence with each agent a pseudonym (``hidden-1``, ``hidden-2``, ... in
    order of appearance), so which sources are independent still shows, not who they are."""
    names: dict[str, str] = {}
    return [
        evolve(
            item,
            source=SourceRef(
                names.setdefault(item.source.agent_id, f"{HIDDEN_AGENT}-{len(names) + 1}"),
                provider=item.source.provider,
                channel=item.source.channel,
            ),
        )
        for item in evidence
    ]


def _source(source: SourceRef) -> SourceRef:
    return SourceRef(HIDDEN_AGENT, provider=source.provider)


def _view(view: EntryView) -> EntryView:
    neighbours = tuple(evolve(n, source_agent=HIDDEN_AGENT) for n in view.neighbours)
    return evolve(view, source_agent=HIDDEN_AGENT, neighbours=neighbours)


def _entry(entry: Entry) -> Entry:
    """The entry without its owner and source, and with every mention of its source or
    of an agreeing source in its context (a caller context naming its agent, say)
    hidden."""
    context: dict[str, Any] = dict(entry.source_context)
    named = {entry.source.agent_id}
    bootstrap = context.get("bootstrap")
    if isinstance(bootstrap, Mapping) and isinstance(bootstrap.get("agreement"), list):
        named.update(str(agent) for agent in bootstrap["agreement"])
    for agent in sorted(named):
        context = redact_value(context, agent, HIDDEN_AGENT)
    return evolve(entry, owner_id=None, source=_source(entry.source), source_context=context)


__all__ = ["AGENT_VIEWS", "HIDDEN_AGENT", "hide_agents"]
