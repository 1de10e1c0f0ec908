"""Idempotent mutations on every store (docs/architecture.md, "Units of work and concurrency").

Every mutating command handled with an idempotency key (a bus message id) records
``<kind>:<key>`` in the transaction of its effects: handled twice, it is applied once and
the second call returns its "already applied" result; two overlapping deliveries (the
first held before its commit while the second runs) are applied once too. A GAS event is
keyed by its request id, each deposit by the request id and its content hash.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

import pytest
from attrs import frozen

from apollo_adapters.clock import ManualClock
from apollo_app import Apollo, Principal
from apollo_domain import commands as c
from apollo_domain import services
from apollo_domain.actions import ACTIONS
from apollo_domain.errors import PersistenceFailed
from apollo_domain.handlers import handle
from apollo_domain.lifecycle import dispute
from apollo_domain.model import Outcome
from apollo_domain.redaction import REDACTED
from apollo_domain.services import Caller, scoped_key
from tests.contract.stores import EPOCH
from tests.support import ScriptedLLM, footprint

KEY = "message-1"
ADMIN = Principal("ops", role="admin")
#: What the store records of ``KEY`` sent by ``ADMIN``: its key, scoped by its principal.
SCOPED = scoped_key(ADMIN, KEY)
AGENTS = ("claude-a", "openai-b", "gas", REDACTED)


async def snapshot(apollo: Apollo) -> tuple[Any, ...]:
    """Everything a mutation could change, without ids (two stores built the same way give
    equal snapshots): the footprint, every entry's content, status and confidence, the
    expertise rows and the sources' standing."""
    async with apollo.store.unit_of_work() as uow:
        entries = []
        for agent in AGENTS:
            entries.extend(
                (e.content, e.status.value, round(e.confidence, 9), e.source.agent_id)
                for e in await uow.entries.by_agent(agent)
            )
        expertise = sorted(
            (r.agent_id, r.knowledge_domain, r.entry_count, round(r.proficiency, 9))
            for r in await uow.expertise.all()
        )
        standing = []
        for agent in AGENTS:
            record = await uow.credibility.get(agent)
            standing.append((record.alpha, record.beta, record.label))
    return (await footprint(apollo), sorted(entries), expertise, standing)


async def seen(apollo: Apollo, key: str) -> bool:
    async with apollo.store.unit_of_work() as uow:
        return await uow.processed.seen(key)


def admin_handle(apollo: Apollo, command: c.Command[Any]) -> Awaitable[Any]:
    caller = apollo.client("ops", ADMIN).caller
    return handle(apollo.deps, caller, command, idempotency_key=KEY)


async def _store(apollo: Apollo, content: str, agent: str = "claude-a") -> str:
    result = await apollo.client(agent).store_knowledge(content=content)
    assert result.entry_id is not None
    return str(result.entry_id)


async def _disputed(apollo: Apollo) -> str:
    entry_id = await _store(apollo, "a contested claim")
    async with apollo.store.unit_of_work() as uow:
        entry = await uow.entries.get(UUID(entry_id))
        await uow.entries.update(dispute(entry, entry.updated_at))
        await uow.commit()
    return entry_id


@frozen
class Case:
    """One mutation: ``setup`` builds the store it applies to and returns the command;
    ``meanwhile`` changes the store between two deliveries so that a second application
    would show; ``replayed`` recognizes the second call's "already applied" result given
    the first's; ``key`` is what the store records."""

    id: str
    kind: type[c.Command[Any]]
    key: str
    setup: Callable[[Apollo, ManualClock], Awaitable[c.Command[Any]]]
    replayed: Callable[[Any, Any], bool]
    meanwhile: Callable[[Apollo, ManualClock], Awaitable[None]] | None = None


def _same_entry(first: Any, again: Any) -> bool:
    return again.outcome is Outcome.DEDUPLICATED and again.entry_id == first.entry_id


def _unchanged(first: Any, again: Any) -> bool:
    return again.changed is False and again.entry_id == first.entry_id


def _none_affected(first: Any, again: Any) -> bool:
    return (again.affected, again.archived) == (0, 0) and first.affected > 0


async def _store_cmd(apollo: Apollo, clock: ManualClock) -> c.Command[Any]:
    return c.StoreKnowledge(content="stored once per message", agent_id="claude-a")


async def _store_many_cmd(apollo: Apollo, clock: ManualClock) -> c.Command[Any]:
    return c.StoreMany(
        items=(
            c.StoreKnowledge(content="the first of a batch"),
            c.StoreKnowledge(content="the second of a batch"),
        ),
        agent_id="claude-a",
    )


async def _store_text_cmd(apollo: Apollo, clock: ManualClock) -> c.Command[Any]:
    return c.StoreText(
        text=({"speaker": "ann", "text": "One turn of a talk. Another statement of it."},),
        agent_id="claude-a",
    )


