"""Apollo's vocabulary of actions: one frozen attrs class per command.

Every edge speaks these commands and nothing else: the library ``Client`` builds them from
its keyword arguments, the HTTP API structures request bodies into them, the service
decodes bus messages into them, and the CLI builds them from its arguments. Their fields are
written once, here; body schemas, message payloads and OpenAPI descriptions are derived from
them (each field's ``schema`` metadata documents it). Fields hold JSON-ready values (strings,
numbers, lists, objects): the use cases validate and normalize them, so a command carries
what the caller sent, not what Apollo made of it.

``agent_id`` on every command names the agent credited with the action (attribution only,
never identity); ``None`` means the caller's own agent. Who may run which command is decided
by the handler table (:mod:`apollo_domain.handlers`), never by an edge.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Generic, TypeVar, get_args, get_origin

from attrs import NOTHING, Factory, field, fields, frozen

from . import bounds as b
from .actions import Access, Bus, action
from .errors import ValidationError
from .expertise import DomainCoverage
from .limits import (
    DEFAULT_ENTITIES,
    DEFAULT_MODE,
    MAX_CONTEXT_WINDOW,
    MAX_CORROBORATION_BATCH,
    MAX_DAYS,
    MAX_DEPTH,
    MAX_ENTITIES,
    MAX_ENTITY_DEPTH,
    MAX_LIMIT,
    MAX_MIN_AGENTS,
    MAX_NAME_INPUT,
    MAX_OUTBOX_BATCH,
    MAX_QUERY_CHARS,
    QUERY_MODES,
)
from .model import AccessScope, ContentType, Entry, Evidence, RelationType, Status
from .ports import ExpertiseRecord, StoreStats
from .results import (
    AgentProfile,
    ContradictionReport,
    CorroborationReport,
    EntityDetail,
    EntityHistory,
    EntitySummary,
    EpisodeView,
    ErasureResult,
    GasResult,
    IngestResult,
    LifecycleResult,
    LinkedEntry,
    LinkResult,
    MaintenanceResult,
    QueryResult,
    RelatedEntity,
    RelatedEntry,
    SourceReport,
    TextResult,
)

R = TypeVar("R")
READ, WRITE, ADMIN = Access.READ, Access.WRITE, Access.ADMIN


def doc(description: str, **schema: Any) -> dict[str, Any]:
    """Field metadata: a description plus JSON-schema constraints for generated documents."""
    return {"schema": {"description": description, **schema}}


_UNIT = {"minimum": 0, "maximum": 1}
_AGENT = doc(
    "Agent credited with the action (attribution only, never identity). Default: the "
    "caller's own agent.",
    maxLength=b.AGENT_ID.limit,
)
#: An agent a command is about (refused naming ``agent_id`` over the bound).
_SUBJECT: dict[str, Any] = {"minLength": 1, "maxLength": b.AGENT_ID.limit}
_ENTRY_ID = doc("The entry's id.", format="uuid")
_TAG_FILTER = doc(
    "Only entries having at least one of these tags (a non-empty list that normalizes to "
    "no tag at all is refused)."
)
_DOMAIN_FILTER = doc(
    "Only entries of this knowledge domain (a value that normalizes to nothing is refused)."
)
_MIN_CONFIDENCE = doc("Confidence floor.", **_UNIT)
_MIN_SIMILARITY = doc(
    "Only entries more similar than this match (unrelated texts never do).",
    minimum=-1.0,
    maximum=1.0,
)
_LIMIT = doc("Maximum entries returned.", minimum=1, maximum=MAX_LIMIT)
_QUERY_TEXT = doc(
    "Search text; under 3 characters browses newest first.", maxLength=MAX_QUERY_CHARS
)


@frozen(kw_only=True)
class Command(Generic[R]):
    """Base of every command; ``R`` is what carrying it out returns."""

    agent_id: str | None = field(default=None, metadata=_AGENT)


def defaults_of(kind: type[Command[Any]]) -> dict[str, Any]:
    """The default of each field of ``kind`` that has one (what a caller may leave out)."""
    found = {}
    for attribute in fields(kind):
        if isinstance(attribute.default, Factory):  # type: ignore[arg-type]
            found[attribute.name] = attribute.default.factory()
        elif attribute.default is not NOTHING:
            found[attribute.name] = attribute.default
    return found


def result_type(kind: type[Command[Any]]) -> Any:
    """What carrying out a command of type ``kind`` returns (its ``Command[R]`` parameter)."""
    for base in getattr(kind, "__orig_bases__", ()):
        if get_origin(base) is Command:
            return get_args(base)[0]
    raise TypeError(f"{kind.__name__} does not declare its result type")


# ------------------------------------------------------------------------------ writes


@action(
    "store_knowledge",
    WRITE,
    bus=Bus.INGEST,
    http=("POST", "/ingest"),
    tool=True,
    aliases=("ingest",),
)
@frozen(kw_only=True)
class StoreKnowledge(Command[IngestResult]):
    """Store knowledge: created, deduplicated, corroborated or rejected."""

    content: str = field(
        metadata=doc(
            "The knowledge to store; it must show something (not only invisible characters).",
            maxLength=b.CONTENT.limit,
        )
    )
    content_type: str | None = field(
        default="observation",
        metadata=doc(
            "Entry type; aliases are normalized, anything unknown becomes observation.",
            examples=[t.value for t in ContentType],
        ),
    )
    tags: tuple[str, ...] | None = field(
        default=None,
        metadata=doc(
            f"Up to {b.TAG_COUNT.limit} distinct tags, each at most {b.TAG.limit} characters "
            "once normalized.",
        ),
    )
    context: dict[str, Any] | None = field(
        default=None,
        metadata=doc(
            "Caller context stored with the entry (nested at most "
            f"{b.JSON_DEPTH.limit} levels, at most {b.CONTEXT_BYTES.limit:,} bytes as JSON)."
        ),
    )
    source_provider: str | None = field(
        default=None,
        metadata=doc(
            "Provider of the source; default: derived from the agent id.",
            maxLength=b.PROVIDER.limit,
        ),
    )
    source_channel: str | None = field(
        default=None, metadata=doc("Channel of the source.", maxLength=b.CHANNEL.limit)
    )
    knowledge_domain: str | None = field(
        default=None,
        metadata=doc(
            "Domain; default: the first tag, else general. At most "
            f"{b.DOMAIN.limit} characters once normalized (like a tag)."
        ),
    )
    access_scope: str = field(
        default="global",
        metadata=doc(
            "global (default), team or private; team and private need a resolved principal.",
            enum=[s.value for s in AccessScope],
        ),
    )
    submitted_by: str | None = field(
        default=None,
        metadata=doc("Who submitted it (free text).", maxLength=b.SUBMITTED_BY.limit),
    )
    submitted_from: str | None = field(
        default=None,
        metadata=doc("Where it was submitted from (free text).", maxLength=b.SUBMITTED_FROM.limit),
    )


@action("store_many", WRITE, tool=True)
@frozen(kw_only=True)
class StoreMany(Command[list[IngestResult]]):
    """Bulk store: the same rules and outcomes as storing the items one by one, in order."""

    items: tuple[StoreKnowledge, ...] = field(
        metadata=doc("The items to store, in order.", maxItems=b.STORE_MANY.limit)
    )


@action("store_text", WRITE, bus=Bus.INGEST, http=("POST", "/texts"), tool=True, idempotent=True)
@frozen(kw_only=True)
class StoreText(Command[TextResult]):
    """Store a text or a conversation: one episode, split into statements, each stored as
    store_knowledge stores one (all or nothing; the same text again creates nothing)."""

    text: str | tuple[dict[str, Any], ...] = field(
        metadata=doc(
            "A document (a string) or a conversation: a list of {speaker, text, at} turns "
            f"(at most {b.TURNS.limit:,}; speaker and at, an ISO 8601 time, optional). At "
            f"most {b.TEXT.limit:,} characters in all, split into at most "
            f"{b.STATEMENTS.limit} statements.",
        )
    )
    content_type: str | None = field(
        default="observation",
        metadata=doc(
            "Type of every statement's entry, as for store_knowledge.",
            examples=[t.value for t in ContentType],
        ),
    )
    tags: tuple[str, ...] | None = field(
        default=None, metadata=doc("Tags of every statement's entry, as for store_knowledge.")
    )
    context: dict[str, Any] | None = field(
        default=None,
        metadata=doc("Caller context stored with every statement's entry, as for store_knowledge."),
    )
    knowledge_domain: str | None = field(
        default=None, metadata=doc("Domain of every statement's entry, as for store_knowledge.")
    )
    access_scope: str = field(
        default="global",
        metadata=doc(
            "Scope of the episode and of every statement's entry: global (default), team or "
            "private.",
            enum=[s.value for s in AccessScope],
        ),
    )


@action("link_entries", WRITE, bus=Bus.INGEST, tool=True, aliases=("link",), idempotent=True)
@frozen(kw_only=True)
class LinkEntries(Command[LinkResult]):
    """Manual curation: a typed relation between two entries the caller can see."""

    from_entry_id: str = field(metadata=doc("Source entry.", format="uuid"))
    to_entry_id: str = field(metadata=doc("Target entry.", format="uuid"))
    relation_type: str = field(
        metadata=doc("Relation type.", examples=[t.value for t in RelationType])
    )
    weight: float = field(default=1.0, metadata=doc("Edge weight in (0, 1].", **_UNIT))


@action(
    "deprecate_entry",
    WRITE,
    bus=Bus.INGEST,
    http=("POST", "/entries/{entry_id}/deprecate"),
    tool=True,
    aliases=("deprecate",),
    destructive=True,
    idempotent=True,
)
@frozen(kw_only=True)
class DeprecateEntry(Command[LifecycleResult]):
    """Archive an entry with a reason; repeating the same call is a no-op."""

    entry_id: str = field(metadata=_ENTRY_ID)
    reason: str = field(
        metadata=doc("Why the entry is deprecated.", minLength=1, maxLength=b.REASON.limit)
    )


@action(
    "resolve_dispute",
    ADMIN,
    bus=Bus.INGEST,
    http=("POST", "/entries/{entry_id}/resolve"),
    tool=True,
    aliases=("resolve",),
    destructive=True,
    idempotent=True,
)
@frozen(kw_only=True)
class ResolveDispute(Command[LifecycleResult]):
    """Resolve a disputed entry: accept/keep confirm it, reject archives it."""

    entry_id: str = field(metadata=_ENTRY_ID)
    resolution: str = field(
        metadata=doc(
            "accept or keep confirm the entry, reject archives it.",
            enum=["accept", "keep", "reject"],
        )
    )


@action(
    "force_decay",
    ADMIN,
    bus=Bus.INGEST,
    http=("POST", "/maintenance/decay"),
    tool=True,
    destructive=True,
    idempotent=False,
)
@frozen(kw_only=True)
class ForceDecay(Command[MaintenanceResult]):
    """Multiply the confidence of every non-archived entry by ``factor``; never archives."""

    factor: float = field(metadata=doc("Multiplier of every non-archived confidence.", **_UNIT))


@action(
    "archive_stale",
    ADMIN,
    bus=Bus.INGEST,
    http=("POST", "/maintenance/archive-stale"),
    tool=True,
    destructive=True,
    idempotent=True,
)
@frozen(kw_only=True)
class ArchiveStale(Command[MaintenanceResult]):
    """Archive non-archived entries untouched for ``days`` days."""

    days: float = field(
        metadata=doc("Archive entries untouched for this many days.", minimum=0, maximum=MAX_DAYS)
    )


@action(
    "label_source",
    ADMIN,
    http=("PUT", "/sources/{agent_id}/label"),
    tool=True,
    destructive=True,
    idempotent=True,
)
@frozen(kw_only=True)
class LabelSource(Command[SourceReport]):
    """Label a source: moderator/admin → credibility 1.0, troll/flagged → 0.05."""

    target_agent_id: str = field(metadata=doc("The source (agent id) labelled.", **_SUBJECT))
    label: str = field(metadata=doc("The label.", enum=["moderator", "admin", "troll", "flagged"]))


@action(
    "unlabel_source",
    ADMIN,
    http=("DELETE", "/sources/{agent_id}/label"),
    tool=True,
    destructive=True,
    idempotent=True,
)
@frozen(kw_only=True)
class UnlabelSource(Command[SourceReport]):
    """Remove a source's label: its credibility is α / (α + β) again."""

    target_agent_id: str = field(metadata=doc("The source (agent id).", **_SUBJECT))


