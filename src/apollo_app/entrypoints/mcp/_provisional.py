"""PROVISIONAL stand-in for the action record (replaced when it lands; never on main)."""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

from apollo_domain import commands as c
from apollo_domain.handlers import COMMAND_HANDLERS, Access


@frozen
class Action:
    name: str
    command: type[c.Command[Any]]
    summary: str
    read_only: bool
    destructive: bool
    idempotent: bool
    mcp: bool = True
    fixed: dict[str, Any] = field(factory=dict)

    @property
    def access(self) -> Access:
        return COMMAND_HANDLERS[self.command].access


def _read(name: str, command: type[c.Command[Any]], summary: str, **kw: Any) -> Action:
    return Action(name, command, summary, True, False, True, **kw)


def _write(
    name: str, command: type[c.Command[Any]], summary: str, destructive: bool, idempotent: bool
) -> Action:
    return Action(name, command, summary, False, destructive, idempotent)


ACTIONS = (
    _write("store_knowledge", c.StoreKnowledge, "Store knowledge.", False, True),
    _write("store_many", c.StoreMany, "Store many.", False, True),
    _read("query_knowledge", c.QueryKnowledge, "Search."),
    _read("related_entries", c.Traverse, "Traverse."),
    _write("link_entries", c.LinkEntries, "Link.", False, True),
    _write("deprecate_entry", c.DeprecateEntry, "Deprecate.", True, True),
    _write("resolve_dispute", c.ResolveDispute, "Resolve.", True, True),
    _read("get_entry", c.GetEntry, "Entry."),
    _read("get_evidence", c.GetEvidence, "Evidence."),
    _read("get_relations", c.GetRelations, "Relations."),
    _read("get_expertise", c.GetExpertise, "Expertise."),
    _read("domains_at_risk", c.DomainsAtRisk, "At risk."),
    _read("agent_profile", c.GetAgentProfile, "Profile."),
    _read("entities", c.ListEntities, "Entities."),
    _read("entity", c.GetEntity, "Entity."),
    _read("entity_history", c.GetEntityHistory, "History."),
    _read("related_entities", c.RelatedEntities, "Related entities."),
    _write("force_decay", c.ForceDecay, "Force decay.", True, False),
    _write("archive_stale", c.ArchiveStale, "Archive stale.", True, True),
    _write("check_corroboration", c.CheckCorroboration, "Corroboration.", False, True),
)
