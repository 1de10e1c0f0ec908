"""The HTTP operations: each route names the command it carries and how its result is shown.

A route's inputs are its command's fields: a POST route reads them from the JSON body, a
GET route from query parameters, and path parameters fill the fields they name. Fields a
route sets itself (``fill``, from the request) are not accepted from callers. A route's
method, path and operation id are its action's record (:mod:`apollo_domain.actions`).
Both the Starlette routes and the OpenAPI document are built from this one table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import cattrs
from attrs import field, frozen
from starlette.requests import Request

from apollo_domain import commands as c
from apollo_domain.actions import action_of
from apollo_domain.expertise import DomainCoverage
from apollo_domain.limits import MAX_RELATED
from apollo_domain.model import Entry, Evidence, Outcome, Principal, Status
from apollo_domain.ports import ExpertiseRecord, StoreStats
from apollo_domain.results import (
    AgentProfile,
    EntityDetail,
    EntityHistory,
    EntitySummary,
    EpisodeView,
    EvidenceView,
    IngestResult,
    LifecycleResult,
    LinkedEntry,
    MaintenanceResult,
    QueryResult,
    RelatedEntity,
    RelatedEntry,
    SourceReport,
    TextResult,
)

from ...facade import Apollo
from ...metrics import Metrics
from ...wire.codec import rounded
from .errors import error_body
from .schema import JsonSchema

PREFIX = "/api/apollo"
_CONVERTOR = re.compile(r"\{(\w+):\w+\}")
#: The agent credited with an HTTP call that names none, when the caller is anonymous.
HTTP_AGENT = "http"


@frozen
class Call:
    """One request as an operation sees it."""

    request: Request
    apollo: Apollo
    metrics: Metrics | None
    principal: Principal
    converter: cattrs.Converter

    def out(self, value: Any) -> Any:
        return self.converter.unstructure(value)


Present = Callable[[Call, Any], tuple[int, Any]]


def _plain(call: Call, result: Any) -> tuple[int, Any]:
    return 200, call.out(result)


def _listed(key: str) -> Present:
    def present(call: Call, result: Any) -> tuple[int, Any]:
        return 200, {key: call.out(result)}

    return present


def _ingested(call: Call, result: IngestResult) -> tuple[int, Any]:
    """201 when an entry was created; 200 when the knowledge was recorded against an
    existing entry (deduplicated, corroborated); 422 when admission rejected it."""
    if result.outcome is Outcome.REJECTED:
        return 422, error_body("rejected", result.reason or "rejected")
    return (201 if result.outcome is Outcome.CREATED else 200), call.out(result)


def _entry(call: Call, entry: Entry) -> tuple[int, Any]:
    data = call.out(entry)
    data.pop("embedding", None)
    return 200, data


def _evidence(call: Call, evidence: list[Evidence]) -> tuple[int, Any]:
    return 200, {"evidence": call.out(EvidenceView.list_of(evidence))}


def _stats(call: Call, stats: StoreStats) -> tuple[int, Any]:
    by_status = {status.value: int(stats.by_status.get(status.value, 0)) for status in Status}
    return 200, {
        "total": stats.total,
        "active": sum(by_status[s.value] for s in Status if s.is_active),
        "last_24h": stats.last_24h,
        "average_confidence": rounded(stats.average_confidence),
        "by_status": by_status,
        "by_content_type": {str(k): int(v) for k, v in stats.by_content_type.items()},
        "total_relations": stats.total_relations,
    }


def _submitted(call: Call) -> dict[str, Any]:
    return {"submitted_by": call.principal.id, "submitted_from": HTTP_AGENT}


@frozen
class Operation:
    method: str
    path: str
    operation_id: str
    summary: str
    command: type[c.Command[Any]] | None  # None: served by the app itself (health)
    ok: tuple[int, str, Any]  # status, description, result type or schema
    also_ok: tuple[tuple[int, str], ...] = ()  # other success statuses (same result)
    present: Present = _plain
    path_fields: Mapping[str, str] = field(factory=dict)  # path parameter → command field
    fill: Callable[[Call], Mapping[str, Any]] | None = None  # fields set from the request
    filled: frozenset[str] = frozenset()  # the fields ``fill`` sets
    optional: frozenset[str] = frozenset()  # fields this route lets callers leave out
    choose: Callable[[Mapping[str, Any]], type[c.Command[Any]]] | None = None
    tag: str = "knowledge"
    authenticated: bool = False  # needs a token when tokens are configured
    errors: tuple[int, ...] = ()  # documented error statuses (401 always is)

    @property
    def full_path(self) -> str:
        """The route's path, path convertors included (``{name:path}``)."""
        return PREFIX + self.path

    @property
    def document_path(self) -> str:
        """The path as OpenAPI writes it: parameters without their convertors."""
        return _CONVERTOR.sub(r"{\1}", self.full_path)

    @property
    def reads_body(self) -> bool:
        return self.command is not None and self.method in ("POST", "PUT")

    @classmethod
    def of(
        cls, command: type[c.Command[Any]], summary: str, *args: Any, **options: Any
    ) -> Operation:
        """The operation of ``command``'s route: its method, path and operation id (the
        action's name) are the action's record (:mod:`apollo_domain.actions`)."""
        record = action_of(command)
        if record.http is None:
            raise TypeError(f"{record.name} has no HTTP route")
        method, path = record.http
        return cls(method, path, record.name, summary, command, *args, **options)

    def inputs(self) -> tuple[attrs.Attribute, ...]:  # type: ignore[type-arg]
        """The command fields callers supply (body or query string)."""
        if self.command is None:
            return ()
        hidden = {*self.path_fields.values(), *self.filled}
        if not self.reads_body:  # query-string inputs: attribution is the token's
            hidden.add("agent_id")
        return tuple(a for a in attrs.fields(self.command) if a.name not in hidden)

    def aliases(self) -> Mapping[str, str]:
        """Other names callers may give inputs (see ``commands.FIELD_ALIASES``)."""
        if self.command is None:
            return {}
        names = {a.name for a in self.inputs()}
        return {k: v for k, v in c.aliases_of(self.command).items() if v in names}


