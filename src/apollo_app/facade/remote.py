"""Client mode: the runner methods of :class:`apollo_app.Client` over the message bus.

An agent in client mode needs no database: mutations are published (persistent, confirmed
by the broker) to the service's ingest queue and return a :class:`Dispatch` envelope, which
says what was sent, not that it happened. Reads are RPC requests on the query queue and
return the same result types as the in-process client, or raise the error the service
reported. Input that can be checked without the store is checked here, before publishing,
with the same validation the service applies.

Identity is the bus login: each message carries it as ``user_id``, which RabbitMQ verifies
against the connection. The body names the calling agent (attribution only), never a
principal. Replies are authenticated the same way: the service answers with its own login
as ``user_id``, and the client takes only replies from ``service_users`` (default: its own
login, for a mesh whose agents and service share one; set ``APOLLO_SERVICE_USERS`` when the
service has a login of its own). A reply from anyone else (a forgery by whoever may read the
query queue) is dropped and logged, and the client keeps waiting for the real one.

Read your writes (``read_your_writes=True``): each mutation is published with a reply
queue and returns once the service has committed it, with the commit's causal token in
its :class:`Dispatch` (the service's receipt; an error it refused the write for is raised,
as for a read); the client keeps the latest token and presents it with every read
(``x-apollo-causal-token``), so a read sees this client's writes whichever copy of the
store serves it, and waits for nothing else. Off (the default), a mutation returns once
the broker confirmed it, before the service applied it.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar
from uuid import uuid4

from attrs import evolve

from apollo_domain import commands as c
from apollo_domain.causal import CausalToken, format_token, latest, parse_token
from apollo_domain.commands import result_type
from apollo_domain.episodes import read_turns
from apollo_domain.errors import ConfigurationError, RpcTimeout, ValidationError
from apollo_domain.expertise import DomainCoverage
from apollo_domain.lifecycle import parse_resolution, validate_decay_factor, validate_stale_days
from apollo_domain.limits import (
    DEFAULT_STATUSES,
    MAX_CONTEXT_WINDOW,
    MAX_ENTITIES,
    MAX_ENTITY_DEPTH,
    MAX_LIMIT,
    MAX_MIN_AGENTS,
)
from apollo_domain.model import Principal
from apollo_domain.ports import ExpertiseRecord
from apollo_domain.ports.messaging import Message, MessageBus
from apollo_domain.ports.topology import Topology
from apollo_domain.results import (
    AgentProfile,
    Dispatch,
    EntityDetail,
    EntityHistory,
    EntitySummary,
    EpisodeView,
    QueryResult,
    RelatedEntity,
    RelatedEntry,
)
from apollo_domain.services import Caller
from apollo_domain.services.context import (
    UNKNOWN_AGENT,
    bounded_int,
    parse_statuses,
    unit_float,
)
from apollo_domain.services.entity_reads import (
    parse_entity_query,
    parse_instant,
    parse_name,
    parse_prefix,
)
from apollo_domain.services.graph import parse_id
from apollo_domain.services.ingest import prepare
from apollo_domain.services.texts import statement_command
from apollo_domain.traversal import parse_relation_types, validate_depth
from apollo_domain.validation import bounded_float

from .. import bootstrap
from ..settings import parse_users, queue_type_setting
from ..wire.codec import format_datetime
from ..wire.envelope import (
    CAUSAL_HEADER,
    DEADLINE_HEADER,
    MUTATIONS,
    action_of,
    encode_command,
    payload_of,
)
from ..wire.replies import Receipt, decode_reply
from .client import SUBJECT, KnowledgeClient, command_of, parameters_of, store_many_command

R = TypeVar("R")
C = TypeVar("C", bound=c.Command[Any])
S = TypeVar("S", c.QueryKnowledge, c.Retrieve)


class RemoteClient:
    """The runner methods of one agent, served by an Apollo service over ``bus``.

    ``user_id`` (default: the bus's login) is the identity the service acts as; a bus
    without a login publishes anonymously (global entries only). ``service_users`` are
    the logins whose replies are taken (default: ``user_id``; none known: any reply).
    """

    def __init__(
        self,
        bus: MessageBus,
        *,
        agent_id: str = "unknown",
        topology: Topology | None = None,
        user_id: str | None = None,
        rpc_timeout: float = 10.0,
        service_users: Collection[str] | None = None,
        read_your_writes: bool = False,
    ) -> None:
        if not (math.isfinite(rpc_timeout) and rpc_timeout > 0):
            raise ValidationError("rpc_timeout", f"must be a positive number, got {rpc_timeout!r}")
        self.bus = bus
        self.topology = topology or getattr(bus, "topology", None) or Topology()
        self.user_id = user_id if user_id is not None else getattr(bus, "login", None)
        if service_users is not None:
            self.service_users: frozenset[str] | None = frozenset(service_users)
        else:
            self.service_users = None if self.user_id is None else frozenset({self.user_id})
        self.caller = Caller.of(agent_id, Principal(self.user_id))
        self.rpc_timeout = rpc_timeout
        self.read_your_writes = read_your_writes
        #: The latest causal token of this client's writes (read-your-writes only).
        self.causal_token: CausalToken | None = None

    @property
    def agent_id(self) -> str:
        return self.caller.agent_id

    @property
    def _credited(self) -> str | None:
        """The agent a message names: none when the client was given none (the service
        then credits the login; ``unknown`` is Apollo's own and never a source)."""
        return None if self.caller.agent_id == UNKNOWN_AGENT else self.caller.agent_id

    @property
    def principal(self) -> Principal:
        return self.caller.principal

    # -- mutations: validate, publish and return the envelope ------------------------------

    @parameters_of(KnowledgeClient.store_knowledge)
    async def store_knowledge(self, **arguments: Any) -> Dispatch:
        return await self._publish(self._normalized(command_of(c.StoreKnowledge, arguments)))

    @parameters_of(KnowledgeClient.store_many)
    async def store_many(self, **arguments: Any) -> list[Dispatch]:
        """Every item validated first (nothing is published when one is bad), then one
        message per item, each exactly-once on the service side. The messages are
        published in item order without waiting for each confirm in turn; this returns
        once the broker has confirmed them all."""
        return await self._publish_items(store_many_command(arguments["items"]))

    async def run(self, command: c.Command[Any]) -> Any:
        """Any command the bus carries, as an edge hands it over: a store (or bulk store)
        checked here as the service will check it and published, another mutation
        published (each returns its :class:`Dispatch`), a read asked over RPC."""
        if isinstance(command, c.StoreMany):
            return await self._publish_items(command)
        if isinstance(command, c.StoreKnowledge):
            return await self._publish(self._normalized(command))
        if action_of(command) in MUTATIONS:
            return await self._publish(command)
        return await self._request(command)

    async def _publish_items(self, batch: c.StoreMany) -> list[Dispatch]:
        normalized = []
        for index, item in enumerate(batch.items):
            try:
                normalized.append(self._normalized(item))
            except ValidationError as exc:
                raise ValidationError(f"items[{index}].{exc.field}", exc.message) from None
        if self.read_your_writes:  # each one's receipt, all awaited at once
            return list(await asyncio.gather(*(self._publish(item) for item in normalized)))
        messages = [self._message(item) for item in normalized]
        await self.bus.publish_many(messages)
        return [
            Dispatch(action_of(item), payload_of(item), message.message_id)
            for item, message in zip(normalized, messages, strict=True)
        ]

    def _normalized(self, command: c.StoreKnowledge) -> c.StoreKnowledge:
        """The command as the service will read it, validated here with the same rules."""
        request = prepare(self.caller, command)
        source = request.source
        return c.StoreKnowledge(
            content=request.content,
            agent_id=command.agent_id or self._credited,  # the service decides who may name one
            content_type=request.content_type.value,
            tags=request.tags,
            context=dict(request.context),
            source_provider=source.provider,
            source_channel=source.channel,
            knowledge_domain=request.knowledge_domain,
            access_scope=request.access_scope.value,
            submitted_by=source.submitted_by,
            submitted_from=source.submitted_from,
        )

    @parameters_of(KnowledgeClient.store_text)
    async def store_text(self, **arguments: Any) -> Dispatch:
        """The text and the fields its statements share checked here as the service will
        check them (nothing is published when one is bad), then one message: the service
        splits it and stores the episode, exactly once."""
        command = self._command(c.StoreText, arguments)
        turns, conversation = read_turns(command.text)
        self._normalized(statement_command(command, "-"))  # the service's own checks, here
        text = turns[0].text if not conversation else tuple(t.as_json() for t in turns)
        return await self._publish(evolve(command, text=text))

    @parameters_of(KnowledgeClient.get_episode)
    async def get_episode(self, **arguments: Any) -> EpisodeView:
        command = self._command(c.GetEpisode, arguments)
        return await self._request(
            evolve(command, episode_id=str(parse_id("episode_id", command.episode_id)))
        )

    @parameters_of(KnowledgeClient.link_entries)
    async def link_entries(self, **arguments: Any) -> Dispatch:
        command = self._command(c.LinkEntries, arguments)
        source = parse_id("from_entry_id", command.from_entry_id)
        target = parse_id("to_entry_id", command.to_entry_id)
        if source == target:
            raise ValidationError("to_entry_id", "an entry cannot be linked to itself")
        relation_type: object = command.relation_type
        types = parse_relation_types([relation_type]) if relation_type is not None else None
        if not types:
            raise ValidationError("relation_type", "is required")
        (kind,) = types
        weight: object = command.weight
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise ValidationError("weight", f"must be a number, got {weight!r}")
        if not math.isfinite(weight) or not 0.0 < weight <= 1.0:
            raise ValidationError("weight", f"must be within (0, 1], got {weight!r}")
        return await self._publish(
            evolve(
                command,
                from_entry_id=str(source),
                to_entry_id=str(target),
                relation_type=kind.value,
                weight=float(weight),
            )
        )

    @parameters_of(KnowledgeClient.deprecate_entry)
    async def deprecate_entry(self, **arguments: Any) -> Dispatch:
        command = self._command(c.DeprecateEntry, arguments)
        target = parse_id("entry_id", command.entry_id)
        reason: object = command.reason
        if not isinstance(reason, str) or not reason.strip():
            raise ValidationError("reason", "must be a non-empty string")
        return await self._publish(evolve(command, entry_id=str(target)))

    @parameters_of(KnowledgeClient.resolve_dispute)
    async def resolve_dispute(self, **arguments: Any) -> Dispatch:
        command = self._command(c.ResolveDispute, arguments)
        target = parse_id("entry_id", command.entry_id)
        decided = parse_resolution(command.resolution)
        return await self._publish(evolve(command, entry_id=str(target), resolution=decided.value))

    @parameters_of(KnowledgeClient.force_decay)
    async def force_decay(self, **arguments: Any) -> Dispatch:
        command = self._command(c.ForceDecay, arguments)
        return await self._publish(evolve(command, factor=validate_decay_factor(command.factor)))

    @parameters_of(KnowledgeClient.archive_stale)
    async def archive_stale(self, **arguments: Any) -> Dispatch:
        command = self._command(c.ArchiveStale, arguments)
        return await self._publish(evolve(command, days=validate_stale_days(command.days)))

    # -- reads: RPC -------------------------------------------------------------------------

    @parameters_of(KnowledgeClient.query_knowledge)
    async def query_knowledge(self, **arguments: Any) -> QueryResult:
        command = _search(self._command(c.QueryKnowledge, arguments))
        status: object = command.status
        statuses = None
        if status is not None:
            statuses = tuple(sorted(s.value for s in parse_statuses(status, DEFAULT_STATUSES)))
        return await self._request(evolve(command, status=statuses))

    @parameters_of(KnowledgeClient.retrieve)
    async def retrieve(self, **arguments: Any) -> QueryResult:
        """Like ``query_knowledge`` but without access counts or access-log rows."""
        return await self._request(_search(self._command(c.Retrieve, arguments)))

    @parameters_of(KnowledgeClient.related_entries)
    async def related_entries(self, **arguments: Any) -> list[RelatedEntry]:
        command = self._command(c.RelatedEntries, arguments)
        types = parse_relation_types(command.relation_types)
        return await self._request(
            evolve(
                command,
                entry_id=str(parse_id("entry_id", command.entry_id)),
                depth=validate_depth(command.depth),
                relation_types=None if types is None else tuple(sorted(t.value for t in types)),
            )
        )

    @parameters_of(KnowledgeClient.get_expertise)
    async def get_expertise(self, **arguments: Any) -> list[ExpertiseRecord]:
        command = self._command(c.GetExpertise, arguments)
        return await self._request(
            evolve(
                command,
                domain=_text("domain", command.domain),
                min_proficiency=unit_float("min_proficiency", command.min_proficiency),
            )
        )

    @parameters_of(KnowledgeClient.domains_at_risk)
    async def domains_at_risk(self, **arguments: Any) -> list[DomainCoverage]:
        command = self._command(c.DomainsAtRisk, arguments)
        threshold = bounded_int("min_agents", command.min_agents, 1, MAX_MIN_AGENTS)
        return await self._request(evolve(command, min_agents=threshold))

    @parameters_of(KnowledgeClient.agent_profile)
    async def agent_profile(self, **arguments: Any) -> AgentProfile:
        command = self._command(c.GetAgentProfile, arguments, agent_id=SUBJECT)
        agent: object = command.target_agent_id
        if not isinstance(agent, str) or not agent.strip():
            raise ValidationError("agent_id", "must be a non-empty string")
        return await self._request(evolve(command, target_agent_id=agent.strip()))

    # -- the entity graph: RPC ---------------------------------------------------------------

    @parameters_of(KnowledgeClient.entities)
    async def entities(self, **arguments: Any) -> list[EntitySummary]:
        command = self._command(c.ListEntities, arguments)
        return await self._request(
            evolve(
                command,
                query=parse_entity_query(command.query),
                prefix=parse_prefix(command.prefix),
                limit=bounded_int("limit", command.limit, 1, MAX_ENTITIES),
            )
        )

    @parameters_of(KnowledgeClient.entity)
    async def entity(self, **arguments: Any) -> EntityDetail:
        command = self._command(c.GetEntity, arguments)
        parse_name(command.name)
        return await self._request(command)

    @parameters_of(KnowledgeClient.entity_history)
    async def entity_history(self, **arguments: Any) -> EntityHistory:
        command = self._command(c.GetEntityHistory, arguments)
        parse_name(command.name)
        when = parse_instant("as_of", command.as_of)
        as_of = None if when is None else format_datetime(when)
        return await self._request(evolve(command, as_of=as_of))

    @parameters_of(KnowledgeClient.related_entities)
    async def related_entities(self, **arguments: Any) -> list[RelatedEntity]:
        command = self._command(c.RelatedEntities, arguments)
        parse_name(command.name)
        depth = bounded_int("depth", command.depth, 1, MAX_ENTITY_DEPTH)
        return await self._request(evolve(command, depth=depth))

    def _command(self, kind: type[C], arguments: Mapping[str, Any], **renamed: str) -> C:
        """The command of a runner method's arguments, crediting this client's agent."""
        return evolve(command_of(kind, arguments, **renamed), agent_id=self._credited)

    # -- transport ------------------------------------------------------------------------

    def _message(self, command: c.Command[Any]) -> Message:
        return Message(
            routing_key=self.topology.ingest_queue,
            body=encode_command(command),
            message_id=uuid4().hex,
            user_id=self.user_id,
        )

    async def _publish(self, command: c.Command[Any]) -> Dispatch:
        message = self._message(command)
        if not self.read_your_writes:
            await self.bus.publish(message)
            return Dispatch(action_of(command), payload_of(command), message.message_id)
        reply = await self._ask(
            message,
            f"no receipt for {action_of(command)!r} (message {message.message_id}) from the"
            f" Apollo service within {self.rpc_timeout:g}s: if it was published it stays"
            " queued and is applied once (is the service running?)",
        )
        receipt: Receipt = decode_reply(reply.body, Receipt)
        self.causal_token = latest(self.causal_token, parse_token(receipt.causal_token))
        return Dispatch(
            action_of(command), payload_of(command), message.message_id, receipt.causal_token
        )

    def _headers(self) -> dict[str, Any]:
        # a request nobody waits for any more is dropped unanswered by the service;
        # whole seconds, rounded up: AMQP tables carry a Python float as a 32-bit float,
        # which is ~128 s coarse at today's epoch (an int travels exactly)
        headers: dict[str, Any] = {DEADLINE_HEADER: math.ceil(time.time() + self.rpc_timeout)}
        if self.read_your_writes:  # "" when it wrote nothing yet: a read waits for nothing
            token = self.causal_token
            headers[CAUSAL_HEADER] = "" if token is None else format_token(token)
        return headers

    async def _request(self, command: c.Command[R]) -> R:
        action = action_of(command)
        queue = self.topology.query_queue
        message = Message(
            routing_key=queue,
            body=encode_command(command),
            message_id=uuid4().hex,
            headers=self._headers(),
            user_id=self.user_id,
        )
        reply = await self._ask(
            message,
            f"no reply to {action!r} from the Apollo service on queue {queue!r} "
            f"within {self.rpc_timeout:g}s (is the service running?)",
        )
        result: R = decode_reply(reply.body, result_type(type(command)))
        return result

    async def _ask(self, message: Message, unanswered: str) -> Message:
        """The service's answer to ``message`` (from a service login), or
        :class:`RpcTimeout` saying ``unanswered``."""
        try:
            return await self.bus.request(
                message, timeout=self.rpc_timeout, repliers=self.service_users
            )
        except RpcTimeout as exc:
            raise RpcTimeout(unanswered) from exc


def _search(command: S) -> S:
    """A search command with the fields every search takes checked as the service checks
    them (the mode and the statuses are the service's to refuse)."""
    return evolve(
        command,
        query=_text("query", command.query),
        min_confidence=unit_float("min_confidence", command.min_confidence),
        limit=bounded_int("limit", command.limit, 1, MAX_LIMIT),
        tags=_strings("tags", command.tags),
        knowledge_domain=_optional_text("knowledge_domain", command.knowledge_domain),
        min_similarity=_similarity(command.min_similarity),
        mode=_text("mode", command.mode),
        context_window=bounded_int("context_window", command.context_window, 0, MAX_CONTEXT_WINDOW),
    )


def _similarity(value: object) -> float:
    return bounded_float("min_similarity", value, -1.0, 1.0)


def _text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ValidationError(name, "must be a string")
    return value


def _optional_text(name: str, value: object) -> str | None:
    return None if value is None else _text(name, value)


def _strings(name: str, values: object) -> tuple[str, ...] | None:
    if values is None:
        return None
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise ValidationError(name, "must be a list of strings")
    return tuple(_text(name, value) for value in values)


@asynccontextmanager
async def open_client_mode(
    amqp_url: str,
    *,
    agent_id: str = "unknown",
    topology: Topology | None = None,
    rpc_timeout: float = 10.0,
    service_users: Collection[str] | None = None,
    declare_topology: bool = True,
    queue_type: str | None = None,
    read_your_writes: bool = False,
) -> AsyncIterator[RemoteClient]:
    """Connect to RabbitMQ at ``amqp_url`` (declaring ``topology``, the production names by
    default, with ``queue_type`` queues, default ``APOLLO_QUEUE_TYPE`` else quorum, unless
    ``declare_topology`` is false: a login with an agent's permissions may not), yield a
    :class:`RemoteClient` acting as the URL's login that takes replies from
    ``service_users`` (default: ``APOLLO_SERVICE_USERS``, else the URL's login), close on
    exit."""
    if service_users is None:
        service_users = service_users_from_env()
    if queue_type is None:
        queue_type = queue_type_setting(os.environ.get("APOLLO_QUEUE_TYPE") or "quorum")
    bus = await bootstrap.connect_broker(
        amqp_url, topology, declare_topology=declare_topology, queue_type=queue_type
    )
    try:
        yield RemoteClient(
            bus,
            agent_id=agent_id,
            rpc_timeout=rpc_timeout,
            service_users=service_users,
            read_your_writes=read_your_writes,
        )
    finally:
        await bus.close()


def service_users_from_env() -> frozenset[str] | None:
    """``APOLLO_SERVICE_USERS`` (comma-separated logins), None when unset."""
    value = os.environ.get("APOLLO_SERVICE_USERS")
    if value is None or not value.strip():
        return None
    found = parse_users("APOLLO_SERVICE_USERS", value)
    if found is None:
        raise ConfigurationError("APOLLO_SERVICE_USERS", "must list users, not '*'")
    return found


__all__ = ["RemoteClient", "open_client_mode"]
