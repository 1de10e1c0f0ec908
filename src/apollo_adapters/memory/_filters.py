"""Which rows a viewer may see and which rows a search filter selects, as numpy masks."""

from __future__ import annotations

import numpy as np

from apollo_domain.model import AccessScope, Viewer
from apollo_domain.ports import SearchFilter

from ._columns import (
    GLOBAL,
    NO_OWNER,
    SCOPE_CODE,
    STATUS_CODE,
    STATUSES,
    TEAM,
    TYPE_CODE,
    EntryColumns,
    Mask,
    Rows,
)


class EntryFilters(EntryColumns):
    """Search filters and visibility evaluated over the entry columns."""

    def visible(self, viewer: Viewer, rows: Rows | None = None) -> Mask:
        """Which rows the viewer may see (liveness not included): every row, or ``rows``."""
        scope = self.scope[: self.n] if rows is None else self.scope[rows]
        mask: Mask = scope == GLOBAL
        principal = viewer.principal_id
        if principal is None:
            return mask
        owner = self.owner[: self.n] if rows is None else self.owner[rows]
        code = self.owners.codes.get(principal)
        if code is not None:
            mask |= (scope != GLOBAL) & (owner == code)
        team = [
            self.owners.codes[o]
            for o in viewer.team_owners
            if o in self.owners.codes and o != principal
        ]
        if team:
            in_team = owner == team[0] if len(team) == 1 else np.isin(owner, team)
            mask |= (scope == TEAM) & in_team
        return mask

    def matching(self, flt: SearchFilter, *, embedded: bool) -> Mask | None:
        """The rows matching ``flt`` (visibility included), or None when none can match."""
        return self._mask(flt, embedded, None)

    def selected(self, flt: SearchFilter, *, embedded: bool) -> Rows | None:
        """The rows matching ``flt`` in row order, or None when none can match.

        A filter naming a few ``only_ids`` is evaluated on those rows alone, not the store."""
        if flt.only_ids is not None and len(flt.only_ids) * 8 < self.n:
            row_of = self.row_of
            found = [row for row in map(row_of.get, flt.only_ids) if row is not None]
            if not found:
                return None
            rows = np.sort(np.asarray(found, dtype=np.intp))
            mask = self._mask(flt, embedded, rows)
            return None if mask is None else rows[mask]
        mask = self._mask(flt, embedded, None)
        return None if mask is None else np.flatnonzero(mask)

    def _mask(self, flt: SearchFilter, embedded: bool, rows: Rows | None) -> Mask | None:
        """``flt`` over every row (``rows`` None) or over ``rows`` (which hold every
        ``only_ids`` row of the store)."""
        n = self.n
        codes = {STATUS_CODE[s] for s in flt.statuses}
        if not codes or n == 0:
            return None
        at: slice | Rows = slice(0, n) if rows is None else rows
        size = n if rows is None else rows.size
        mask = self.alive[at] & self.has_emb[at] if embedded else self.alive[at].copy()
        status = self.status[at]
        if len(codes) == 1:
            mask &= status == codes.pop()
        elif len(codes) == 2:
            first, second = codes
            mask &= (status == first) | (status == second)
        elif len(codes) == 3:
            (missing,) = set(range(len(STATUSES))) - codes
            mask &= status != missing
        if flt.access_scope is not None:
            mask &= self.scope[at] == SCOPE_CODE[flt.access_scope]
        if flt.partition is not None:
            scope, owner_id = flt.partition
            mask &= self.scope[at] == SCOPE_CODE[scope]
            if scope is not AccessScope.GLOBAL:
                if owner_id is None:
                    owner = NO_OWNER
                elif owner_id in self.owners.codes:
                    owner = self.owners.codes[owner_id]
                else:
                    return None
                mask &= self.owner[at] == owner
        if flt.knowledge_domain is not None:
            domain = self.domains.codes.get(flt.knowledge_domain)
            if domain is None:
                return None
            mask &= self.domain[at] == domain
        if flt.content_type is not None:
            mask &= self.ctype[at] == TYPE_CODE[flt.content_type]
        if flt.min_confidence is not None:
            mask &= self.conf[at] >= flt.min_confidence
        if flt.tags is not None:
            tagged: set[int] = set()
            for tag in flt.tags:
                tagged.update(self.tag_rows.get(tag, ()))
            if not tagged:
                return None
            mask &= self._member(tagged, rows, size)
        if flt.only_ids is not None and rows is None:  # ``rows`` already are those ids
            wanted = {self.row_of[i] for i in flt.only_ids if i in self.row_of}
            if not wanted:
                return None
            mask &= self._member(wanted, rows, size)
        excluded = {self.row_of[i] for i in flt.exclude_ids if i in self.row_of}
        if excluded:
            mask &= ~self._member(excluded, rows, size)
        mask &= self.visible(flt.viewer, rows)
        return mask

    def _member(self, members: set[int], rows: Rows | None, size: int) -> Mask:
        """Which of every row (``rows`` None) or of ``rows`` are in ``members``."""
        listed = np.fromiter(members, dtype=np.intp, count=len(members))
        if rows is not None:
            return np.isin(rows, listed)
        found = np.zeros(size, dtype=np.bool_)
        found[listed] = True
        return found
