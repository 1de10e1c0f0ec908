"""Traversal, curation and the lifecycle operations, on every store adapter."""

from __future__ import annotations

import math
import uuid
from itertools import pairwise

import pytest

from apollo_adapters.clock import ManualClock
from apollo_app import InvalidTransition, NotFound, Principal, Status, ValidationError
from apollo_domain.errors import UnknownResolution
from tests.contract.stores import EPOCH

ADMIN = Principal("ops", role="admin")


async def _chain(apollo, n: int, relation: str = "depends_on", weight: float = 1.0):
    client = apollo.client("builder")
    ids = [
        (await client.store_knowledge(content=f"chain link number {i} of the graph")).entry_id
        for i in range(n)
    ]
    for a, b in pairwise(ids):
        await client.link_entries(
            from_entry_id=a, to_entry_id=b, relation_type=relation, weight=weight
        )
    return ids


async def test_spreading_activation(make_apollo):
    apollo = await make_apollo()
    ids = await _chain(apollo, 5)
    related = await apollo.client("reader").related_entries(entry_id=ids[0], depth=5)
    # 0.6, 0.36, 0.216 (> 0.1, expanded), 0.1296 (> 0.1, expanded), 0.07776 kept, not expanded
    assert [(ids[i], i) for i in range(1, 5)] == [(r.id, r.depth) for r in related]
    assert [pytest.approx(0.6**d) for d in range(1, 5)] == [r.activation for r in related]
    shallow = await apollo.client("reader").related_entries(entry_id=ids[0], depth=2)
    assert [ids[1], ids[2]] == [r.id for r in shallow]


async def test_activation_stops_at_the_threshold(make_apollo):
    apollo = await make_apollo()
    ids = await _chain(apollo, 4, weight=0.25)
    related = await apollo.client("reader").related_entries(entry_id=ids[0], depth=3)
    # 0.15 (> 0.1, expanded) then 0.0225 (returned, not expanded)
    assert [ids[1], ids[2]] == [r.id for r in related]


async def test_traversal_rejects_bad_arguments_and_skips_archived(make_apollo):
    apollo = await make_apollo()
    ids = await _chain(apollo, 3)
    reader = apollo.client("reader")
    with pytest.raises(ValidationError) as err:
        await reader.related_entries(entry_id=ids[0], relation_types=["friend_of"])
    assert err.value.field == "relation_types"
    with pytest.raises(NotFound):
        await reader.related_entries(entry_id=uuid.uuid4())
    await apollo.client("ops", ADMIN).deprecate_entry(entry_id=ids[1], reason="gone")
    assert await reader.related_entries(entry_id=ids[0]) == []
    only = await reader.related_entries(entry_id=ids[0], relation_types=["similar_to"])
    assert only == []


async def test_traversal_logs_only_known_agents(make_apollo):
    apollo = await make_apollo()
    ids = await _chain(apollo, 2)
    await apollo.client("unknown").related_entries(entry_id=ids[0])
    async with apollo.store.unit_of_work() as uow:
        assert await uow.access_log.count("traverse") == 0
    await apollo.client("agent-7").related_entries(entry_id=ids[0])
    async with apollo.store.unit_of_work() as uow:
        assert await uow.access_log.count("traverse") == 1


