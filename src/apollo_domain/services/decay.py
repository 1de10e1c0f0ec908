"""Decay: the periodic decay cycle, a forced decay by a factor, and archiving what nobody
touched (docs/concepts.md, "The rules in one page")."""

from __future__ import annotations

from ..commands import ArchiveStale, ForceDecay, RunDecayCycle
from ..lifecycle import (
    stale_cutoff,
    validate_decay_factor,
    validate_stale_days,
)
from ..results import (
    MaintenanceResult,
)
from .context import Caller, Deps, first_application


async def force_decay(
    deps: Deps, caller: Caller, command: ForceDecay, idempotency_key: str | None = None
) -> MaintenanceResult:
    """Multiply the confidence of every non-archived entry; never archives. A redelivery
    of ``idempotency_key`` changes nothing and reports 0 affected."""
    value = validate_decay_factor(command.factor)
    async with deps.store.unit_of_work() as uow:
        if not await first_application(uow, "force_decay", idempotency_key, deps.clock.now()):
            return MaintenanceResult("force_decay", 0)
        count = await uow.entries.scale_confidence(value, deps.clock.now())
        await uow.commit()
    return MaintenanceResult("force_decay", count)


async def archive_stale(
    deps: Deps, caller: Caller, command: ArchiveStale, idempotency_key: str | None = None
) -> MaintenanceResult:
    """Archive non-archived entries untouched (COALESCE(updated_at, created_at)) for ``days``.
    A redelivery of ``idempotency_key`` changes nothing and reports 0 archived."""
    value = validate_stale_days(command.days)
    async with deps.store.unit_of_work() as uow:
        now = deps.clock.now()
        if not await first_application(uow, "archive_stale", idempotency_key, now):
            return MaintenanceResult("archive_stale", 0)
        count = await uow.entries.archive_stale(stale_cutoff(now, value), now)
        await uow.commit()
    return MaintenanceResult("archive_stale", count, archived=count)


async def run_decay_cycle(
    deps: Deps, caller: Caller, command: RunDecayCycle, idempotency_key: str | None = None
) -> MaintenanceResult:
    """c · 0.998^hours since each entry's last decay, then archive active entries below 0.1;
    the records of retrieval boosts whose window has passed are forgotten. A redelivery of
    ``idempotency_key`` changes nothing and reports 0."""
    async with deps.store.unit_of_work() as uow:
        now = deps.clock.now()
        if not await first_application(uow, "decay", idempotency_key, now):
            return MaintenanceResult("decay", 0)
        outcome = await uow.entries.decay(
            now, deps.policy.decay_factor_per_hour, deps.policy.archive_below
        )
        await uow.entries.forget_boosts_before(now - deps.boost_window)
        await uow.commit()
    return MaintenanceResult("decay", outcome.decayed, archived=outcome.archived)
