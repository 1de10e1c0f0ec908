"""The in-process bus needs no broker client: it imports and runs with aiormq unimportable."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import apollo_adapters

SOURCES = Path(apollo_adapters.__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import asyncio
    import sys
    from importlib.abc import MetaPathFinder

    BLOCKED = ("aiormq", "pamqp")


    class BlockBrokerClients(MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is blocked")
            return None


    sys.meta_path.insert(0, BlockBrokerClients())
    for name in list(sys.modules):
        if name.split(".")[0] in BLOCKED:
            del sys.modules[name]

    try:
        import aiormq  # noqa: F401
    except ImportError:
        pass
    else:
        raise SystemExit("the blocker let aiormq through")

    from apollo_adapters.inprocess import InProcessBus
    from apollo_domain.ports.messaging import Message
    from apollo_domain.ports.topology import Topology


    async def main():
        topology = Topology()
        bus = InProcessBus(topology, retry_backoff=lambda attempt: 0.0)
        done = asyncio.Event()
        deliveries = []

        async def handler(delivery):
            deliveries.append(delivery.message.delivery_count)
            if delivery.message.delivery_count == 1:
                raise RuntimeError("first delivery fails")
            await delivery.ack()
            done.set()

        await bus.consume(topology.ingest_queue, handler)
        await bus.publish(Message(routing_key=topology.ingest_queue, body=b"hello"))
        await asyncio.wait_for(done.wait(), timeout=10)
        await bus.close()
        loaded = sorted(n for n in sys.modules if n.split(".")[0] in BLOCKED)
        print(deliveries, loaded)


    asyncio.run(main())
    """
)


def test_inprocess_bus_imports_and_runs_without_aiormq() -> None:
    """With aiormq and pamqp unimportable, ``apollo_adapters.inprocess`` imports and its bus
    delivers, retries a failed delivery and acknowledges the retry."""
    env = {**os.environ, "PYTHONPATH": str(SOURCES)}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert 0 == result.returncode, result.stderr
    assert "[1, 2] []" == result.stdout.strip()