def _decay_command(data: Mapping[str, Any]) -> type[c.Command[Any]]:
    return c.ForceDecay if "factor" in data else c.RunDecayCycle  # null is not a factor


_ENTRY_PATH = {"entry_id": "entry_id"}
_WRITE_ERRORS = (400, 500, 503)

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "GET",
        "/health",
        "health",
        "Whether every part of the store can be written and, with RabbitMQ, the service "
        "has its broker connection (503 when degraded).",
        None,
        (200, "The store (and the bus) are healthy.", None),
        tag="service",
    ),
    Operation.of(
        c.StoreKnowledge,
        "Store knowledge: created (201), deduplicated or corroborated (200), rejected (422).",
        (201, "Created: a new entry holds the knowledge.", IngestResult),
        also_ok=((200, "Recorded against an existing entry: deduplicated or corroborated."),),
        present=_ingested,
        fill=_submitted,
        filled=frozenset({"submitted_by", "submitted_from"}),
        errors=(*_WRITE_ERRORS, 409, 413, 422, 429),
    ),
    Operation.of(
        c.StoreText,
        "Store a text or a conversation as one episode of statements, each stored as "
        "/ingest stores one (all or nothing; the same text again creates nothing).",
        (200, "The episode and one ingest result per statement, in order.", TextResult),
        errors=(*_WRITE_ERRORS, 413, 429),
        tag="texts",
    ),
    Operation.of(
        c.GetEpisode,
        "One episode, when the caller may see it: its text as given and its visible statements.",
        (200, "The episode.", EpisodeView),
        path_fields={"episode_id": "episode_id"},
        errors=(400, 404, 503),
        tag="texts",
    ),
    Operation.of(
        c.QueryKnowledge,
        "Semantic search over visible entries (browse newest first below 3 characters).",
        (200, "Matching entries.", QueryResult),
        errors=(*_WRITE_ERRORS, 413),
    ),
    Operation.of(
        c.Retrieve,
        "Like query, without access counts or access-log rows.",
        (200, "Matching entries.", QueryResult),
        errors=(*_WRITE_ERRORS, 413),
    ),
    Operation.of(
        c.RelatedEntries,
        "Spreading activation over relations from a visible entry.",
        (
            200,
            f"At most {MAX_RELATED} related entries, highest activation first.",
            ("related", RelatedEntry),
        ),
        present=_listed("related"),
        errors=(*_WRITE_ERRORS, 404, 413),
    ),
    Operation.of(
        c.GetEntry,
        "One entry, when the caller may see it.",
        (200, "The entry (without its embedding).", Entry),
        present=_entry,
        path_fields=_ENTRY_PATH,
        errors=(400, 404, 503),
    ),
    Operation.of(
        c.GetEvidence,
        "The evidence on a visible entry: each source, its kind, its credibility when "
        "recorded, and whether it counts as independent of the sources before it.",
        (200, "The evidence, origin first, in the order recorded.", ("evidence", EvidenceView)),
        present=_evidence,
        path_fields=_ENTRY_PATH,
        errors=(400, 404, 503),
    ),
    Operation.of(
        c.GetRelations,
        "The relations of a visible entry, both ways, with the visible entries at their "
        "other ends (archived ones included).",
        (
            200,
            f"Outgoing then incoming, newest first, at most {MAX_RELATED} each way.",
            ("relations", LinkedEntry),
        ),
        present=_listed("relations"),
        path_fields=_ENTRY_PATH,
        errors=(400, 404, 503),
    ),
    Operation.of(
        c.DeprecateEntry,
        "Archive an entry with a deprecation reason (repeating it changes nothing).",
        (200, "Deprecated; `changed` is false for a repeat.", LifecycleResult),
        path_fields=_ENTRY_PATH,
        errors=(*_WRITE_ERRORS, 404, 413),
    ),
    Operation.of(
        c.ResolveDispute,
        "Resolve a disputed entry: accept/keep confirm it, reject archives it.",
        (200, "Resolved.", LifecycleResult),
        path_fields=_ENTRY_PATH,
        errors=(*_WRITE_ERRORS, 404, 409, 413),
    ),
    Operation.of(
        c.DomainsAtRisk,
        "Domains covered by fewer than min_agents agents.",
        (200, "Thinnest domains first.", ("domains", DomainCoverage)),
        present=_listed("domains"),
        errors=(400, 503),
        tag="expertise",
    ),
    Operation.of(
        c.GetExpertise,
        "Agents by proficiency in a domain.",
        (200, "Most proficient first.", ("agents", ExpertiseRecord)),
        present=_listed("agents"),
        path_fields={"domain": "domain"},
        errors=(400, 404, 503),
        tag="expertise",
    ),
    Operation.of(
        c.GetAgentProfile,
        "An agent's domains, counts, average confidence and last activity.",
        (200, "The profile.", AgentProfile),
        path_fields={"agent_id": "target_agent_id"},
        errors=(400, 404, 503),
        tag="expertise",
    ),
    Operation.of(
        c.GetSource,
        "A source's standing: α, β, credibility, label, validated and refuted evidence.",
        (200, "The source.", SourceReport),
        path_fields={"agent_id": "target_agent_id"},
        errors=(400, 503),
        tag="sources",
    ),
    Operation.of(
        c.LabelSource,
        "Label a source (admin): moderator/admin → credibility 1.0, troll/flagged → 0.05.",
        (200, "The source as labelled.", SourceReport),
        path_fields={"agent_id": "target_agent_id"},
        errors=(400, 413, 503),
        tag="sources",
    ),
    Operation.of(
        c.UnlabelSource,
        "Remove a source's label (admin).",
        (200, "The source without its label.", SourceReport),
        path_fields={"agent_id": "target_agent_id"},
        errors=(400, 503),
        tag="sources",
    ),
    Operation.of(
        c.ForceDecay,
        "With factor: force a decay by that factor; without: run the periodic decay cycle.",
        (200, "Counts of decayed and archived entries.", MaintenanceResult),
        optional=frozenset({"factor"}),
        choose=_decay_command,
        errors=(*_WRITE_ERRORS, 413),
        tag="maintenance",
        authenticated=True,
    ),
    Operation.of(
        c.ArchiveStale,
        "Archive non-archived entries untouched for `days` days.",
        (200, "Count of archived entries.", MaintenanceResult),
        errors=(*_WRITE_ERRORS, 413),
        tag="maintenance",
        authenticated=True,
    ),
    Operation.of(
        c.Stats,
        "Counts over the entries the caller may see.",
        (200, "Counts.", None),
        present=_stats,
        errors=(503,),
        tag="service",
    ),
)

