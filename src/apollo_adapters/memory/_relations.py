"""Typed relations between entries, with undo."""

from __future__ import annotations

from collections.abc import Collection
from functools import partial
from uuid import UUID

import attrs

from apollo_domain.errors import NotFound
from apollo_domain.model import Relation, RelationType
from apollo_domain.redaction import redact_context

from ._columns import EntryColumns, Mask, Undo

RelationKey = tuple[UUID, UUID, RelationType]


class RelationTable:
    """Typed edges, each with an insertion sequence number that orders ``outgoing``."""

    def __init__(self, entries: EntryColumns) -> None:
        self._entries = entries
        self._edges: dict[RelationKey, tuple[int, Relation]] = {}
        self._out: dict[UUID, set[RelationKey]] = {}
        self._in: dict[UUID, set[RelationKey]] = {}
        self._sequence = 0

    def _link(self, key: RelationKey, item: tuple[int, Relation]) -> None:
        self._edges[key] = item
        self._out.setdefault(key[0], set()).add(key)
        self._in.setdefault(key[1], set()).add(key)

    def _unlink(self, key: RelationKey) -> tuple[int, Relation]:
        self._out[key[0]].discard(key)
        self._in[key[1]].discard(key)
        return self._edges.pop(key)

    def add(self, relation: Relation, undo: Undo) -> bool:
        for endpoint in (relation.from_id, relation.to_id):
            if endpoint not in self._entries.row_of:
                raise NotFound(f"entry {endpoint} does not exist")
        key = (relation.from_id, relation.to_id, RelationType(relation.relation_type))
        if key in self._edges:
            return False
        self._sequence += 1
        self._link(key, (self._sequence, relation))
        undo.append(lambda: self._unlink(key))
        return True

    def outgoing(
        self, entry_ids: Collection[UUID], types: Collection[RelationType] | None
    ) -> list[Relation]:
        return self._edges_at(self._out, entry_ids, types)

    def incoming(
        self, entry_ids: Collection[UUID], types: Collection[RelationType] | None
    ) -> list[Relation]:
        return self._edges_at(self._in, entry_ids, types)

    def _edges_at(
        self,
        index: dict[UUID, set[RelationKey]],
        entry_ids: Collection[UUID],
        types: Collection[RelationType] | None,
    ) -> list[Relation]:
        wanted = None if types is None else {RelationType(t) for t in types}
        found = [
            self._edges[key]
            for entry_id in set(entry_ids)
            for key in index.get(entry_id, ())
            if wanted is None or key[2] in wanted
        ]
        found.sort(key=lambda item: item[0])
        return [relation for _, relation in found]

    def exists(self, key: RelationKey) -> bool:
        return key in self._edges

    def count(self) -> int:
        return len(self._edges)

    def count_between(self, rows: Mask) -> int:
        row_of = self._entries.row_of
        return sum(
            1 for source, target, _ in self._edges if rows[row_of[source]] and rows[row_of[target]]
        )

    def redact_context(self, agent_id: str, replacement: str, undo: Undo) -> int:
        changed = 0
        for key, (sequence, relation) in list(self._edges.items()):
            context = redact_context(relation.source_context, agent_id, replacement)
            if context is None:
                continue
            old = self._edges[key]
            self._edges[key] = (sequence, attrs.evolve(relation, source_context=context))
            undo.append(partial(self._edges.__setitem__, key, old))
            changed += 1
        return changed

    def drop(self, entry_id: UUID, undo: Undo) -> None:
        keys = self._out.get(entry_id, set()) | self._in.get(entry_id, set())
        if not keys:
            return
        removed = [(key, self._unlink(key)) for key in keys]

        def restore() -> None:
            for key, item in removed:
                self._link(key, item)

        undo.append(restore)