@action("get_source", READ, http=("GET", "/sources/{agent_id}"), tool=True)
@frozen(kw_only=True)
class GetSource(Command[SourceReport]):
    """A source's standing: α, β, credibility, label, validated and refuted evidence."""

    target_agent_id: str = field(metadata=doc("The source (agent id).", **_SUBJECT))


@action("erase_agent", ADMIN, destructive=True, idempotent=True)
@frozen(kw_only=True)
class EraseAgent(Command[ErasureResult]):
    """Erase an agent: its unconfirmed entries go, its confirmed ones are redacted."""

    target_agent_id: str = field(metadata=doc("The agent to erase.", **_SUBJECT))


@action("process_gas_event", WRITE, bus=Bus.GAS, idempotent=True)
@frozen(kw_only=True)
class ProcessGasEvent(Command[GasResult]):
    """An ``llm.audit.complete`` event: comprehend, deposit, relate, synthesize."""

    event: dict[str, Any] = field(metadata=doc("The audit event as its exchange carries it."))


@action("writeback_store", WRITE, bus=Bus.WRITEBACK_STORE, idempotent=False)
@frozen(kw_only=True)
class WritebackStore(Command[IngestResult]):
    """A qualifying LLM response that already carries its embedding.

    ``metadata`` keys ``content_type``, ``tags``, ``knowledge_domain``, ``source_provider``,
    ``source_channel``, ``access_scope``, ``submitted_by`` and ``submitted_from`` become the
    ingest arguments of the same name; every other key goes into the entry's context.
    """

    content: str = field(metadata=doc("The response text."))
    embedding: tuple[float, ...] = field(metadata=doc("Its embedding (the store's dimension)."))
    metadata: dict[str, Any] = field(factory=dict, metadata=doc("Ingest arguments and context."))


