"""Group commit (``ingest_each``) on every store: single ingests of possibly different
callers, each with its own idempotency key, in one unit of work, with the outcomes of
ingesting them one by one (by principal, in order of first appearance)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from apollo_app import Apollo, Outcome, Principal
from apollo_domain import commands as c
from apollo_domain import services
from apollo_domain.errors import Forbidden, PersistenceFailed, ValidationError
from apollo_domain.handlers import handle, store_each
from apollo_domain.model import Role
from apollo_domain.services import Caller, IngestItem, scoped_key
from tests.contract.test_bulk_ingest_contract import AGENTS, TEXTS, observe, seeded_apollo

PRINCIPALS = ("alice", "bob")
messages = st.lists(
    st.fixed_dictionaries(
        {
            "content": st.sampled_from(TEXTS),
            "agent": st.sampled_from(AGENTS),
            "principal": st.sampled_from(PRINCIPALS),
            "access_scope": st.sampled_from(["global", "global", "private"]),
            "keyed": st.booleans(),
        }
    ),
    min_size=1,
    max_size=10,
)


@st.composite
def group_items(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Deliveries of messages: a keyed message may be delivered twice in one group (a
    redelivery overlapping the first), the same message with the same key."""
    sent = draw(messages)
    picked = draw(st.lists(st.integers(0, len(sent) - 1), min_size=1, max_size=12))
    return [{**sent[m], "key": f"m{m}" if sent[m]["keyed"] else None} for m in picked]


MAX_EXAMPLES = {"memory": 100, "postgres": 6}


def _item(apollo: Apollo, item: dict[str, Any]) -> IngestItem:
    caller = apollo.client(item["agent"], Principal(item["principal"])).caller
    command = c.StoreKnowledge(content=item["content"], access_scope=item["access_scope"])
    request = services.prepare(caller, command)
    return IngestItem(caller, request, item["key"])


async def _both_ways(
    kind: str, request: pytest.FixtureRequest, group: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What ingesting ``group`` one by one (by principal, each with its key) writes, and
    what one ``ingest_each`` writes; results in the group's order."""
    one_by_one, grouped = await seeded_apollo(kind, request), await seeded_apollo(kind, request)
    try:
        order = list(dict.fromkeys(item["principal"] for item in group))
        results: list[Any] = [None] * len(group)
        for principal in order:
            for index, item in enumerate(group):
                if item["principal"] == principal:
                    prepared = _item(one_by_one, item)
                    results[index] = await services.ingest(
                        one_by_one.deps,
                        prepared.caller,
                        prepared.request,
                        idempotency_key=prepared.idempotency_key,
                    )
        got = await services.ingest_each(grouped.deps, [_item(grouped, i) for i in group])
        return await observe(one_by_one, results), await observe(grouped, got)
    finally:
        await one_by_one.store.close()
        await grouped.store.close()


def test_a_group_has_the_outcomes_of_ingesting_its_items_one_by_one(
    store_kind: str, request: pytest.FixtureRequest
) -> None:
    """Mixed principals (each searched and decided with its own visibility), agents, scopes
    and idempotency keys (a key repeated in the group applies once; the repeat is reported
    as a replay): the group writes what single ingests would, row for row."""

    @settings(
        max_examples=MAX_EXAMPLES[store_kind],
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(group=group_items())
    def agree(group: list[dict[str, Any]]) -> None:
        expected, got = asyncio.run(_both_ways(store_kind, request, group))
        keys = [item["key"] for item in group if item["key"] is not None]
        event("a key repeated" if len(keys) != len(set(keys)) else "keys distinct")
        event("mixed principals" if len({i["principal"] for i in group}) > 1 else "one principal")
        for outcome, _, _, _, reason in expected["results"]:
            event(f"{outcome.value}: {(reason or '').split(':')[0]}")
        assert expected == got

    agree()


async def test_keys_are_shared_with_single_ingest_both_ways(make_apollo):
    """A message first ingested alone is recognized in a group, and one first ingested in
    a group is recognized alone: nothing is written twice, the replay names the entry."""
    apollo = await make_apollo()
    caller = Caller.of("claude-a", Principal("alice", role=Role.GATEWAY))

    def store(text: str) -> c.StoreKnowledge:
        return c.StoreKnowledge(content=text)

    alone = await handle(apollo.deps, caller, store("stored alone first"), idempotency_key="k1")
    first = await store_each(
        apollo.deps,
        [(caller, store("stored alone first"), "k1"), (caller, store("stored in a group"), "k2")],
    )
    again = await handle(apollo.deps, caller, store("stored in a group"), idempotency_key="k2")

    assert Outcome.CREATED == alone.outcome
    assert [(Outcome.DEDUPLICATED, alone.entry_id, "already processed"), Outcome.CREATED] == [
        (first[0].outcome, first[0].entry_id, first[0].reason),
        first[1].outcome,
    ]
    assert (Outcome.DEDUPLICATED, first[1].entry_id, "already processed") == (
        again.outcome,
        again.entry_id,
        again.reason,
    )
    async with apollo.store.unit_of_work() as uow:
        assert 2 == await uow.access_log.count("ingest")
        assert await uow.processed.seen(f"ingest:{scoped_key(caller.principal, 'k2')}")


async def test_a_group_that_fails_to_commit_writes_nothing_and_records_no_key(make_apollo):
    """All or nothing: a failed commit leaves no entry and no key, so each message can be
    carried out again (alone or in a group) and is stored once."""
    apollo = await make_apollo(faulty=True)
    caller = Caller.of("claude-a", Principal("alice"))
    group = [(caller, c.StoreKnowledge(content=f"note {n}"), f"m{n}") for n in range(3)]
    apollo.store.faults.fail_once("commit")

    with pytest.raises(PersistenceFailed):
        await store_each(apollo.deps, group)
    async with apollo.store.unit_of_work() as uow:
        assert 0 == await uow.access_log.count("ingest")
        assert not await uow.processed.seen("ingest:m0")

    retried = [await handle(apollo.deps, *item[:2], idempotency_key=item[2]) for item in group]
    replayed = await store_each(apollo.deps, group)
    assert [Outcome.CREATED] * 3 == [r.outcome for r in retried]
    assert [r.entry_id for r in retried] == [r.entry_id for r in replayed]
    assert {"already processed"} == {r.reason for r in replayed}
    async with apollo.store.unit_of_work() as uow:
        assert 3 == await uow.access_log.count("ingest")


async def test_every_command_is_checked_before_anything_is_written(make_apollo):
    """A reader may not write and a writer may not credit another agent; bad content names
    its field. ``store_each`` raises on the first such command and writes nothing."""
    apollo = await make_apollo()
    writer = Caller.of("claude-a", Principal("alice", role=Role.WRITER))
    reader = Caller.of("claude-r", Principal("rita", role=Role.READER))
    good = (writer, c.StoreKnowledge(content="a fine note"), "m1")

    with pytest.raises(Forbidden):
        await store_each(apollo.deps, [good, (reader, c.StoreKnowledge(content="no"), "m2")])
    with pytest.raises(Forbidden):
        await store_each(
            apollo.deps, [good, (writer, c.StoreKnowledge(content="x", agent_id="other"), "m3")]
        )
    with pytest.raises(ValidationError, match="content"):
        await store_each(apollo.deps, [good, (writer, c.StoreKnowledge(content="  "), "m4")])
    async with apollo.store.unit_of_work() as uow:
        assert 0 == await uow.access_log.count("ingest")