async def _writeback_store_cmd(apollo: Apollo, clock: ManualClock) -> c.Command[Any]:
    (vector,) = await apollo.deps.embedder.embed(["written back with its embedding"])
    return c.WritebackStore(
        content="written back with its embedding", embedding=tuple(vector), agent_id="claude-a"
    )


async def _writeback_vectorize_cmd(apollo: Apollo, clock: ManualClock) -> c.Command[Any]:
    return c.WritebackVectorize(content="written back to be embedded", agent_id="claude-a")


async def _link_cmd(apollo: Apollo, clock: ManualClock) -> c.Command[Any]:
    a = await _store(apollo, "one end of a link")
    b = await _store(apollo, "the other end of a link")
    return c.LinkEntries(from_entry_id=a, to_entry_id=b, relation_type="depends_on")


async def _deprecate_cmd(apollo: Apollo, clock: ManualClock) -> c.Command[Any]:
    return c.DeprecateEntry(entry_id=await _store(apollo, "soon superseded"), reason="old")


async def _resolve_cmd(apollo: Apollo, clock: ManualClock) -> c.Command[Any]:
    return c.ResolveDispute(entry_id=await _disputed(apollo), resolution="accept")


async def _force_decay_cmd(apollo: Apollo, clock: ManualClock) -> c.Command[Any]:
    await _store(apollo, "decayed by a factor")
    return c.ForceDecay(factor=0.5)


async def _archive_stale_cmd(apollo: Apollo, clock: ManualClock) -> c.Command[Any]:
    await _store(apollo, "left untouched for days")
    clock.advance(days=2)
    return c.ArchiveStale(days=1)


async def _fresh_and_stale(apollo: Apollo, clock: ManualClock) -> None:
    await _store(apollo, "stored between two deliveries", agent="openai-b")
    clock.advance(days=2)


async def _erase_cmd(apollo: Apollo, clock: ManualClock) -> c.Command[Any]:
    await _store(apollo, "an erased agent's note")
    return c.EraseAgent(target_agent_id="claude-a")


async def _erased_agent_writes_again(apollo: Apollo, clock: ManualClock) -> None:
    await _store(apollo, "the agent came back")


async def _label_cmd(apollo: Apollo, clock: ManualClock) -> c.Command[Any]:
    return c.LabelSource(target_agent_id="openai-b", label="troll")


async def _unlabel_cmd(apollo: Apollo, clock: ManualClock) -> c.Command[Any]:
    await apollo.run(c.LabelSource(target_agent_id="openai-b", label="troll"))
    return c.UnlabelSource(target_agent_id="openai-b")


async def _gas_cmd(apollo: Apollo, clock: ManualClock) -> c.Command[Any]:
    return c.ProcessGasEvent(
        event={"request_id": "req-1", "response_content": "Anycast routes to the nearest host."}
    )


async def _decay_cmd(apollo: Apollo, clock: ManualClock) -> c.Command[Any]:
    await _store(apollo, "decays by the hour")
    clock.advance(hours=10)
    return c.RunDecayCycle()


async def _hours_pass(apollo: Apollo, clock: ManualClock) -> None:
    clock.advance(hours=10)


async def _corroboration_cmd(apollo: Apollo, clock: ManualClock) -> c.Command[Any]:
    await _store(apollo, "a lone candidate")
    return c.CheckCorroboration(limit=10)


async def _aggregate_cmd(apollo: Apollo, clock: ManualClock) -> c.Command[Any]:
    await _store(apollo, "counted by the aggregator")
    return c.AggregateExpertise()


async def _another_agent_writes(apollo: Apollo, clock: ManualClock) -> None:
    await _store(apollo, "stored between two deliveries", agent="openai-b")


async def _outbox_cmd(apollo: Apollo, clock: ManualClock) -> c.Command[Any]:
    await _store(apollo, "queued for a contradiction scan")
    return c.ProcessOutbox(limit=10)


async def _trim_cmd(apollo: Apollo, clock: ManualClock) -> c.Command[Any]:
    await _store(apollo, "logged long ago")
    clock.advance(days=2)
    return c.TrimAccessLog(days=1)


async def _more_rows_age(apollo: Apollo, clock: ManualClock) -> None:
    await _store(apollo, "logged between two deliveries", agent="openai-b")
    clock.advance(days=2)


