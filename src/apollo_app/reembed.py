"""Moving a store to another embedder in place (``apollo reembed``, :meth:`Apollo.reembed`).

The store gives a move (:class:`Reembedding`); this drives it: the entries in id order,
one batch at a time (each batch committed on its own, so a killed run resumes after the
last one), then the new vectors' index, then the switch, which embeds what was stored
meanwhile and records the new model in one transaction. Until the switch commits, queries
answer from the old vectors.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, Self
from uuid import UUID

import attrs

from apollo_domain.errors import ValidationError
from apollo_domain.ports import Embedder

#: Texts embedded per batch (and per committed transaction) unless told otherwise.
DEFAULT_BATCH = 64
MAX_BATCH = 1024

#: ``progress(done, total)``: called after the start and after every batch.
Progress = Callable[[int, int], None]
Embed = Callable[[Sequence[str]], Awaitable[list[Sequence[float]]]]


class Reembedding(Protocol):
    """One move of a store's vectors (``store.reembedding(model_id, dimension)``)."""

    stored_model: str
    resumed: bool

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def start(self) -> tuple[int, int]: ...

    async def pending(self, after: UUID | None, limit: int) -> list[tuple[UUID, str]]: ...

    async def put(self, vectors: Sequence[tuple[UUID, Sequence[float]]]) -> None: ...

    async def index(self) -> None: ...

    async def switch(self, embed: Embed) -> int: ...


@attrs.frozen
class ReembedReport:
    """What a move did: ``moved`` entries embedded by this run (``late`` of them at the
    switch, stored while it ran), ``total`` entries the store holds vectors of,
    ``resumed`` when it carried on a killed run's work."""

    from_model: str
    to_model: str
    moved: int
    total: int
    late: int
    resumed: bool

    @property
    def switched(self) -> bool:
        return self.from_model != self.to_model


def check_batch(batch_size: int) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise ValidationError("batch_size", "must be an integer")
    if not 1 <= batch_size <= MAX_BATCH:
        raise ValidationError("batch_size", f"must be between 1 and {MAX_BATCH}")
    return batch_size


async def reembed(
    moving: Reembedding,
    embedder: Embedder,
    *,
    batch_size: int = DEFAULT_BATCH,
    progress: Progress | None = None,
) -> ReembedReport:
    """Run ``moving`` to its end with ``embedder`` (whose model and dimension it targets)."""
    check_batch(batch_size)
    report = progress or (lambda done, total: None)
    async with moving:
        done, total = await moving.start()
        if moving.stored_model == embedder.model_id:
            return ReembedReport(embedder.model_id, embedder.model_id, 0, total, 0, False)
        report(done, total)
        moved = 0
        after: UUID | None = None
        while batch := await moving.pending(after, batch_size):
            vectors = await embedder.embed([content for _, content in batch])
            await moving.put([(i, v) for (i, _), v in zip(batch, vectors, strict=True)])
            after = batch[-1][0]
            done += len(batch)
            moved += len(batch)
            total = max(total, done)
            report(done, total)
        await moving.index()
        late = await moving.switch(embedder.embed)
        if late:
            report(total + late, total + late)
    return ReembedReport(
        moving.stored_model,
        embedder.model_id,
        moved + late,
        total + late,
        late,
        moving.resumed,
    )


class ProgressBar:
    """``progress`` for a terminal: one bar redrawn in place on a TTY, else a line each
    time another twentieth is done (and at the start and the end)."""

    WIDTH = 30

    def __init__(self, write: Callable[[str], object], tty: bool) -> None:
        self._write = write
        self._tty = tty
        self._step = -1

    def __call__(self, done: int, total: int) -> None:
        share = done / total if total else 1.0
        step = int(share * 20)
        if not self._tty and step == self._step and done not in (0, total):
            return
        self._step = step
        filled = int(share * self.WIDTH)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        line = f"reembed [{bar}] {done}/{total} entries ({share:.0%})"
        if self._tty:
            self._write("\r" + line + ("\n" if done >= total else ""))
        else:
            self._write(line + "\n")


__all__ = [
    "DEFAULT_BATCH",
    "MAX_BATCH",
    "ProgressBar",
    "ReembedReport",
    "Reembedding",
    "check_batch",
    "reembed",
]