async def test_relations_show_both_ways_with_the_entries_the_caller_may_see(make_apollo):
    """An entry's relations, outgoing then incoming, newest first each way, with the entry
    at the other end: archived ends are shown with their status, ends the caller may not
    see are left out, and an entry the caller may not see has no relations to show."""
    clock = ManualClock(EPOCH)
    apollo = await make_apollo(clock=clock)
    alice = apollo.client("agent-a", Principal("alice"))
    hub = (await alice.store_knowledge(content="the hub entry everything links to")).entry_id
    ends = {}
    for name in ("cause", "part", "old", "secret"):
        scope = "private" if name == "secret" else "global"
        stored = await alice.store_knowledge(
            content=f"the {name} entry of the hub", access_scope=scope
        )
        ends[name] = stored.entry_id
    links = [
        (ends["cause"], hub, "causes"),
        (hub, ends["part"], "has_a"),
        (hub, ends["old"], "supersedes"),
        (hub, ends["secret"], "extends"),
        (ends["secret"], hub, "depends_on"),
    ]
    for source, target, kind in links:
        clock.advance(minutes=1)
        await alice.link_entries(from_entry_id=source, to_entry_id=target, relation_type=kind)
    await alice.deprecate_entry(entry_id=ends["old"], reason="replaced")

    bob = Principal("bob")
    seen = await apollo.get_relations(hub, principal=bob)
    assert [
        ("out", "supersedes", ends["old"], Status.ARCHIVED),
        ("out", "has_a", ends["part"], Status.CANDIDATE),
        ("in", "causes", ends["cause"], Status.CANDIDATE),
    ] == [(r.direction, r.relation_type, r.id, r.status) for r in seen]
    assert "the cause entry of the hub" == seen[-1].content
    assert 1.0 == seen[0].weight and seen[0].created_at is not None
    mine = await apollo.get_relations(hub, principal=Principal("alice"))
    assert {("out", ends["secret"]), ("in", ends["secret"])} <= {(r.direction, r.id) for r in mine}
    with pytest.raises(NotFound):
        await apollo.get_relations(ends["secret"], principal=bob)
    with pytest.raises(NotFound):
        await apollo.get_relations(uuid.uuid4())
    with pytest.raises(ValidationError) as err:
        await apollo.get_relations("not-an-id")
    assert "entry_id" == err.value.field


async def test_link_entries_validates(make_apollo):
    apollo = await make_apollo()
    ids = await _chain(apollo, 2)
    client = apollo.client("curator")
    with pytest.raises(ValidationError) as unknown:
        await client.link_entries(from_entry_id=ids[0], to_entry_id=ids[1], relation_type="likes")
    assert "relation_type" == unknown.value.field  # the field the caller filled in
    with pytest.raises(ValidationError):
        await client.link_entries(from_entry_id=ids[0], to_entry_id=ids[0], relation_type="extends")
    with pytest.raises(NotFound):
        await client.link_entries(
            from_entry_id=ids[0], to_entry_id=uuid.uuid4(), relation_type="extends"
        )
    again = await client.link_entries(
        from_entry_id=ids[0], to_entry_id=ids[1], relation_type="depends_on"
    )
    assert not again.created


async def test_deprecate(make_apollo):
    apollo = await make_apollo()
    client = apollo.client("agent-1")
    r = await client.store_knowledge(content="superseded advice", context={"k": "v"})
    done = await client.deprecate_entry(entry_id=r.entry_id, reason="superseded by RFC 7938")
    assert done.changed and done.status == Status.ARCHIVED
    entry = await apollo.get_entry(r.entry_id)
    assert dict(entry.source_context) == {"k": "v", "deprecation_reason": "superseded by RFC 7938"}
    assert entry.source.agent_id == "agent-1"
    repeat = await client.deprecate_entry(entry_id=r.entry_id, reason="superseded by RFC 7938")
    assert not repeat.changed
    with pytest.raises(NotFound):
        await client.deprecate_entry(entry_id=uuid.uuid4(), reason="x")
    with pytest.raises(ValidationError):
        await client.deprecate_entry(entry_id=r.entry_id, reason="  ")


@pytest.mark.parametrize("factor", [-0.1, 1.01, math.nan, math.inf, "half", None])
async def test_force_decay_rejects_bad_factors(make_apollo, factor):
    apollo = await make_apollo()
    r = await apollo.client("a").store_knowledge(content="stays as it is")
    with pytest.raises(ValidationError) as err:
        await apollo.client("a", ADMIN).force_decay(factor=factor)
    assert err.value.field == "factor"
    assert (await apollo.get_entry(r.entry_id)).confidence == 0.5


async def test_force_decay_scales_and_never_archives(make_apollo):
    apollo = await make_apollo()
    client = apollo.client("a", ADMIN)
    live = await client.store_knowledge(content="a live entry")
    dead = await client.store_knowledge(content="an archived entry")
    await client.deprecate_entry(entry_id=dead.entry_id, reason="old")
    result = await client.force_decay(factor=0.1)
    assert result.affected == 1
    entry = await apollo.get_entry(live.entry_id)
    assert pytest.approx(0.05) == entry.confidence
    assert entry.status == Status.CANDIDATE
    assert (await apollo.get_entry(dead.entry_id)).confidence == 0.5


