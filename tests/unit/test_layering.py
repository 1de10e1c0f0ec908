"""The shape of the code: no import cycles, one composition root, clients in step."""

from __future__ import annotations

import inspect

import attrs
import grimp

from apollo_app import BlockingClient, Client, KnowledgeClient, RemoteClient
from apollo_domain.actions import command_named


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected groups of modules (Tarjan) with more than one member."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in graph.find_modules_directly_imported_by(module):
            if target not in graph.modules:
                continue
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_through_others():
    """Apollo's import graph has no cycle: each module can be read after the ones it uses."""
    graph = grimp.build_graph("apollo_domain", "apollo_adapters", "apollo_app")
    assert [] == _cycles(graph)


def test_only_the_composition_root_imports_adapters():
    graph = grimp.build_graph("apollo_app", "apollo_adapters")
    importers = {
        module
        for module in graph.modules
        if module.startswith("apollo_app")
        and any(
            imported.startswith("apollo_adapters")
            for imported in graph.find_modules_directly_imported_by(module)
        )
    }
    assert {"apollo_app.bootstrap"} == importers


def _public_methods(kind: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(kind, callable)
        if not name.startswith("_")
    }


def _parameters(signature: inspect.Signature) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


def test_every_client_offers_the_protocol_with_the_same_parameters():
    """Client, RemoteClient and BlockingClient take the same parameters, in the same order
    and with the same defaults, for every method of KnowledgeClient (mypy checks the types)."""
    protocol = _public_methods(KnowledgeClient)
    for kind in (Client, RemoteClient, BlockingClient):
        methods = _public_methods(kind)
        for name, signature in protocol.items():
            assert name in methods, f"{kind.__name__} lacks {name}"
            assert _parameters(signature) == _parameters(methods[name]), f"{kind.__name__}.{name}"


#: Runner method parameters named otherwise than the command field they fill.
RENAMED = {"agent_profile": {"agent_id": "target_agent_id"}}


def test_every_runner_method_takes_its_commands_fields_and_defaults():
    """A runner method's parameters are the fields of its action's command (all but the
    credited ``agent_id``, which the client sets), each with the command's default: a
    default written in both places that drifts in one fails here."""
    for name, signature in _public_methods(KnowledgeClient).items():
        kind = command_named(name)
        renamed = RENAMED.get(name, {})
        given = {
            renamed.get(p.name, p.name): p.default
            for p in signature.parameters.values()
            if p.name != "self"
        }
        expected = {
            a.name: inspect.Parameter.empty if a.default is attrs.NOTHING else a.default
            for a in attrs.fields(kind)
            if a.name != "agent_id"
        }
        assert expected == given, name
