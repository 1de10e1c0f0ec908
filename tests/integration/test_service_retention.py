"""The service trims the access log with its periodic work (APOLLO_ACCESS_LOG_RETENTION_DAYS)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from apollo_adapters.inprocess import InProcessBus
from apollo_app import Apollo, Settings
from apollo_app.entrypoints.service import ApolloService
from apollo_domain.ports import AccessLogRecord
from apollo_domain.ports.topology import Topology
from tests.support import eventually_within


async def test_the_service_deletes_access_log_rows_older_than_the_retention():
    async with Apollo.in_memory() as apollo:
        now = datetime.now(UTC).replace(microsecond=0)
        async with apollo.store.unit_of_work() as uow:
            await uow.access_log.record(
                [
                    AccessLogRecord("query", "old-agent", None, now - timedelta(days=8)),
                    AccessLogRecord("query", "new-agent", None, now - timedelta(days=6)),
                ]
            )
            await uow.commit()
        bus = InProcessBus(Topology())
        settings = Settings(embedder="hashing", decay_interval=0.05, access_log_retention_days=7)
        service = ApolloService(apollo, bus, settings)
        await service.start()
        try:

            async def trimmed() -> bool:
                async with apollo.store.unit_of_work() as uow:
                    return await uow.access_log.count() == 1

            await eventually_within(10.0, trimmed, "the old row is deleted")
        finally:
            await service.stop()
            await bus.close()
        async with apollo.store.unit_of_work() as uow:
            assert [] == await uow.access_log.for_agent("old-agent")
            assert 1 == len(await uow.access_log.for_agent("new-agent"))
