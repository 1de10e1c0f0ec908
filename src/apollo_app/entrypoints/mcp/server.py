"""The MCP server of Apollo: tools and resources over the command layer.

One thin edge, like HTTP: each tool call is decoded into its command and handed to the
handler table; who may run it, as which agent, and what it may see are decided there
(:func:`apollo_domain.handlers.authorize` and the use cases), never here. ``tools/list``
shows a caller the tools its role may run, as the handler table says. Every domain error
comes back as a tool error (``isError``, with the error's type, message and field), never
as a protocol failure or a traceback.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any
from urllib.parse import quote, unquote

import attrs
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from apollo_domain import commands as c
from apollo_domain.actions import action_of
from apollo_domain.bounds import STORE_MANY
from apollo_domain.causal import causal_scope
from apollo_domain.errors import ApolloError, NotFound, RateLimited, ValidationError
from apollo_domain.handlers import authorize, refusal
from apollo_domain.services import Caller, prepare
from apollo_domain.services.bulk_ingest import BATCH_SIZE
from apollo_domain.services.write_rate import prepaid
from apollo_domain.validation import checked_key

from ... import __version__
from ...error_policy import INTERNAL, field_of, message_of, rule_for
from ...metrics import Metrics
from ...wire.codec import decode_json, encode_json, make_converter
from ...wire.envelope import structure
from .render import text_of
from .tools import HIDDEN_RESULT_FIELDS, VIEWS, Tool

logger = logging.getLogger("apollo.mcp")

#: What carries out a command for a caller: the handler table in this process, or the bus;
#: the third argument is the call's idempotency key (:data:`IDEMPOTENCY_KEY_META`), None
#: for none or a read.
Run = Callable[[Caller, c.Command[Any], str | None], Awaitable[Any]]
#: Who is calling: from the transport (an HTTP request's bearer token, the local identity
#: of a stdio server), never from a tool's arguments.
Identify = Callable[[ServerRequestContext[Any, Any]], Caller]

#: The key of the causal token (:mod:`apollo_domain.causal`) in ``_meta``: a tool result
#: carries it when the call wrote (or was presented one); a tool call or resource read
#: presenting it sees the caller's writes, whichever copy of the store serves it.
CAUSAL_TOKEN_META = "apollo/causal_token"
#: The key of a tool call's idempotency key in ``_meta``: a mutating call sent again with
#: the same key by the same principal changes nothing the second time and answers what
#: the first did (as the HTTP API's ``Idempotency-Key`` header; the bus's is the message
#: id, which a client-mode server makes per call).
IDEMPOTENCY_KEY_META = "apollo/idempotency_key"
#: The JSON-RPC error of a tool call refused for its principal's write rate (in the
#: server-defined range); its ``data`` holds the error's ``type`` (``rate_limited``), its
#: ``message`` and ``retry_after`` (seconds). Over HTTP the answer is also status 429 with
#: ``Retry-After``.
RATE_LIMITED_CODE = -32029
#: Where a refused call leaves its wait for the HTTP transport (:class:`McpHttp`), in the
#: request's scope.
RETRY_AFTER_SCOPE = "apollo.retry_after"
#: What charges a write to its caller's rate before an edge sends it in parts (None: the
#: use cases charge each part, or nothing does).
Charge = Callable[[Caller, int], Awaitable[None]]
ENTRY_TEMPLATE = "apollo://entries/{id}"
ENTITY_TEMPLATE = "apollo://entities/{name}"
_ENTRY_PREFIX = "apollo://entries/"
_ENTITY_PREFIX = "apollo://entities/"
INSTRUCTIONS = (
    "Apollo is the shared knowledge store of an agent mesh. Store what you learn with "
    "store_knowledge; look things up with query_knowledge before you ask or redo work. "
    "Knowledge starts as a candidate and becomes confirmed when independent agents state "
    "it too; prefer confirmed entries and higher confidence. Read an entry with its "
    f"evidence and relations as the resource {ENTRY_TEMPLATE}."
)


def presented_token(meta: Mapping[str, Any] | None) -> object:
    """The causal token a request's ``_meta`` presents (:data:`CAUSAL_TOKEN_META`); what
    is not a token reads as none (:func:`~apollo_domain.causal.causal_scope`)."""
    return None if not isinstance(meta, Mapping) else meta.get(CAUSAL_TOKEN_META)


def presented_key(meta: Mapping[str, Any] | None, command: c.Command[Any]) -> str | None:
    """The idempotency key a tool call's ``_meta`` presents for a mutation (None: none, or
    a read); :class:`ValidationError` naming it when it is not a key."""
    if not isinstance(meta, Mapping) or IDEMPOTENCY_KEY_META not in meta:
        return None
    if not action_of(command).mutates:  # a read changes nothing: its key is ignored
        return None
    return checked_key(IDEMPOTENCY_KEY_META, meta[IDEMPOTENCY_KEY_META])


def may_list(caller: Caller, tool: Tool) -> bool:
    """Whether ``tools/list`` shows ``tool`` to ``caller``: the command layer's answer for
    the caller's role (:func:`~apollo_domain.handlers.refusal`)."""
    return refusal(caller, tool.command) is None