# An entity's name may hold a slash (``500 req/s``): the name routes take the rest of the
# path, so the history and related routes come before the entity's own.
_ENTITY_PATH = {"name": "name"}
ENTITY_OPERATIONS: tuple[Operation, ...] = (
    Operation.of(
        c.ListEntities,
        "Entities the caller may see that a text names or whose name starts with a prefix.",
        (
            200,
            "By name, each with the number of visible entries mentioning it.",
            ("entities", EntitySummary),
        ),
        present=_listed("entities"),
        errors=(400, 503),
        tag="entities",
    ),
    Operation.of(
        c.GetEntityHistory,
        "An entity's typed edges live at as_of, or its whole history (retired edges too).",
        (200, "The edges, oldest first.", EntityHistory),
        path_fields=_ENTITY_PATH,
        errors=(400, 404, 503),
        tag="entities",
    ),
    Operation.of(
        c.RelatedEntities,
        "Entities within depth live edges of an entity, nearest first.",
        (200, "At most 50 entities, nearest first.", ("related", RelatedEntity)),
        present=_listed("related"),
        path_fields=_ENTITY_PATH,
        errors=(400, 404, 503),
        tag="entities",
    ),
    Operation.of(
        c.GetEntity,
        "One entity the caller may see, with its live edges and newest entries.",
        (200, "The entity.", EntityDetail),
        path_fields=_ENTITY_PATH,
        errors=(400, 404, 503),
        tag="entities",
    ),
)
OPERATIONS = OPERATIONS + ENTITY_OPERATIONS