@action("writeback_vectorize", WRITE, bus=Bus.WRITEBACK_VECTORIZE, idempotent=False)
@frozen(kw_only=True)
class WritebackVectorize(Command[IngestResult]):
    """A qualifying LLM response without an embedding (``metadata`` as for WritebackStore)."""

    content: str = field(metadata=doc("The response text."))
    metadata: dict[str, Any] = field(factory=dict, metadata=doc("Ingest arguments and context."))


# ------------------------------------------------------------------------------- reads


@frozen(kw_only=True)
class _Search(Command[QueryResult]):
    """The fields every search takes (:class:`QueryKnowledge`, :class:`Retrieve`)."""

    query: str = field(metadata=_QUERY_TEXT)
    min_confidence: float = field(default=0.3, metadata=_MIN_CONFIDENCE)
    limit: int = field(default=10, metadata=_LIMIT)
    tags: tuple[str, ...] | None = field(default=None, metadata=_TAG_FILTER)
    knowledge_domain: str | None = field(default=None, metadata=_DOMAIN_FILTER)
    min_similarity: float = field(default=0.0, metadata=_MIN_SIMILARITY)
    mode: str = field(
        default=DEFAULT_MODE,
        metadata=doc(
            "Retrieval mode: hybrid fuses vector similarity, lexical matches and the entity"
            " graph; vector or lexical use that signal alone.",
            enum=list(QUERY_MODES),
        ),
    )
    context_window: int = field(
        default=0,
        metadata=doc(
            "Give each result stored from a text its episode neighbours: the visible "
            "statements up to this many places before and after it (0: none).",
            minimum=0,
            maximum=MAX_CONTEXT_WINDOW,
        ),
    )