async def test_archive_stale_uses_last_touch(make_apollo):
    clock = ManualClock(EPOCH)
    apollo = await make_apollo(clock=clock)
    client = apollo.client("a", ADMIN)
    old = await client.store_knowledge(content="written long ago")
    clock.advance(days=50)
    touched = await client.store_knowledge(content="written later")
    clock.advance(days=45)
    with pytest.raises(ValidationError):
        await client.archive_stale(days=-1)
    result = await client.archive_stale(days=90)
    assert result.affected == 1
    assert (await apollo.get_entry(old.entry_id)).status == Status.ARCHIVED
    assert (await apollo.get_entry(touched.entry_id)).status == Status.CANDIDATE


async def _disputed(apollo):
    from apollo_domain.lifecycle import dispute

    r = await apollo.client("claude-a").store_knowledge(content="a contested claim")
    async with apollo.store.unit_of_work() as uow:
        entry = await uow.entries.get(r.entry_id)
        await uow.entries.update(dispute(entry, entry.updated_at))
        await uow.commit()
    return r.entry_id


@pytest.mark.parametrize(
    ("resolution", "status"),
    [("accept", Status.CONFIRMED), ("keep", Status.CONFIRMED), ("reject", Status.ARCHIVED)],
)
async def test_resolve_dispute(make_apollo, resolution, status):
    apollo = await make_apollo()
    entry_id = await _disputed(apollo)
    result = await apollo.client("moderator", ADMIN).resolve_dispute(
        entry_id=entry_id, resolution=resolution
    )
    assert status == result.status
    entry = await apollo.get_entry(entry_id)
    assert resolution == entry.source_context["dispute_resolution"]
    assert entry.confidence == 0.5
    assert (entry.confirmed_at is not None) == (status is Status.CONFIRMED)
    async with apollo.store.unit_of_work() as uow:
        cred = await uow.credibility.get("claude-a")
    assert ((cred.alpha, cred.beta) if status is Status.CONFIRMED else (cred.beta, cred.alpha)) == (
        2.0,
        1.0,
    )


async def test_resolve_dispute_failures_change_nothing(make_apollo):
    apollo = await make_apollo()
    entry_id = await _disputed(apollo)
    client = apollo.client("moderator", ADMIN)
    with pytest.raises(UnknownResolution):
        await client.resolve_dispute(entry_id=entry_id, resolution="maybe")
    assert (await apollo.get_entry(entry_id)).status == Status.DISPUTED
    fresh = await client.store_knowledge(content="an undisputed claim")
    with pytest.raises(InvalidTransition):
        await client.resolve_dispute(entry_id=fresh.entry_id, resolution="accept")
    entry = await apollo.get_entry(fresh.entry_id)
    assert entry.status == Status.CANDIDATE and "dispute_resolution" not in entry.source_context
    with pytest.raises(NotFound):
        await client.resolve_dispute(entry_id=uuid.uuid4(), resolution="accept")


async def test_decay_catches_up_after_missed_runs(make_apollo):
    clock = ManualClock(EPOCH)
    apollo = await make_apollo(clock=clock)
    r = await apollo.client("a").store_knowledge(content="slowly forgotten")
    clock.advance(hours=10)
    await apollo.run_decay_cycle()
    clock.advance(hours=30)  # two-and-more cycles missed
    await apollo.run_decay_cycle()
    await apollo.run_decay_cycle()  # same instant: nothing more
    assert (
        pytest.approx(0.5 * 0.998**40, rel=1e-9) == (await apollo.get_entry(r.entry_id)).confidence
    )


async def test_decay_archives_below_threshold(make_apollo):
    clock = ManualClock(EPOCH)
    apollo = await make_apollo(clock=clock)
    r = await apollo.client("a").store_knowledge(content="will fade away")
    clock.advance(hours=24 * 34)  # 0.5 · 0.998^816 ≈ 0.098
    result = await apollo.run_decay_cycle()
    assert result.archived == 1
    entry = await apollo.get_entry(r.entry_id)
    assert entry.status == Status.ARCHIVED
    assert entry.source_context["archive_reason"] == "decayed"
