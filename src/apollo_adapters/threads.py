"""CPU-heavy reading of texts, off the event loop.

The domain's text functions are pure and synchronous (the core never imports asyncio), and
linear in their input; still, reading 100,000 characters takes tens to hundreds of
milliseconds, during which an event loop running them answers nobody. The async ports that
call them are adapters (:mod:`apollo_adapters.heuristics`, the in-memory store's lexical
index): they run the function in a worker thread when the text is longer than
:data:`OFF_LOOP_CHARS`, and inline when it is shorter (a thread hop would cost more than
the work). The hashing embedder does the same for the :class:`Embedder` port.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final, TypeVar

Result = TypeVar("Result")

#: Texts (or pairs of texts) longer than this many characters are read in a worker thread.
OFF_LOOP_CHARS: Final = 2_000


async def off_loop(size: int, function: Callable[..., Result], *args: object) -> Result:
    """``function(*args)``, in a worker thread when ``size`` (the characters it reads) is
    above :data:`OFF_LOOP_CHARS`, else inline."""
    if size <= OFF_LOOP_CHARS:
        return function(*args)
    return await asyncio.to_thread(function, *args)


__all__ = ["OFF_LOOP_CHARS", "off_loop"]