@action(
    "query_knowledge",
    READ,
    bus=Bus.QUERY,
    http=("POST", "/query"),
    tool=True,
    aliases=("query",),
    read_only=False,  # boosts what it returns, counts the access, writes access-log rows
)
@frozen(kw_only=True)
class QueryKnowledge(_Search):
    """Search the visible entries (newest-first browse under three characters).

    Each returned entry gets the retrieval boost, an access count and one access-log row.
    """

    status: tuple[str, ...] | str | None = field(
        default=None,
        metadata=doc(
            "Statuses to include (default: confirmed and candidate). Archived entries are "
            "returned as they are: never boosted, counted or logged.",
            examples=[[s.value for s in Status]],
        ),
    )


@action(
    "retrieve",
    READ,
    bus=Bus.QUERY,
    http=("POST", "/retrieve"),
    tool=True,
    read_only=False,  # boosts what it returns
)
@frozen(kw_only=True)
class Retrieve(_Search):
    """Search the confirmed and candidate entries like ``query_knowledge``, the retrieval
    boost included, without access counts or access-log rows."""

    limit: int = field(default=5, metadata=_LIMIT)


@action(
    "related_entries",
    READ,
    bus=Bus.QUERY,
    http=("POST", "/traverse"),
    tool=True,
    aliases=("traverse",),
    read_only=False,  # writes an access-log row for a known agent
)
@frozen(kw_only=True)
class RelatedEntries(Command[list[RelatedEntry]]):
    """Spreading activation over outgoing relations from a visible entry: at most
    ``MAX_RELATED`` (100) related entries, highest activation first."""

    entry_id: str = field(metadata=doc("Root entry.", format="uuid"))
    depth: int = field(
        default=2,
        metadata=doc("Maximum depth of the walk.", minimum=1, maximum=MAX_DEPTH),
    )
    relation_types: tuple[str, ...] | None = field(
        default=None,
        metadata=doc(
            "Relation types to follow (default: all).",
            examples=[[t.value for t in RelationType]],
            maxItems=b.RELATION_TYPES.limit,
        ),
    )


