"""The clock port: the source of every timestamp Apollo writes."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """The source of every timestamp Apollo writes. ``now`` is timezone-aware UTC."""

    def now(self) -> datetime: ...


__all__ = ["Clock"]
