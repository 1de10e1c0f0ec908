"""The time budget of a request on every store (docs/concepts.md, "The rules in one page"): a
command cancelled inside its unit of work because its budget ran out fails with
RequestTimeout, and its unit of work rolls back: nothing it wrote is kept."""

from __future__ import annotations

import pytest

from apollo_app.budget import within_budget
from apollo_domain.commands import StoreKnowledge
from apollo_domain.errors import RequestTimeout
from apollo_domain.handlers import handle
from apollo_domain.services import Caller
from tests.support import footprint


async def test_a_command_over_its_budget_fails_and_leaves_nothing_behind(make_apollo):
    """The ingest is held just before its commit, its writes made, until the budget runs
    out: RequestTimeout, the store as it was, and the store serving the next request."""
    apollo = await make_apollo(interleaved=True)
    points = apollo.deps.store
    before = await footprint(apollo)
    points.hold("ingest", "commit")  # never released: the budget runs out there
    command = StoreKnowledge(content="Redis keeps its whole dataset in memory", tags=("redis",))
    work = handle(apollo.deps, Caller.of("claude-a"), command)
    ingest = points.run("ingest", within_budget(0.5, work))

    assert await points.reached("ingest", "commit")
    with pytest.raises(RequestTimeout):
        await ingest
    assert ("ingest", "entries.add") in points.trace, "the writes were made before the commit"
    assert before == await footprint(apollo)
    again = await apollo.client("claude-a").store_knowledge(content=command.content)
    assert "created" == again.outcome
