"""Access-log retention on every store: rows older than the cutoff go, oldest first, in
bounded batches; newer rows and the counts by action stay true."""

from __future__ import annotations

from datetime import timedelta

import pytest

from apollo_app import Principal
from apollo_domain import commands as c
from apollo_domain.errors import Forbidden, ValidationError
from apollo_domain.ports import AccessLogRecord
from apollo_domain.services import access_log


async def _log(apollo, *ages_in_days: float, action: str = "query") -> None:
    """One ``action`` row per age, created that many days before the clock's now."""
    now = apollo.deps.clock.now()
    rows = [
        AccessLogRecord(action, f"agent-{i}", None, now - timedelta(days=age))
        for i, age in enumerate(ages_in_days)
    ]
    async with apollo.store.unit_of_work() as uow:
        await uow.access_log.record(rows)
        await uow.commit()


async def _agents_left(apollo) -> list[str]:
    left: list[str] = []
    async with apollo.store.unit_of_work() as uow:
        for i in range(10):
            left.extend(record.agent_id for record in await uow.access_log.for_agent(f"agent-{i}"))
    return left


async def test_trim_deletes_the_rows_older_than_the_retention(make_apollo):
    """Rows older than ``days`` go, younger ones stay, and the counts by action follow."""
    apollo = await make_apollo()
    await _log(apollo, 40, 31, 29, 1, action="query")
    await _log(apollo, 90, 0, action="ingest")

    result = await apollo.trim_access_log(days=30)

    assert ("trim_access_log", 3) == (result.action, result.affected)
    async with apollo.store.unit_of_work() as uow:
        assert 3 == await uow.access_log.count()
        assert 2 == await uow.access_log.count("query")
        assert 1 == await uow.access_log.count("ingest")
    assert ["agent-1", "agent-2", "agent-3"] == await _agents_left(apollo)
    assert 0 == (await apollo.trim_access_log(days=30)).affected


async def test_the_port_deletes_the_oldest_rows_first_and_at_most_the_limit(make_apollo):
    """``trim(cutoff, limit)`` removes the oldest rows before the cutoff, never more than
    ``limit``, whatever order they were written in."""
    apollo = await make_apollo()
    await _log(apollo, 5, 9, 7, 1, 8)
    cutoff = apollo.deps.clock.now() - timedelta(days=2)
    async with apollo.store.unit_of_work() as uow:
        assert 2 == await uow.access_log.trim(cutoff, 2)
        await uow.commit()
    assert ["agent-0", "agent-2", "agent-3"] == await _agents_left(apollo)


async def test_a_trim_rolled_back_deletes_nothing(make_apollo):
    """Retention runs in a unit of work like every write: not committed, nothing goes."""
    apollo = await make_apollo()
    await _log(apollo, 40, 50)
    async with apollo.store.unit_of_work() as uow:
        assert 2 == await uow.access_log.trim(apollo.deps.clock.now(), 100)
    async with apollo.store.unit_of_work() as uow:
        assert 2 == await uow.access_log.count()
        assert 2 == await uow.access_log.count("query")


async def test_a_large_backlog_goes_in_bounded_batches(make_apollo, monkeypatch):
    """More old rows than one batch holds: every one is deleted, one batch per
    transaction, and the row written after the cutoff stays."""
    monkeypatch.setattr(access_log, "ACCESS_LOG_TRIM_BATCH", 3)
    apollo = await make_apollo()
    await _log(apollo, 31, 32, 33, 34, 35, 36, 37, 1)
    batches: list[int] = []
    store = apollo.deps.store
    real = store.unit_of_work

    def counting():
        batches.append(1)
        return real()

    monkeypatch.setattr(store, "unit_of_work", counting)
    result = await apollo.trim_access_log(days=30)
    monkeypatch.undo()

    assert 7 == result.affected
    assert 3 == len(batches)  # 3 + 3 + 1
    assert ["agent-7"] == await _agents_left(apollo)


@pytest.mark.parametrize("days", [0, -1, 36_501, 2.5, "30", True, None])
async def test_bad_retention_days_are_refused_and_change_nothing(make_apollo, days):
    apollo = await make_apollo()
    await _log(apollo, 400)
    with pytest.raises(ValidationError) as caught:
        await apollo.run(c.TrimAccessLog(days=days))
    assert "days" == caught.value.field
    async with apollo.store.unit_of_work() as uow:
        assert 1 == await uow.access_log.count()


async def test_only_an_admin_trims_the_access_log(make_apollo):
    apollo = await make_apollo()
    await _log(apollo, 400)
    with pytest.raises(Forbidden):
        await apollo.run(c.TrimAccessLog(days=1), principal=Principal("w", role="writer"))
    async with apollo.store.unit_of_work() as uow:
        assert 1 == await uow.access_log.count()