CASES = [
    Case("store", c.StoreKnowledge, f"ingest:{SCOPED}", _store_cmd, _same_entry),
    Case(
        "store_many",
        c.StoreMany,
        f"store_many:{SCOPED}:0",
        _store_many_cmd,
        lambda first, again: all(_same_entry(f, a) for f, a in zip(first, again, strict=True)),
    ),
    Case(
        "store_text",
        c.StoreText,
        f"store_text:{SCOPED}",
        _store_text_cmd,
        lambda first, again: (
            first.episode_id == again.episode_id
            and all(
                _same_entry(f, a) for f, a in zip(first.statements, again.statements, strict=True)
            )
        ),
    ),
    Case(
        "writeback_store", c.WritebackStore, f"ingest:{SCOPED}", _writeback_store_cmd, _same_entry
    ),
    Case(
        "writeback_vectorize",
        c.WritebackVectorize,
        f"ingest:{SCOPED}",
        _writeback_vectorize_cmd,
        _same_entry,
    ),
    Case(
        "link",
        c.LinkEntries,
        f"link:{SCOPED}",
        _link_cmd,
        lambda first, again: first.created and not again.created,
    ),
    Case("deprecate", c.DeprecateEntry, f"deprecate:{SCOPED}", _deprecate_cmd, _unchanged),
    Case("resolve", c.ResolveDispute, f"resolve:{SCOPED}", _resolve_cmd, _unchanged),
    Case(
        "force_decay",
        c.ForceDecay,
        f"force_decay:{SCOPED}",
        _force_decay_cmd,
        lambda first, again: first.affected == 1 and again.affected == 0,
    ),
    Case(
        "archive_stale",
        c.ArchiveStale,
        f"archive_stale:{SCOPED}",
        _archive_stale_cmd,
        _none_affected,
        _fresh_and_stale,
    ),
    Case(
        "erase_agent",
        c.EraseAgent,
        f"erase_agent:{SCOPED}",
        _erase_cmd,
        lambda first, again: first.deleted == 1 and (again.deleted, again.redacted) == (0, 0),
        _erased_agent_writes_again,
    ),
    Case(
        "label",
        c.LabelSource,
        f"label_source:{SCOPED}",
        _label_cmd,
        lambda first, again: again == first and again.label == "troll",
    ),
    Case(
        "unlabel",
        c.UnlabelSource,
        f"unlabel_source:{SCOPED}",
        _unlabel_cmd,
        lambda first, again: again == first and again.label is None,
    ),
    Case(
        "gas",
        c.ProcessGasEvent,
        f"gas:{scoped_key(ADMIN, 'req-1')}",
        _gas_cmd,
        lambda first, again: first.deposited["facts"] == 1 and again.replayed,
    ),
    Case(
        "decay_cycle",
        c.RunDecayCycle,
        f"decay:{SCOPED}",
        _decay_cmd,
        lambda first, again: first.affected == 1 and again.affected == 0,
        _hours_pass,
    ),
    Case(
        "corroboration",
        c.CheckCorroboration,
        f"corroboration:{SCOPED}",
        _corroboration_cmd,
        lambda first, again: first.scanned == 1 and again.scanned == 0,
    ),
    Case(
        "aggregate_expertise",
        c.AggregateExpertise,
        f"aggregate_expertise:{SCOPED}",
        _aggregate_cmd,
        lambda first, again: first.affected == 1 and again.affected == 0,
        _another_agent_writes,
    ),
    Case(
        "outbox",
        c.ProcessOutbox,
        f"outbox:{SCOPED}",
        _outbox_cmd,
        lambda first, again: first.processed == 1 and again.processed == 0,
    ),
    Case(
        "trim_access_log",
        c.TrimAccessLog,
        f"trim_access_log:{SCOPED}",
        _trim_cmd,
        lambda first, again: first.affected == 1 and again.affected == 0,
        _more_rows_age,
    ),
]