@action("get_entry", READ, http=("GET", "/entries/{entry_id}"), tool=True)
@frozen(kw_only=True)
class GetEntry(Command[Entry]):
    """One entry the caller may see (unknown and invisible ids are not found)."""

    entry_id: str = field(metadata=_ENTRY_ID)


@action("get_episode", READ, bus=Bus.QUERY, http=("GET", "/episodes/{episode_id}"), tool=True)
@frozen(kw_only=True)
class GetEpisode(Command[EpisodeView]):
    """An episode the caller may see: its text as given and its visible statements."""

    episode_id: str = field(metadata=doc("The episode's id.", format="uuid"))


@action("get_evidence", READ, http=("GET", "/entries/{entry_id}/evidence"), tool=True)
@frozen(kw_only=True)
class GetEvidence(Command[list[Evidence]]):
    """The evidence recorded on an entry the caller may see."""

    entry_id: str = field(metadata=_ENTRY_ID)


@action("get_relations", READ, http=("GET", "/entries/{entry_id}/relations"), tool=True)
@frozen(kw_only=True)
class GetRelations(Command[list[LinkedEntry]]):
    """The relations of an entry the caller may see, both ways, with the entries at their
    other ends (those the caller may see, archived ones included)."""

    entry_id: str = field(metadata=_ENTRY_ID)


@action(
    "get_expertise",
    READ,
    bus=Bus.QUERY,
    http=("GET", "/expertise/{domain}"),
    tool=True,
    aliases=("expertise",),
)
@frozen(kw_only=True)
class GetExpertise(Command[list[ExpertiseRecord]]):
    """Agents by proficiency in a domain."""

    domain: str = field(metadata=doc("Knowledge domain.", minLength=1))
    min_proficiency: float = field(default=0.0, metadata=doc("Proficiency floor.", **_UNIT))


