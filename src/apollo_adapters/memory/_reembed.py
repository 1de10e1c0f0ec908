"""Moving an in-memory store to another embedder: the new vectors wait beside the old
ones until the switch, which takes the store's lock (writes wait), embeds what was stored
meanwhile and puts the new matrix in place of the old one in one step."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol
from uuid import UUID

import numpy as np

from apollo_domain.errors import Conflict

from ._entries import EntryTable


class InMemoryStore(Protocol):
    """What a move needs of the store: its rows, its writers' lock, its one-move flag."""

    _entries: EntryTable
    _reembedding: bool

    def unit_of_work(self) -> AbstractAsyncContextManager[Any]: ...


Embed = Callable[[Sequence[str]], Awaitable[list[Sequence[float]]]]


class InMemoryReembedding:
    """One move of ``store`` to ``model_id``/``dimension`` (see the PostgreSQL one)."""

    def __init__(self, store: InMemoryStore, model_id: str, dimension: int) -> None:
        self._store = store
        self.model_id = model_id
        self.dimension = dimension
        #: the model the store held (an in-memory store does not record it: its owner does)
        self.stored_model = ""
        self.resumed = False
        self._next: dict[UUID, np.ndarray] = {}

    async def __aenter__(self) -> InMemoryReembedding:
        if self._store._reembedding:
            raise Conflict("another reembed of this store is running")
        self._store._reembedding = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._store._reembedding = False

    def _moving(self) -> list[tuple[UUID, str]]:
        table = self._store._entries
        rows = np.flatnonzero(table.alive[: table.n] & table.has_emb[: table.n])
        moving = []
        for row in rows:
            base = table.base[int(row)]
            assert base is not None
            moving.append((base.id, base.content))
        return sorted(moving, key=lambda pair: pair[0])

    async def start(self) -> tuple[int, int]:
        return 0, len(self._moving())

    async def pending(self, after: UUID | None, limit: int) -> list[tuple[UUID, str]]:
        after = after or UUID(int=0)
        todo = [(i, c) for i, c in self._moving() if i > after and i not in self._next]
        return todo[:limit]

    async def put(self, vectors: Sequence[tuple[UUID, Sequence[float]]]) -> None:
        for entry_id, vector in vectors:
            self._next[entry_id] = self._normalised(vector)

    def _normalised(self, vector: Sequence[float]) -> np.ndarray:
        array = np.asarray(vector, dtype=np.float64)
        if array.shape != (self.dimension,):
            raise Conflict(f"the new embedder gave {array.size} dimensions, not {self.dimension}")
        norm = float(np.sqrt(array @ array))
        return (array / norm if norm > 0.0 else array).astype(np.float32)

    async def index(self) -> None:
        """Exact search: nothing to build."""

    async def switch(self, embed: Embed) -> int:
        async with self._store.unit_of_work():  # every writer waits for the switch
            late = [(i, c) for i, c in self._moving() if i not in self._next]
            if late:
                vectors = await embed([content for _, content in late])
                await self.put([(i, v) for (i, _), v in zip(late, vectors, strict=True)])
            table = self._store._entries
            matrix = np.zeros((table.capacity, self.dimension), np.float32)
            for entry_id, vector in self._next.items():
                row = table.row_of.get(entry_id)
                if row is not None and table.has_emb[row]:
                    matrix[row] = vector
            table.matrix = matrix
            table.dimension = self.dimension
        return len(late)
