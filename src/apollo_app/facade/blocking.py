"""A blocking twin of :class:`Apollo` for synchronous callers.

Apollo's I/O is async; this wrapper runs one event loop in a background thread and turns
each coroutine method into a plain call. It adds no behaviour of its own.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from apollo_domain.model import Principal

from .apollo import Apollo
from .client import Client

T = TypeVar("T")
P = ParamSpec("P")


class _LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="apollo-loop", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


def _blocking(runner: _LoopThread, target: Any, name: str) -> Any:
    attr = getattr(target, name)
    if not callable(attr) or not asyncio.iscoroutinefunction(attr):
        return attr

    @functools.wraps(attr)
    def call(*args: Any, **kwargs: Any) -> Any:
        return runner.run(attr(*args, **kwargs))

    return call


def _blocks(
    method: Callable[Concatenate[Client, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[BlockingClient, P], T]:
    """``method`` of :class:`Client` as a blocking method of :class:`BlockingClient`, with
    the same parameters (so the two cannot drift apart)."""

    @functools.wraps(method)
    def call(self: BlockingClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._runner.run(method(self._client, *args, **kwargs))

    return call


class BlockingClient:
    """:class:`Client` with every coroutine method made blocking."""

    def __init__(self, runner: _LoopThread, client: Client) -> None:
        self._runner = runner
        self._client = client

    @property
    def agent_id(self) -> str:
        return self._client.agent_id

    @property
    def principal(self) -> Principal:
        return self._client.principal

    run = _blocks(Client.run)
    store_knowledge = _blocks(Client.store_knowledge)
    store_many = _blocks(Client.store_many)
    store_text = _blocks(Client.store_text)
    get_episode = _blocks(Client.get_episode)
    query_knowledge = _blocks(Client.query_knowledge)
    retrieve = _blocks(Client.retrieve)
    related_entries = _blocks(Client.related_entries)
    link_entries = _blocks(Client.link_entries)
    deprecate_entry = _blocks(Client.deprecate_entry)
    resolve_dispute = _blocks(Client.resolve_dispute)
    force_decay = _blocks(Client.force_decay)
    archive_stale = _blocks(Client.archive_stale)
    get_expertise = _blocks(Client.get_expertise)
    domains_at_risk = _blocks(Client.domains_at_risk)
    agent_profile = _blocks(Client.agent_profile)
    entities = _blocks(Client.entities)
    entity = _blocks(Client.entity)
    entity_history = _blocks(Client.entity_history)
    related_entities = _blocks(Client.related_entities)


class BlockingApollo:
    """``with BlockingApollo.in_memory() as apollo: apollo.client("a").store_knowledge(...)``"""

    def __init__(self, factory: Callable[[], Awaitable[Apollo]]) -> None:
        self._runner = _LoopThread()
        try:
            self._apollo: Apollo = self._runner.run(_awaited(factory))
        except BaseException:
            self._runner.stop()
            raise

    @classmethod
    def in_memory(cls, **overrides: Any) -> BlockingApollo:
        async def make() -> Apollo:
            return Apollo.in_memory(**overrides)

        return cls(make)

    @classmethod
    def open(cls, settings: Any = None, **overrides: Any) -> BlockingApollo:
        async def make() -> Apollo:
            return await Apollo.open(settings, **overrides)

        return cls(make)

    @property
    def apollo(self) -> Apollo:
        return self._apollo

    def client(
        self, agent_id: str = "unknown", principal: Principal | str | None = None
    ) -> BlockingClient:
        return BlockingClient(self._runner, self._apollo.client(agent_id, principal))

    def __getattr__(self, name: str) -> Any:
        return _blocking(self._runner, self._apollo, name)

    def close(self) -> None:
        try:
            self._runner.run(self._apollo.close())
        finally:
            self._runner.stop()

    def __enter__(self) -> BlockingApollo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _awaited(factory: Callable[[], Awaitable[Apollo]]) -> Apollo:
    return await factory()
