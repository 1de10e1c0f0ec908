"""One record per action: what every edge needs to know about a command, declared once.

Each command class of :mod:`apollo_domain.commands` is declared with :func:`action` right
above it::

    @action("related_entries", Access.READ, bus=Bus.QUERY, http=("POST", "/traverse"),
            aliases=("traverse",), tool=True, read_only=False)
    @frozen(kw_only=True)
    class RelatedEntries(Command[list[RelatedEntry]]): ...

The record (:class:`Action`) says, for that command:

- ``name``: the action's one name, everywhere: the client method, the bus action, the HTTP
  operation id and the MCP tool are all called this;
- ``access``: who may run it (:class:`Access`: every role, roles that write, admins);
- ``mutates``: whether it changes the store's knowledge. A mutation is carried out at most
  once per idempotency key (a bus message id) and travels on the ingest queue; a read is
  answered, never queued;
- ``bus``: which queue carries it (:class:`Bus`), None when it never travels on the bus;
- ``http``: its route, ``(method, path)`` below ``/api/apollo``, None without one;
- ``tool``: whether it is offered as an MCP tool (named ``name``);
- ``aliases``: the names it had before, still accepted from callers (bus messages);
- ``read_only``, ``destructive``, ``idempotent``: honest hints in the MCP sense. A read may
  still leave a trace (a query boosts what it returns and writes access-log rows), so it is
  not ``read_only``; ``destructive`` means it may archive, delete, lower or overwrite what
  is there, not only add to it; ``idempotent`` means calling it again with the same
  arguments has no further effect;
- ``summary``: the first paragraph of the command's docstring.

Everything an edge derives about an action comes from here: the bus envelope's action
names and queues (:mod:`apollo_app.wire.envelope`), the authorization table
(:func:`apollo_domain.handlers.authorize`), the HTTP routes and operation ids, the MCP tools.
:data:`ACTIONS` holds every command's record: importing :mod:`apollo_domain` (which any
import of this module does first) imports :mod:`apollo_domain.commands`.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, TypeVar

from attrs import frozen

from .errors import ValidationError

K = TypeVar("K", bound=type)


class Access(enum.Enum):
    """Who may run a command: every role (``READ``), roles that write (``WRITE``: writer,
    gateway, admin), or only ``ADMIN``."""

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


class Bus(enum.Enum):
    """The queue an action travels on. ``INGEST``: a mutation, published and confirmed,
    carried out once per message id and acknowledged after it committed. ``QUERY``: a read
    sent as an RPC request and answered with its result or error. ``WRITEBACK_STORE`` and
    ``WRITEBACK_VECTORIZE``: LLM responses to keep, with or without their embedding.
    ``GAS``: the raw ``llm.audit.complete`` event of the audit exchange (not an envelope)."""

    INGEST = "ingest"
    QUERY = "query"
    WRITEBACK_STORE = "writeback_store"
    WRITEBACK_VECTORIZE = "writeback_vectorize"
    GAS = "gas"

    @property
    def enveloped(self) -> bool:
        """Whether its messages are command envelopes (``{"v", "action", "payload"}``)."""
        return self is not Bus.GAS


@frozen
class Action:
    """The record of one action (see the module's documentation)."""

    name: str
    command: type[Any]
    access: Access
    mutates: bool
    bus: Bus | None
    http: tuple[str, str] | None
    tool: bool
    aliases: tuple[str, ...]
    read_only: bool
    destructive: bool
    idempotent: bool
    summary: str

    @property
    def names(self) -> tuple[str, ...]:
        """Its name, then its aliases: every name callers may use for it."""
        return (self.name, *self.aliases)


_DECLARED: dict[type[Any], Action] = {}
_NAMED: dict[str, type[Any]] = {}

#: Every command type and its record, in the order the commands are declared.
ACTIONS: Final[Mapping[type[Any], Action]] = MappingProxyType(_DECLARED)


def action(
    name: str,
    access: Access,
    *,
    mutates: bool | None = None,
    bus: Bus | None = None,
    http: tuple[str, str] | None = None,
    tool: bool = False,
    aliases: tuple[str, ...] = (),
    read_only: bool | None = None,
    destructive: bool = False,
    idempotent: bool | None = None,
) -> Callable[[K], K]:
    """Declare the record of the command class it decorates (placed above ``@frozen``).

    By default an action mutates unless everyone may run it, is ``read_only`` when it does
    not mutate, and ``idempotent`` when it is ``read_only``. A name or alias already taken,
    a mutation said to be read-only, or a bus queue that does not fit (a mutation answered
    over RPC, a read on the ingest queue) raises :class:`TypeError` at import."""

    def declare(kind: K) -> K:
        changes = access is not Access.READ if mutates is None else mutates
        untouched = not changes if read_only is None else read_only
        record = Action(
            name=name,
            command=kind,
            access=access,
            mutates=changes,
            bus=bus,
            http=http,
            tool=tool,
            aliases=aliases,
            read_only=untouched,
            destructive=destructive,
            idempotent=untouched if idempotent is None else idempotent,
            summary=_summary(kind),
        )
        _check(record)
        _DECLARED[kind] = record
        _NAMED.update(dict.fromkeys(record.names, kind))
        return kind

    return declare


def _check(record: Action) -> None:
    taken = [n for n in record.names if n in _NAMED]
    if record.command in _DECLARED or taken:
        raise TypeError(f"{record.command.__name__}: action name {taken or record.name} taken")
    if record.mutates and record.read_only:
        raise TypeError(f"{record.name}: a mutation is not read-only")
    if record.bus is Bus.QUERY and record.mutates:
        raise TypeError(f"{record.name}: the query queue answers reads only")
    if record.bus is Bus.INGEST and not record.mutates:
        raise TypeError(f"{record.name}: the ingest queue carries mutations only")


def _summary(kind: type[Any]) -> str:
    text = inspect.getdoc(kind) or ""
    return " ".join(text.split("\n\n", 1)[0].split())


def action_of(command: object) -> Action:
    """The record of a command or command type; :class:`ValidationError` naming
    ``command`` for anything that is not an Apollo command."""
    kind = command if isinstance(command, type) else type(command)
    found = _DECLARED.get(kind)
    if found is None:
        raise ValidationError("command", f"{kind.__name__} is not an Apollo command")
    return found


def command_named(name: object) -> type[Any]:
    """The command type an action name or alias names; :class:`ValidationError` naming
    ``action`` for any other."""
    kind = _NAMED.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ValidationError("action", f"unknown action {name!r}")
    return kind


__all__ = ["ACTIONS", "Access", "Action", "Bus", "action", "action_of", "command_named"]
