"""CPU-heavy reading of texts, off the event loop (DESIGN §2 "Load and hostile input").

The domain's text functions are pure and synchronous (the core never imports asyncio), and
linear in their input; still, reading 100,000 characters takes tens to hundreds of
milliseconds, during which an event loop running them answers nobody. The async ports that
call them are adapters: these run the function in a worker thread when the text is longer
than :data:`OFF_LOOP_CHARS`, and inline when it is shorter (a thread hop would cost more
than the work). The hashing embedder does the same for the :class:`Embedder` port.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final, TypeVar

from attrs import frozen

from apollo_domain.contradiction import heuristic_contradicts
from apollo_domain.entities import Extraction
from apollo_domain.extraction import extract_entities

Result = TypeVar("Result")

#: Texts (or pairs of texts) longer than this many characters are read in a worker thread.
OFF_LOOP_CHARS: Final = 2_000


async def off_loop(size: int, function: Callable[..., Result], *args: object) -> Result:
    """``function(*args)``, in a worker thread when ``size`` (the characters it reads) is
    above :data:`OFF_LOOP_CHARS`, else inline."""
    if size <= OFF_LOOP_CHARS:
        return function(*args)
    return await asyncio.to_thread(function, *args)


@frozen
class ThreadedEntityExtractor:
    """The :class:`~apollo_domain.ports.EntityExtractor` over a pure extraction function
    (the built-in heuristic by default), run off the event loop for long texts."""

    function: Callable[[str], Extraction] = extract_entities

    async def extract(self, text: str) -> Extraction:
        return await off_loop(len(text), self.function, text)


@frozen
class ThreadedContradictionJudge:
    """The :class:`~apollo_domain.ports.ContradictionJudge` over a pure judging function
    (the built-in heuristic by default), run off the event loop for long texts."""

    function: Callable[[str, str], bool] = heuristic_contradicts

    async def contradicts(self, new: str, existing: str) -> bool:
        return await off_loop(len(new) + len(existing), self.function, new, existing)


__all__ = ["OFF_LOOP_CHARS", "ThreadedContradictionJudge", "ThreadedEntityExtractor", "off_loop"]