def test_every_mutation_has_an_idempotency_case():
    """A new mutating command cannot be added without showing it is idempotent."""
    mutations = {kind for kind, record in ACTIONS.items() if record.mutates}
    assert mutations == {case.kind for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
async def test_a_command_handled_twice_with_one_key_is_applied_once(make_apollo, case: Case):
    """The second call with the key returns the "already applied" result and changes
    nothing, even where the store changed in between so that a second application would
    show; the key is recorded."""
    clock = ManualClock(EPOCH)
    apollo = await make_apollo(clock=clock)
    command = await case.setup(apollo, clock)
    first = await admin_handle(apollo, command)
    assert await seen(apollo, case.key)
    clock.advance(hours=1)
    if case.meanwhile is not None:
        await case.meanwhile(apollo, clock)
    before = await snapshot(apollo)
    again = await admin_handle(apollo, command)
    assert case.replayed(first, again), (first, again)
    assert before == await snapshot(apollo)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
async def test_overlapping_deliveries_of_one_command_are_applied_once(make_apollo, case: Case):
    """The first delivery is held before its commit; the second waits for it (the key is
    a unique insert in the same transaction) and then applies nothing. The store ends as
    one delivery alone leaves it."""
    alone_clock = ManualClock(EPOCH)
    alone = await make_apollo(clock=alone_clock)
    await admin_handle(alone, await case.setup(alone, alone_clock))

    clock = ManualClock(EPOCH)
    apollo = await make_apollo(clock=clock, interleaved=True)
    points = apollo.deps.store
    command = await case.setup(apollo, clock)
    gate = points.hold("first", "commit")
    first = points.run("first", admin_handle(apollo, command))
    assert await points.reached("first", "commit", or_done=first)
    second = points.run("second", admin_handle(apollo, command))
    blocked = await points.blocked_or_done(second)
    gate.set()
    results = await points.finish(first, second)

    assert blocked, "the second delivery ran to completion while the first held its key"
    assert not [r for r in results if isinstance(r, BaseException)], results
    assert await seen(apollo, case.key)
    assert await snapshot(alone) == await snapshot(apollo)


async def test_overlapping_force_decay_halves_once(make_apollo):
    """force_decay(0.5) delivered twice at once: 0.5 → 0.25, not 0.125."""
    apollo = await make_apollo(interleaved=True)
    points = apollo.deps.store
    entry_id = await _store(apollo, "decayed exactly once")
    command = c.ForceDecay(factor=0.5)
    gate = points.hold("first", "commit")
    first = points.run("first", admin_handle(apollo, command))
    await points.reached("first", "commit")
    second = points.run("second", admin_handle(apollo, command))
    await points.blocked_or_done(second)
    gate.set()
    applied, replayed = await points.finish(first, second)
    assert (1, 0) == (applied.affected, replayed.affected)
    assert pytest.approx(0.25) == (await apollo.get_entry(entry_id)).confidence


GAS_EVENT = {
    "request_id": "req-9",
    "response_content": (
        "Anycast routes one address to many hosts. BGP picks the nearest one. "
        "Withdrawal moves traffic elsewhere."
    ),
    "caller": {"agent_id": "gas-relay"},
}


async def _gas_rows(apollo: Apollo) -> tuple[int, int]:
    async with apollo.store.unit_of_work() as uow:
        entries = await uow.entries.by_agent("gas-relay")
        logged = await uow.access_log.count("ingest")
    return len(entries), logged


async def test_overlapping_gas_deliveries_deposit_once(make_apollo):
    """Two deliveries of one event at once, the first held at its first deposit's commit:
    three facts, three entries and three ingest log rows."""
    apollo = await make_apollo(llm=ScriptedLLM(), interleaved=True)
    points = apollo.deps.store
    command = c.ProcessGasEvent(event=GAS_EVENT)
    gate = points.hold("first", "commit")
    first = points.run("first", admin_handle(apollo, command))
    await points.reached("first", "commit")
    second = points.run("second", admin_handle(apollo, command))
    await points.blocked_or_done(second)
    gate.set()
    results = await points.finish(first, second)
    assert not [r for r in results if isinstance(r, BaseException)], results
    assert (3, 3) == await _gas_rows(apollo)
    assert await seen(apollo, f"gas:{scoped_key(ADMIN, 'req-9')}")


async def test_a_transient_store_error_mid_gas_leaves_the_request_for_redelivery(make_apollo):
    """The second fact's insert fails once: the call raises the transient error, the request
    is not marked, and the redelivery deposits the missing facts, each fact once."""
    apollo = await make_apollo(llm=ScriptedLLM(), faulty=True)
    faults = apollo.deps.store.faults
    faults.fail_once("entries.add", call=2)
    command = c.ProcessGasEvent(event=GAS_EVENT)
    with pytest.raises(PersistenceFailed):
        await admin_handle(apollo, command)
    assert not await seen(apollo, f"gas:{scoped_key(ADMIN, 'req-9')}")
    assert (1, 1) == await _gas_rows(apollo)

    redelivered = await admin_handle(apollo, command)
    assert not redelivered.replayed
    assert 3 == redelivered.deposited["facts"]
    assert (3, 3) == await _gas_rows(apollo)
    assert await seen(apollo, f"gas:{scoped_key(ADMIN, 'req-9')}")
    assert (await admin_handle(apollo, command)).replayed
    assert (3, 3) == await _gas_rows(apollo)


async def test_a_gas_deposit_that_fails_for_good_still_marks_the_request(make_apollo):
    """A deposit refused for good (a permanent error: a private entry needs an owner, and
    this caller has none) counts as failed; the request is marked, so it is not retried."""
    apollo = await make_apollo()
    event = {"request_id": "req-p", "response_content": "Kept private, owned by nobody."}
    outcome = await services.process_gas_event(
        apollo.deps, Caller.of("gas"), c.ProcessGasEvent(event=event), scope="private"
    )
    assert (0, 1) == (outcome.deposited["deposited"], outcome.deposited["failed"])
    assert await seen(apollo, f"gas:{scoped_key(Principal(None), 'req-p')}")
