"""The shape of the code: no import cycles, one composition root, clients in step."""

from __future__ import annotations

import inspect

import grimp

from apollo_app import BlockingClient, Client, KnowledgeClient, RemoteClient


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


def test_every_client_offers_the_protocol_with_the_same_parameters():
    """Client, RemoteClient and BlockingClient take the same parameters for every method of
    KnowledgeClient (mypy checks the return types)."""
    protocol = _public_methods(KnowledgeClient)
    for kind in (Client, RemoteClient, BlockingClient):
        methods = _public_methods(kind)
        for name, signature in protocol.items():
            assert name in methods, f"{kind.__name__} lacks {name}"
            assert list(signature.parameters) == list(methods[name].parameters), (
                f"{kind.__name__}.{name}"
            )