class ApolloMcp:
    """The tools and resources of Apollo for one way of running commands (``run``) and of
    knowing the caller (``identify``); :meth:`server` is the SDK's server over them."""

    def __init__(
        self,
        tools: Sequence[Tool],
        run: Run,
        identify: Identify,
        *,
        admission: Callable[[], AbstractAsyncContextManager[None]] | None = None,
        metrics: Metrics | None = None,
        resources: bool = True,
        charge: Charge | None = None,
    ) -> None:
        self.tools = {tool.name: tool for tool in tools}
        if len(self.tools) != len(tools):
            raise ValueError("two tools share a name")
        self.run = run
        self.identify = identify
        self.admission = admission or nullcontext
        self.metrics = metrics
        self.resources = resources
        self.charge = charge
        self._converter = make_converter(forbid_extra_keys=True, round_scores=False)
        self._shown = make_converter(forbid_extra_keys=False, round_scores=True)
        self._listing = [_listed(tool) for tool in tools]

    def server(self) -> Server[Any]:
        """A low-level SDK server whose handlers are this object's. (The SDK's
        ``MCPServer`` builds tools from Python signatures; Apollo's come from its commands,
        so it uses the server ``MCPServer`` itself is built on.)"""
        resources: dict[str, Any] = {}
        if self.resources:
            resources = {
                "on_list_resources": self._list_resources,
                "on_list_resource_templates": self._list_templates,
                "on_read_resource": self._read_resource,
            }
        return Server(
            "apollo",
            version=__version__,
            title="Apollo",
            description="Shared knowledge store for AI agent meshes",
            instructions=INSTRUCTIONS,
            get_tool_input_schema=self._input_schema,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            **resources,
        )

    # -- tools -----------------------------------------------------------------------

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        tool = self.tools.get(name)
        return None if tool is None else tool.input_schema

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        caller = self.identify(ctx)
        shown = [
            listed
            for listed, tool in zip(self._listing, self.tools.values(), strict=True)
            if may_list(caller, tool)
        ]
        return types.ListToolsResult(tools=shown)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = self.tools.get(params.name)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}")
        try:
            caller = self.identify(ctx)
            command = self.command_of(tool, params.arguments or {})
            key = presented_key(params.meta, command)
            started = time.perf_counter()
            with causal_scope(presented_token(params.meta)) as scope:
                async with self.admission():
                    result = await self._carry_out(ctx, caller, command, key)
            if self.metrics is not None:
                self.metrics.observe_command(command, result, time.perf_counter() - started)
            answer = self.success(tool, result)
            if scope.token is not None:
                answer.meta = {CAUSAL_TOKEN_META: scope.token}
            return answer
        except RateLimited as exc:
            raise rate_limited(ctx, exc) from None
        except ApolloError as exc:
            return failure(exc)
        except Exception as exc:
            logger.exception("unexpected error in tool %s", tool.name)
            return failure(exc)

    def command_of(self, tool: Tool, arguments: Mapping[str, Any]) -> c.Command[Any]:
        """The tool's command from its arguments: held to the bounds of every JSON edge
        (nesting, text no store can hold), strictly typed, unknown names refused."""
        if not isinstance(arguments, Mapping):
            raise ValidationError("arguments", "must be a JSON object")
        try:
            raw = json.dumps(dict(arguments), allow_nan=True)
        except (TypeError, ValueError) as exc:
            raise ValidationError("arguments", f"cannot be read as JSON: {exc}") from None
        data = decode_json(raw, name="arguments")
        accepted = set(tool.input_schema["properties"])
        unknown = sorted(set(data) - accepted)
        if unknown:
            raise ValidationError(unknown[0], "unknown argument")
        command: c.Command[Any] = structure(self._converter, data, tool.command)
        return command

    async def _carry_out(
        self,
        ctx: ServerRequestContext[Any, Any],
        caller: Caller,
        command: c.Command[Any],
        key: str | None,
    ) -> Any:
        if isinstance(command, c.StoreMany):
            return await self._store_many(ctx, caller, command, key)
        return await self.run(caller, command, key)

    async def _store_many(
        self,
        ctx: ServerRequestContext[Any, Any],
        caller: Caller,
        command: c.StoreMany,
        key: str | None,
    ) -> list[Any]:
        """A bulk store in the chunks the use case stores it in anyway (each its own
        transaction), with a progress notification after each. Every item is checked
        before the first chunk is sent, as one command would check them."""
        STORE_MANY.check(len(command.items))
        authorize(caller, command)
        acting = caller.acting_as(command.agent_id)
        for index, item in enumerate(command.items):
            try:
                prepare(acting, item)
            except ValidationError as exc:
                raise ValidationError(f"items[{index}].{exc.field}", exc.message) from None
        total = len(command.items)
        results: list[Any] = []
        if self.charge is not None:  # the whole call at once: no chunk is refused midway
            await self.charge(caller, total)
        with prepaid() if self.charge is not None else nullcontext():
            for start in range(0, total, BATCH_SIZE):
                chunk = attrs.evolve(command, items=command.items[start : start + BATCH_SIZE])
                chunk_key = None if key is None else f"{key}@{start}"  # each chunk its own
                results.extend(await self.run(caller, chunk, chunk_key))
                done = min(total, start + BATCH_SIZE)
                await ctx.session.report_progress(done, total, f"stored {done} of {total}")
        return results

    def success(self, tool: Tool, result: Any) -> types.CallToolResult:
        structured = self.structured(tool, result)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text_of(result))],
            structured_content=structured,
        )

    def structured(self, tool: Tool, result: Any) -> dict[str, Any]:
        """A result as the tool's output schema says: a list under its key, a value as
        its fields (an entry without its embedding; evidence as the HTTP API shows it)."""
        if tool.list_key is not None:
            items = list(result)
            if items and type(items[0]) in VIEWS:
                items = VIEWS[type(items[0])].list_of(items)  # type: ignore[attr-defined]
            return {tool.list_key: self._shown.unstructure(items)}
        data: dict[str, Any] = self._shown.unstructure(result)
        for name in HIDDEN_RESULT_FIELDS:
            data.pop(name, None)
        return data

    # -- resources -------------------------------------------------------------------

    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[])  # read by reference: see the templates

    async def _list_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    name="entry",
                    title="Knowledge entry",
                    uri_template=ENTRY_TEMPLATE,
                    description="An entry the caller may see, with its evidence (which "
                    "sources support it, independent or not) and its relations both ways.",
                    mime_type="application/json",
                ),
                types.ResourceTemplate(
                    name="entity",
                    title="Entity",
                    uri_template=ENTITY_TEMPLATE,
                    description="An entity of the knowledge graph the caller may see, with "
                    "its live edges and the newest entries that mention it (name URL-encoded).",
                    mime_type="application/json",
                ),
            ]
        )

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            caller = self.identify(ctx)
            with causal_scope(presented_token(params.meta)):
                async with self.admission():
                    document = await self._resource(caller, uri)
        except NotFound as exc:
            raise MCPError(types.INVALID_PARAMS, message_of(exc), {"uri": uri}) from None
        except ApolloError as exc:
            rule = rule_for(exc)
            code = types.INVALID_PARAMS if rule.http_status < 500 else types.INTERNAL_ERROR
            data = {"type": rule.name, "field": field_of(exc), "uri": uri}
            raise MCPError(code, message_of(exc), data) from None
        except Exception:
            logger.exception("unexpected error reading %s", uri)
            raise MCPError(types.INTERNAL_ERROR, "internal error") from None
        text = encode_json(document).decode("utf-8")
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=text)]
        )

    async def _resource(self, caller: Caller, uri: str) -> dict[str, Any]:
        if uri.startswith(_ENTRY_PREFIX):
            entry_id = uri.removeprefix(_ENTRY_PREFIX)
            entry = await self.run(caller, c.GetEntry(entry_id=entry_id), None)
            evidence = await self.run(caller, c.GetEvidence(entry_id=entry_id), None)
            relations = await self.run(caller, c.GetRelations(entry_id=entry_id), None)
            shown: dict[str, Any] = self._shown.unstructure(entry)
            for name in HIDDEN_RESULT_FIELDS:
                shown.pop(name, None)
            return {
                "entry": shown,
                "evidence": self._shown.unstructure(VIEWS[type(evidence[0])].list_of(evidence))  # type: ignore[attr-defined]
                if evidence
                else [],
                "relations": self._shown.unstructure(relations),
            }
        if uri.startswith(_ENTITY_PREFIX):
            name = unquote(uri.removeprefix(_ENTITY_PREFIX))
            entity = await self.run(caller, c.GetEntity(name=name), None)
            data: dict[str, Any] = self._shown.unstructure(entity)
            return data
        raise NotFound(f"no resource {uri!r}: Apollo serves {ENTRY_TEMPLATE} and {ENTITY_TEMPLATE}")


