"""Visibility and search filters as SQL conditions with named parameters."""

from __future__ import annotations

from typing import Any

from psycopg import sql

from apollo_domain.model import AccessScope, Status, Viewer
from apollo_domain.ports import SearchFilter


class Where:
    """A conjunction of SQL conditions with named parameters."""

    def __init__(self) -> None:
        self.clauses: list[sql.Composable] = []
        self.params: dict[str, Any] = {}

    def param(self, value: Any) -> sql.Placeholder:
        name = f"p{len(self.params)}"
        self.params[name] = value
        return sql.Placeholder(name)

    def add(self, template: str, *values: Any, **columns: str | tuple[str, str]) -> None:
        placeholders = [self.param(v) for v in values]
        identifiers = {
            key: sql.Identifier(*col) if isinstance(col, tuple) else sql.Identifier(col)
            for key, col in columns.items()
        }
        self.clauses.append(sql.SQL(template).format(*placeholders, **identifiers))

    def visible_to(self, viewer: Viewer, alias: str | None = None) -> None:
        def col(name: str) -> str | tuple[str, str]:
            return (alias, name) if alias else name

        if viewer.principal_id is None:
            self.add("{scope} = 'global'", scope=col("access_scope"))
            return
        self.add(
            "({scope} = 'global'"
            " OR ({scope} = 'private' AND {owner} = {})"
            " OR ({scope} = 'team' AND {owner} = ANY({})))",
            viewer.principal_id,
            sorted(viewer.team_owners | {viewer.principal_id}),
            scope=col("access_scope"),
            owner=col("owner_id"),
        )

    def matching(self, flt: SearchFilter) -> None:
        self.visible_to(flt.viewer)
        self.add("status = ANY({})", sorted(s.value for s in flt.statuses))
        if Status.ARCHIVED not in flt.statuses:
            # Lets the planner use the indexes that are partial on active entries.
            self.add("status <> 'archived'")
        if flt.min_confidence is not None:
            self.add("confidence >= {}", flt.min_confidence)
        if flt.tags is not None:
            self.add("tags && {}::text[]", list(flt.tags))
        if flt.knowledge_domain is not None:
            self.add("knowledge_domain = {}", flt.knowledge_domain)
        if flt.content_type is not None:
            self.add("content_type = {}", flt.content_type.value)
        if flt.access_scope is not None:
            self.add("access_scope = {}", flt.access_scope.value)
            self.owned_by_viewer(flt.access_scope, flt.viewer)
        if flt.partition is not None:
            scope, owner = flt.partition
            self.add("access_scope = {}", scope.value)
            if scope is not AccessScope.GLOBAL:  # every global entry shares one partition
                self.add("owner_id IS NOT DISTINCT FROM {}", owner)
        if flt.exclude_ids:
            self.add("id <> ALL({}::uuid[])", list(flt.exclude_ids))
        if flt.only_ids is not None:
            self.add("id = ANY({}::uuid[])", list(flt.only_ids))

    def owned_by_viewer(self, scope: AccessScope, viewer: Viewer) -> None:
        """What visibility implies within one non-global scope, stated so that the planner
        can use the owner index (a selective scope is then sorted exactly, not hunted for
        through the HNSW graph)."""
        if viewer.principal_id is None or scope is AccessScope.GLOBAL:
            return
        if scope is AccessScope.PRIVATE:
            self.add("owner_id = {}", viewer.principal_id)
        else:
            self.add("owner_id = ANY({})", sorted(viewer.team_owners | {viewer.principal_id}))

    def sql(self) -> sql.Composable:
        if not self.clauses:
            return sql.SQL("TRUE")
        return sql.SQL(" AND ").join(self.clauses)