@action(
    "domains_at_risk",
    READ,
    bus=Bus.QUERY,
    http=("GET", "/expertise/at-risk"),
    tool=True,
    aliases=("at_risk",),
)
@frozen(kw_only=True)
class DomainsAtRisk(Command[list[DomainCoverage]]):
    """Domains covered by fewer than ``min_agents`` agents."""

    min_agents: int = field(
        default=2, metadata=doc("Coverage threshold.", minimum=1, maximum=MAX_MIN_AGENTS)
    )


@action(
    "agent_profile",
    READ,
    bus=Bus.QUERY,
    http=("GET", "/agents/{agent_id}/profile"),
    tool=True,
    aliases=("profile",),
)
@frozen(kw_only=True)
class GetAgentProfile(Command[AgentProfile]):
    """An agent's domains, counts, average confidence and last activity."""

    target_agent_id: str = field(metadata=doc("The agent described.", **_SUBJECT))


@action("stats", READ, http=("GET", "/stats"), tool=True)
@frozen(kw_only=True)
class Stats(Command[StoreStats]):
    """Counts over the entries the caller may see."""


# ----------------------------------------------------------------- entity graph reads

_ENTITY_NAME = doc(
    "The entity's name, matched by its normalized form (case and runs of whitespace do not "
    "matter).",
    minLength=1,
    maxLength=MAX_NAME_INPUT,
)


@action("entities", READ, bus=Bus.QUERY, http=("GET", "/entities"), tool=True)
@frozen(kw_only=True)
class ListEntities(Command[list[EntitySummary]]):
    """Entities the caller may see: those a text names, or whose name starts with a prefix
    (both: the named ones with that prefix; neither: all), by name, each with the number of
    entries the caller may see that mention it."""

    query: str | None = field(
        default=None,
        metadata=doc(
            "A text whose runs of words are looked up as entity names.",
            maxLength=MAX_QUERY_CHARS,
        ),
    )
    prefix: str | None = field(
        default=None,
        metadata=doc("Only names starting with this (normalized).", maxLength=MAX_NAME_INPUT),
    )
    limit: int = field(
        default=DEFAULT_ENTITIES,
        metadata=doc("Maximum entities returned.", minimum=1, maximum=MAX_ENTITIES),
    )


@action("entity", READ, bus=Bus.QUERY, http=("GET", "/entities/{name:path}"), tool=True)
@frozen(kw_only=True)
class GetEntity(Command[EntityDetail]):
    """One entity the caller may see: its live edges (typed first, then co_occurs; at most
    100 of each, oldest first) and the newest entries mentioning it (at most 10)."""

    name: str = field(metadata=_ENTITY_NAME)


@action(
    "entity_history",
    READ,
    bus=Bus.QUERY,
    http=("GET", "/entities/{name:path}/history"),
    tool=True,
)
@frozen(kw_only=True)
class GetEntityHistory(Command[EntityHistory]):
    """An entity's typed edges as they were live at a time (bi-temporal), or its whole
    history, retired edges included, without one; at most 100, oldest first."""

    name: str = field(metadata=_ENTITY_NAME)
    as_of: str | None = field(
        default=None,
        metadata=doc(
            "ISO 8601 date or time (no zone: UTC); the edges live then "
            "(valid_from <= as_of < valid_to). Default: every edge, retired ones included.",
            format="date-time",
        ),
    )


@action(
    "related_entities",
    READ,
    bus=Bus.QUERY,
    http=("GET", "/entities/{name:path}/related"),
    tool=True,
)
@frozen(kw_only=True)
class RelatedEntities(Command[list[RelatedEntity]]):
    """Entities within ``depth`` live edges of an entity, nearest first (breadth first), at
    most 50."""

    name: str = field(metadata=_ENTITY_NAME)
    depth: int = field(
        default=1,
        metadata=doc("Edges walked at most.", minimum=1, maximum=MAX_ENTITY_DEPTH),
    )