def entry_uri(entry_id: object) -> str:
    return f"{_ENTRY_PREFIX}{entry_id}"


def entity_uri(name: str) -> str:
    return f"{_ENTITY_PREFIX}{quote(name, safe='')}"


def _listed(tool: Tool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        title=tool.name.replace("_", " ").capitalize(),
        description=tool.description,
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        annotations=types.ToolAnnotations(
            title=tool.name.replace("_", " ").capitalize(),
            read_only_hint=tool.read_only,
            destructive_hint=tool.destructive,
            idempotent_hint=tool.idempotent,
            open_world_hint=False,
        ),
    )


def rate_limited(ctx: ServerRequestContext[Any, Any], exc: RateLimited) -> MCPError:
    """A write over its principal's rate as a JSON-RPC error (:data:`RATE_LIMITED_CODE`),
    the wait left in the HTTP request's scope for a 429 with ``Retry-After``."""
    request = ctx.request
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict):
        scope[RETRY_AFTER_SCOPE] = exc.retry_after
    rule = rule_for(exc)
    data = {"type": rule.name, "message": message_of(exc), "retry_after": exc.retry_after}
    return MCPError(RATE_LIMITED_CODE, f"{rule.name}: {message_of(exc)}", data)


def failure(exc: BaseException) -> types.CallToolResult:
    """An error as a tool error: its type, message and field (a server fault without its
    text), as the HTTP API's error body says them."""
    rule = rule_for(exc)
    if rule is not INTERNAL and rule.http_status >= 500:
        logger.warning("%s: %s", rule.name, exc)
    field = field_of(exc)
    message = message_of(exc)
    body = {"error": {"type": rule.name, "message": message, "field": field}}
    where = f" ({field})" if field else ""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{rule.name}{where}: {message}")],
        structured_content=body,
        is_error=True,
    )


__all__ = [
    "CAUSAL_TOKEN_META",
    "ENTITY_TEMPLATE",
    "ENTRY_TEMPLATE",
    "IDEMPOTENCY_KEY_META",
    "RATE_LIMITED_CODE",
    "RETRY_AFTER_SCOPE",
    "ApolloMcp",
    "Identify",
    "Run",
    "entity_uri",
    "entry_uri",
    "failure",
    "may_list",
    "presented_token",
]
