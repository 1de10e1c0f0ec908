"""When each earner last earned a retrieval boost on each entry (the boost window)."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial
from uuid import UUID

from ._columns import Undo


class BoostLedger:
    """``(entry, earner) → last boost time``, as the PostgreSQL store's
    ``retrieval_boosts`` table; an entry's rows go with it."""

    def __init__(self) -> None:
        self._last: dict[UUID, dict[str, datetime]] = {}

    def earn(
        self, entry_id: UUID, earner: str, now: datetime, window: timedelta, undo: Undo
    ) -> bool:
        """Whether ``earner`` earns a boost on the entry at ``now`` (none within ``window``
        before); when it does, ``now`` is recorded as its last."""
        earned = self._last.setdefault(entry_id, {})
        previous = earned.get(earner)
        if previous is not None and previous + window > now:
            return False
        earned[earner] = now
        undo.append(lambda: self._restore(entry_id, earner, previous))
        return True

    def _restore(self, entry_id: UUID, earner: str, previous: datetime | None) -> None:
        earned = self._last.setdefault(entry_id, {})
        if previous is None:
            earned.pop(earner, None)
        else:
            earned[earner] = previous

    def drop(self, entry_id: UUID, undo: Undo) -> None:
        """Forget the entry's rows (it is deleted)."""
        rows = self._last.pop(entry_id, None)
        if rows:
            undo.append(lambda: self._last.__setitem__(entry_id, rows))

    def forget(self, earner: str, undo: Undo) -> int:
        """Forget every row of ``earner``; returns how many there were."""
        forgotten = 0
        for entry_id, earned in self._last.items():
            previous = earned.pop(earner, None)
            if previous is not None:
                forgotten += 1
                undo.append(partial(self._restore, entry_id, earner, previous))
        return forgotten

    def forget_before(self, cutoff: datetime, undo: Undo) -> int:
        """Forget every row at or before ``cutoff``; returns how many there were."""
        forgotten = 0
        for entry_id, earned in self._last.items():
            for earner, last in list(earned.items()):
                if last <= cutoff:
                    del earned[earner]
                    forgotten += 1
                    undo.append(partial(self._restore, entry_id, earner, last))
        return forgotten
