"""Evidence per entry, with undo."""

from __future__ import annotations

from collections.abc import Iterator
from uuid import UUID

import attrs

from apollo_domain.errors import NotFound
from apollo_domain.model import Evidence, SourceRef
from apollo_domain.rules import AGREEING_KINDS

from ._columns import EntryColumns, Undo


class EvidenceTable:
    """Evidence per entry, in insertion order, one row per (agent, provider, channel)."""

    def __init__(self, entries: EntryColumns) -> None:
        self._entries = entries
        self._rows: dict[UUID, list[Evidence]] = {}
        self._sources: dict[UUID, set[tuple[str, str, str | None]]] = {}

    def add(self, evidence: Evidence, undo: Undo) -> bool:
        entry_id = evidence.entry_id
        if entry_id not in self._entries.row_of:
            raise NotFound(f"entry {entry_id} does not exist")
        source = evidence.source
        key = (source.agent_id, source.provider, source.channel)
        sources = self._sources.setdefault(entry_id, set())
        if key in sources:
            return False
        rows = self._rows.setdefault(entry_id, [])
        sources.add(key)
        rows.append(evidence)

        def remove() -> None:
            rows.pop()
            sources.discard(key)

        undo.append(remove)
        return True

    def agreeing(self) -> Iterator[tuple[UUID, str]]:
        """(entry id, agent id) of every corroboration and agreement recorded."""
        for entry_id, rows in self._rows.items():
            for item in rows:
                if item.kind in AGREEING_KINDS:
                    yield entry_id, item.source.agent_id

    def for_entry(self, entry_id: UUID) -> list[Evidence]:
        return list(self._rows.get(entry_id, ()))

    def forget_agent(self, agent_id: str, redacted: SourceRef, undo: Undo) -> int:
        touched = 0
        for entry_id, rows in list(self._rows.items()):
            if not any(e.source.agent_id == agent_id for e in rows):
                continue
            kept = [
                attrs.evolve(e, source=redacted) if e.source.agent_id == agent_id else e
                for e in rows
                if e.source.agent_id != agent_id or e.kind == "origin"
            ]
            touched += sum(e.source.agent_id == agent_id for e in rows)
            old_rows, old_sources = rows, self._sources[entry_id]
            self._rows[entry_id] = kept
            self._sources[entry_id] = {
                (e.source.agent_id, e.source.provider, e.source.channel) for e in kept
            }

            def restore(
                entry_id: UUID = entry_id,
                rows: list[Evidence] = old_rows,
                sources: set[tuple[str, str, str | None]] = old_sources,
            ) -> None:
                self._rows[entry_id] = rows
                self._sources[entry_id] = sources

            undo.append(restore)
        return touched

    def drop(self, entry_id: UUID, undo: Undo) -> None:
        rows = self._rows.pop(entry_id, None)
        sources = self._sources.pop(entry_id, None)
        if rows is not None and sources is not None:

            def restore() -> None:
                self._rows[entry_id] = rows
                self._sources[entry_id] = sources

            undo.append(restore)
