"""The query profile port: a probe told how long each stage of a query took."""

from __future__ import annotations

from typing import Protocol


class QueryProfile(Protocol):
    """Told how long each stage of a query took (a benchmark's or an operator's probe):
    ``embed`` (the query text), ``vector``, ``lexical`` and ``graph`` (each signal's read;
    they may run at the same time), ``fuse``, ``read winners`` (the fused candidates read
    whole with their sources' credibility, and the fair page chosen from them) and
    ``boost`` (the boost, the access log and the commit). A stage that did not run is not
    reported. Seconds are measured on the use cases' :class:`Clock`."""

    def stage(self, name: str, seconds: float) -> None: ...


__all__ = ["QueryProfile"]
