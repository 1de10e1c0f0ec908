"""The access log's retention: trim the rows older than the days kept."""

from __future__ import annotations

from datetime import timedelta

from ..commands import TrimAccessLog
from ..limits import MAX_DAYS
from ..results import MaintenanceResult
from .context import Caller, Deps, bounded_int, first_application

#: Access-log rows one retention transaction deletes at most: a large backlog goes in
#: several short transactions instead of one that holds the table for long.
ACCESS_LOG_TRIM_BATCH = 5_000


async def trim_access_log(
    deps: Deps, caller: Caller, command: TrimAccessLog, idempotency_key: str | None = None
) -> MaintenanceResult:
    """Retention: delete the access-log rows older than ``days`` days (an integer, 1 to
    36,500), oldest first, in transactions of at most :data:`ACCESS_LOG_TRIM_BATCH` rows
    until none is left before the cutoff, which is fixed when the run starts. Rows written
    meanwhile are newer than the cutoff and stay. ``idempotency_key`` is recorded with the
    first batch: a redelivery of it changes nothing and reports 0."""
    kept = bounded_int("days", command.days, 1, MAX_DAYS)
    cutoff = deps.clock.now() - timedelta(days=kept)
    deleted = 0
    key = idempotency_key
    while True:
        async with deps.store.unit_of_work() as uow:
            if not await first_application(uow, "trim_access_log", key, deps.clock.now()):
                return MaintenanceResult("trim_access_log", 0)
            key = None  # recorded with the first batch
            batch = await uow.access_log.trim(cutoff, ACCESS_LOG_TRIM_BATCH)
            await uow.commit()
        deleted += batch
        if batch < ACCESS_LOG_TRIM_BATCH:
            return MaintenanceResult("trim_access_log", deleted)