# ------------------------------------------------------------------------------ aliases

#: Other names the edges accept for a command's fields, as callers of other Apollo
#: implementations send them: lex-apollo's ``store_knowledge`` payloads name the agent
#: ``source_agent``. An alias is only another spelling: what the field allows, it allows.
FIELD_ALIASES: Final[Mapping[type[Command[Any]], Mapping[str, str]]] = {
    StoreKnowledge: {"source_agent": "agent_id"},
}


def aliases_of(kind: type[Command[Any]]) -> Mapping[str, str]:
    """The aliases ``kind`` accepts (alias → field)."""
    return FIELD_ALIASES.get(kind, {})


def unalias(kind: type[Command[Any]], data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with each alias of ``kind`` renamed to its field. An alias given beside its
    field with another value raises :class:`ValidationError` naming the alias."""
    fields = dict(data)
    for alias, target in aliases_of(kind).items():
        if alias not in fields:
            continue
        value = fields.pop(alias)
        if target in fields and fields[target] != value:
            raise ValidationError(alias, f"is another name for {target} and differs from it")
        fields[target] = value
    return fields


# ------------------------------------------------------------------------ periodic work


@action(
    "run_decay_cycle",
    ADMIN,
    http=("POST", "/maintenance/decay"),  # the route's call without a factor
    destructive=True,
    idempotent=False,
)
@frozen(kw_only=True)
class RunDecayCycle(Command[MaintenanceResult]):
    """Decay every entry by the hours since its last decay, then archive the faded."""


@action("check_corroboration", ADMIN, idempotent=False)
@frozen(kw_only=True)
class CheckCorroboration(Command[CorroborationReport]):
    """Promote candidates that a confirmed entry or an independent partner corroborates."""

    limit: int = field(
        default=100,
        metadata=doc("Candidates examined at most.", minimum=1, maximum=MAX_CORROBORATION_BATCH),
    )


@action("aggregate_expertise", ADMIN, idempotent=True)
@frozen(kw_only=True)
class AggregateExpertise(Command[MaintenanceResult]):
    """Recompute every agent's proficiency per domain."""


@action("process_outbox", ADMIN, idempotent=False)
@frozen(kw_only=True)
class ProcessOutbox(Command[ContradictionReport]):
    """Run queued contradiction scans."""

    limit: int = field(
        default=50,
        metadata=doc("Outbox items processed at most.", minimum=1, maximum=MAX_OUTBOX_BATCH),
    )


@action("trim_access_log", ADMIN, destructive=True, idempotent=True)
@frozen(kw_only=True)
class TrimAccessLog(Command[MaintenanceResult]):
    """Delete the access-log rows older than ``days`` days (retention)."""

    days: int = field(
        default=30,
        metadata=doc(
            "Keep the rows of this many days; delete older ones.", minimum=1, maximum=MAX_DAYS
        ),
    )


__all__ = [
    "FIELD_ALIASES",
    "AggregateExpertise",
    "ArchiveStale",
    "CheckCorroboration",
    "Command",
    "DeprecateEntry",
    "DomainsAtRisk",
    "EraseAgent",
    "ForceDecay",
    "GetAgentProfile",
    "GetEntity",
    "GetEntityHistory",
    "GetEntry",
    "GetEvidence",
    "GetExpertise",
    "GetRelations",
    "GetSource",
    "LabelSource",
    "LinkEntries",
    "ListEntities",
    "ProcessGasEvent",
    "ProcessOutbox",
    "QueryKnowledge",
    "RelatedEntities",
    "RelatedEntries",
    "ResolveDispute",
    "Retrieve",
    "RunDecayCycle",
    "Stats",
    "StoreKnowledge",
    "StoreMany",
    "TrimAccessLog",
    "UnlabelSource",
    "WritebackStore",
    "WritebackVectorize",
    "aliases_of",
    "defaults_of",
    "doc",
    "result_type",
    "unalias",
]
