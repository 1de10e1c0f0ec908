"""PROVISIONAL stand-in for apollo_domain.actions (same shape; replaced when it lands)."""

from __future__ import annotations

from typing import Any

from attrs import frozen

from apollo_domain import commands as c
from apollo_domain.handlers import COMMAND_HANDLERS, Access


@frozen
class Action:
    name: str
    command: type[Any]
    access: Access
    mutates: bool
    tool: bool
    read_only: bool
    destructive: bool
    idempotent: bool
    summary: str


def _a(name: str, kind: type[Any], *, ro: bool = False, d: bool = False, i: bool = False) -> Action:
    access = COMMAND_HANDLERS[kind].access
    doc = " ".join((kind.__doc__ or "").split("\n\n", 1)[0].split())
    return Action(name, kind, access, access is not Access.READ, True, ro, d, i, doc)


_ALL = (
    _a("store_knowledge", c.StoreKnowledge),
    _a("store_many", c.StoreMany),
    _a("link_entries", c.LinkEntries, i=True),
    _a("deprecate_entry", c.DeprecateEntry, d=True, i=True),
    _a("resolve_dispute", c.ResolveDispute, d=True, i=True),
    _a("force_decay", c.ForceDecay, d=True),
    _a("archive_stale", c.ArchiveStale, d=True, i=True),
    _a("label_source", c.LabelSource, d=True, i=True),
    _a("unlabel_source", c.UnlabelSource, d=True, i=True),
    _a("get_source", c.GetSource, ro=True, i=True),
    _a("query_knowledge", c.QueryKnowledge),
    _a("related_entries", c.Traverse),
    _a("get_entry", c.GetEntry, ro=True, i=True),
    _a("get_evidence", c.GetEvidence, ro=True, i=True),
    _a("get_relations", c.GetRelations, ro=True, i=True),
    _a("get_expertise", c.GetExpertise, ro=True, i=True),
    _a("domains_at_risk", c.DomainsAtRisk, ro=True, i=True),
    _a("agent_profile", c.GetAgentProfile, ro=True, i=True),
    _a("stats", c.Stats, ro=True, i=True),
    _a("entities", c.ListEntities, ro=True, i=True),
    _a("entity", c.GetEntity, ro=True, i=True),
    _a("entity_history", c.GetEntityHistory, ro=True, i=True),
    _a("related_entities", c.RelatedEntities, ro=True, i=True),
)
ACTIONS = {a.command: a for a in _ALL}
