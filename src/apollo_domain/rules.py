"""Who may see what, which sources are independent, what may corroborate what (docs/concepts.md,
"The rules in one page")."""

from __future__ import annotations

from collections.abc import Iterable

from attrs import frozen

from .errors import ValidationError
from .model import (
    AccessScope,
    ContentType,
    Entry,
    Evidence,
    EvidenceKind,
    Principal,
    RelationType,
    SourceRef,
    Viewer,
)
from .normalize import UNKNOWN_PROVIDER
from .redaction import HIDDEN, REDACTED

#: Agent ids Apollo itself uses: the erasure placeholder, the name anonymous callers see,
#: the agent of a call that names none (the anonymous AMQP publisher among them), the
#: anonymous HTTP caller, GAS's default attribution, the embedding program and its
#: periodic jobs. No edge accepts them as a source (a payload's agent id, a GAS
#: ``caller``, a token's agent, a broker login), compared without case.
RESERVED_AGENT_IDS = frozenset({REDACTED, HIDDEN, "unknown", "http", "gas", "apollo"})


def check_agent_id(name: str, agent_id: str) -> str:
    """``agent_id`` when it may be a source; :class:`ValidationError` naming ``name`` when
    it is one of :data:`RESERVED_AGENT_IDS` (or a pseudonym ``hidden-<n>``)."""
    folded = agent_id.strip().lower()
    if folded in RESERVED_AGENT_IDS or folded.startswith(f"{HIDDEN}-"):
        raise ValidationError(name, f"{agent_id!r} is reserved by Apollo; name another agent")
    return agent_id


#: The relation types that make their two entries parties to a dispute.
DISPUTE_RELATIONS = frozenset({RelationType.CONTRADICTS, RelationType.SUPERSEDES})


def dispute_refusal(
    principal: Principal, kind: RelationType, source: Entry, target: Entry
) -> str | None:
    """Why ``principal`` may not relate ``source`` to ``target`` by ``kind`` (None: it may).

    A ``contradicts`` or ``supersedes`` link puts entries into a dispute, whose resolution
    archives the losing side and refutes its sources; so only the owner of an entry (or an
    admin) may make it a party: a non-admin must own the ``source`` entry, and for
    ``contradicts`` (which a resolution follows both ways) the ``target`` as well. An entry
    without an owner (an anonymous write) is owned by no one. Other relation types only
    need both entries visible."""
    if kind not in DISPUTE_RELATIONS or principal.role.administers:
        return None
    owner = principal.id
    if owner is None or source.owner_id != owner:
        return f"only the owner of entry {source.id} or an admin may make it a party to a dispute"
    if kind is RelationType.CONTRADICTS and target.owner_id != owner:
        return f"only the owner of entry {target.id} or an admin may make it a party to a dispute"
    return None


def is_visible(entry: Entry, viewer: Viewer) -> bool:
    """global: everyone; private: only the owner; team: principals sharing a group with
    the owner (the owner included). An unresolved principal sees only global entries."""
    return scope_visible(entry.access_scope, entry.owner_id, viewer)


def scope_visible(scope: AccessScope, owner_id: str | None, viewer: Viewer) -> bool:
    if scope is AccessScope.GLOBAL:
        return True
    if viewer.principal_id is None or owner_id is None:
        return False
    if owner_id == viewer.principal_id:
        return True
    return scope is AccessScope.TEAM and owner_id in viewer.team_owners


def independent(a: SourceRef, b: SourceRef) -> bool:
    """Two sources are independent unless: same agent; or both providers known and equal;
    or both channels non-empty and equal. Symmetric."""
    if a.agent_id == b.agent_id:
        return False
    if UNKNOWN_PROVIDER not in (a.provider, b.provider) and a.provider == b.provider:
        return False
    return not (a.channel and b.channel and a.channel == b.channel)


def independent_of_all(source: SourceRef, recorded: Iterable[SourceRef]) -> bool:
    return all(independent(source, other) for other in recorded)


@frozen
class Corroborator:
    """What corroboration needs to know about the evidence side."""

    knowledge_domain: str
    content_type: ContentType
    access_scope: AccessScope
    owner_id: str | None
    source: SourceRef


def same_partition_scope(
    evidence_scope: AccessScope,
    evidence_owner: str | None,
    target: Entry,
    owners_sharing_group: frozenset[str],
) -> bool:
    """Scope rules of corroboration: same scope; private → same resolved owner; team → the
    owners share a group (``owners_sharing_group``: principals sharing a group with the
    evidence owner); unresolved private/team owners never corroborate."""
    if evidence_scope is not target.access_scope:
        return False
    if evidence_scope is AccessScope.GLOBAL:
        return True
    if evidence_owner is None or target.owner_id is None:
        return False
    if evidence_scope is AccessScope.PRIVATE:
        return evidence_owner == target.owner_id
    return target.owner_id == evidence_owner or target.owner_id in owners_sharing_group


def may_corroborate(
    evidence: Corroborator,
    target: Entry,
    similarity: float,
    recorded_sources: Iterable[SourceRef],
    *,
    min_similarity: float,
    owners_sharing_group: frozenset[str] = frozenset(),
) -> bool:
    """All the rules of corroboration (docs/concepts.md, "The rules in one page"): similarity ≥
    threshold, same domain,
    same content type, scope rules, and a source independent of every recorded one."""
    return (
        similarity >= min_similarity
        and evidence.knowledge_domain == target.knowledge_domain
        and evidence.content_type == target.content_type
        and same_partition_scope(
            evidence.access_scope, evidence.owner_id, target, owners_sharing_group
        )
        and independent_of_all(evidence.source, recorded_sources)
    )


AGREEING_KINDS: frozenset[EvidenceKind] = frozenset(
    {EvidenceKind.AGREEMENT, EvidenceKind.CORROBORATION}
)
"""Evidence that passed every corroboration rule when it was recorded."""


def agreeing_sources(entry: Entry, evidence: Iterable[Evidence]) -> list[SourceRef]:
    """The mutually independent sources that say what ``entry`` says: its origin, then
    each source whose agreement or corroboration is recorded on it, in the order recorded,
    kept when independent of every source kept before (so no source counts twice).
    Two or more mean independent sources agree on the entry (docs/concepts.md, "The rules in one
    page")."""
    kept = [entry.source]
    for item in evidence:
        if item.kind in AGREEING_KINDS and independent_of_all(item.source, kept):
            kept.append(item.source)
    return kept


__all__ = [
    "AGREEING_KINDS",
    "DISPUTE_RELATIONS",
    "RESERVED_AGENT_IDS",
    "Corroborator",
    "agreeing_sources",
    "check_agent_id",
    "dispute_refusal",
    "independent",
    "independent_of_all",
    "is_visible",
    "may_corroborate",
    "same_partition_scope",
    "scope_visible",
]
