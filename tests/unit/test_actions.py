"""The action records: one per command, one name per action, and every edge derived from
them (authorization, the bus, the HTTP routes, the client methods)."""

from __future__ import annotations

import inspect
import subprocess
import sys

import attrs
import pytest

from apollo_app import KnowledgeClient
from apollo_app.entrypoints.http.operations import OPERATIONS
from apollo_domain import commands as c
from apollo_domain.actions import ACTIONS, Access, Action, Bus, action_of, command_named
from apollo_domain.errors import Forbidden, ValidationError
from apollo_domain.handlers import COMMAND_HANDLERS, authorize
from apollo_domain.model import Principal, Role
from apollo_domain.services import Caller

RECORDS = list(ACTIONS.values())


def command_classes() -> set[type]:
    """Every public command class :mod:`apollo_domain.commands` defines."""
    return {
        value
        for name, value in vars(c).items()
        if isinstance(value, type)
        and issubclass(value, c.Command)
        and value is not c.Command
        and not name.startswith("_")
    }


def test_every_command_has_one_record_and_one_use_case():
    assert command_classes() == set(ACTIONS) == set(COMMAND_HANDLERS)
    assert all(record.command is kind for kind, record in ACTIONS.items())


def test_the_table_is_complete_whatever_is_imported_first():
    """Importing the records alone (a fresh interpreter) gives every command's record."""
    probe = "from apollo_domain.actions import ACTIONS; print(len(ACTIONS))"
    printed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert len(ACTIONS) == int(printed)


def test_an_action_has_one_name_and_its_old_names_lead_to_it():
    names = [name for record in RECORDS for name in record.names]
    assert len(set(names)) == len(names)
    for record in RECORDS:
        assert all(command_named(name) is record.command for name in record.names)
        assert record is action_of(record.command)
    with pytest.raises(ValidationError) as caught:
        command_named("explode")
    assert "action" == caught.value.field
    with pytest.raises(ValidationError) as not_a_command:
        action_of(Principal("p"))
    assert "command" == not_a_command.value.field


def test_every_client_method_is_an_action_of_the_same_name():
    """The runner methods are named after their actions (one name across the edges)."""
    methods = {
        name
        for name, member in inspect.getmembers(KnowledgeClient, callable)
        if not name.startswith("_")
    }
    assert methods <= {record.name for record in RECORDS}


def test_the_hints_are_consistent():
    """A mutation is never read-only; a read that writes nothing is idempotent; a read
    travels only as an RPC request and a mutation only as a queued message."""
    for record in RECORDS:
        assert not (record.mutates and record.read_only), record.name
        assert record.mutates == (record.access is not Access.READ), record.name
        if record.read_only:
            assert record.idempotent and not record.destructive, record.name
        if record.bus is Bus.QUERY:
            assert not record.mutates, record.name
        if record.bus is Bus.INGEST:
            assert record.mutates, record.name


def test_each_summary_is_the_first_paragraph_of_its_docstring():
    record = action_of(c.QueryKnowledge)
    assert "Search the visible entries (newest-first browse under three characters)." == (
        record.summary
    )
    assert all(record.summary for record in RECORDS)


ROLES = [Role.READER, Role.WRITER, Role.GATEWAY, Role.ADMIN]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_authorization_is_the_records_access(record: Action):
    """Who may run a command is its record's access level, for every role."""
    command = _any_command(record.command)
    for role in ROLES:
        caller = Caller.of("claude-a", Principal("p", role=role))
        allowed = {
            Access.READ: True,
            Access.WRITE: role.writes,
            Access.ADMIN: role.administers,
        }[record.access]
        if allowed:
            authorize(caller, command)
        else:
            with pytest.raises(Forbidden):
                authorize(caller, command)


def _any_command(kind: type) -> c.Command:
    """An instance of ``kind`` with placeholder values for its required fields (what
    authorization looks at is the type and the agent ids)."""
    values = {
        a.name: "x"
        for a in attrs.fields(kind)
        if a.default is attrs.NOTHING and a.name not in ("items", "event", "embedding")
    }
    if kind is c.StoreMany:
        values["items"] = ()
    if kind is c.ProcessGasEvent:
        values["event"] = {}
    if kind is c.WritebackStore:
        values["embedding"] = (0.0,)
    command: c.Command = kind(**values)
    return command


def test_every_route_is_its_actions_record():
    """The HTTP routes are the records': each action with a route has one operation, named
    like the action, on its method and path; the decay route also runs the decay cycle
    (without a factor), whose record names the same route."""
    served = {op.command: op for op in OPERATIONS if op.command is not None}
    for record in RECORDS:
        op = served.get(record.command)
        if op is None:
            shared = [o for o in served.values() if (o.method, o.path) == record.http]
            assert record.http is None or (shared and shared[0].choose is not None), record.name
            continue
        assert (op.method, op.path) == record.http
        assert record.name == op.operation_id
    ids = [op.operation_id for op in OPERATIONS]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("kind", list(COMMAND_HANDLERS), ids=lambda kind: kind.__name__)
def test_every_use_case_takes_its_command(kind: type):
    """The handler table maps a command straight to its use case: ``(deps, caller,
    command)``, and a mutation's idempotency key after them."""
    parameters = inspect.signature(COMMAND_HANDLERS[kind]).parameters
    expected = ["deps", "caller", "command"]
    if ACTIONS[kind].mutates:
        expected.append("idempotency_key")
    positional = [
        name for name, p in parameters.items() if p.kind is not inspect.Parameter.KEYWORD_ONLY
    ]
    assert expected == positional
    assert kind.__name__ in str(parameters["command"].annotation)