HEALTH_SCHEMA: JsonSchema = {
    "type": "object",
    "required": ["status", "data_available"],
    "properties": {
        "status": {"type": "string", "enum": ["ok", "degraded"]},
        "data_available": {"type": "boolean"},
        # Only when the service has a broker: degraded while its connection is lost.
        "bus": {"type": "string", "enum": ["ok", "degraded"]},
    },
}
_COUNTS: JsonSchema = {"type": "object", "additionalProperties": {"type": "integer"}}
STATS_SCHEMA: JsonSchema = {
    "type": "object",
    "required": [
        "total",
        "active",
        "last_24h",
        "average_confidence",
        "by_status",
        "by_content_type",
        "total_relations",
    ],
    "properties": {
        "total": {"type": "integer", "description": "Entries the caller may see."},
        "active": {
            "type": "integer",
            "description": "Of those, the active ones (candidate, confirmed or disputed).",
        },
        "last_24h": {"type": "integer"},
        "average_confidence": {
            "type": "number",
            "description": "Average confidence of the active entries (6 decimals).",
        },
        "by_status": {
            "type": "object",
            "required": [s.value for s in Status],
            "additionalProperties": False,
            "properties": {s.value: {"type": "integer"} for s in Status},
        },
        "by_content_type": _COUNTS,
        "total_relations": {"type": "integer"},
    },
}
#: Result schemas the table names by ``None`` (served as hand-shaped JSON).
SHAPED: Mapping[str, JsonSchema] = {"health": HEALTH_SCHEMA, "stats": STATS_SCHEMA}

__all__ = ["ENTITY_OPERATIONS", "HTTP_AGENT", "OPERATIONS", "PREFIX", "SHAPED", "Call", "Operation"]
