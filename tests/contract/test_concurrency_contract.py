"""Concurrent use cases on one entry, on every store: the same observable outcome.

Each test forces one interleaving with :class:`tests.support.Interleaving`: the first
actor is paused at a named point after its read; the second runs until it finishes or
waits for a lock the first holds; then the first is released. A store that reads and
writes without a lock lets the second finish and the first overwrite it (a lost
update); a correct one makes the second wait and see the first's commit (DESIGN §4
"Concurrency").
"""

from __future__ import annotations

from apollo_app import InvalidTransition, Principal, Status
from apollo_domain.lifecycle import dispute

ADMIN = Principal("ops", role="admin")


async def _disputed(apollo, content: str = "a contested claim"):
    r = await apollo.client("claude-a").store_knowledge(content=content)
    async with apollo.store.unit_of_work() as uow:
        entry = await uow.entries.get(r.entry_id)
        await uow.entries.update(dispute(entry, entry.updated_at))
        await uow.commit()
    return r.entry_id


async def test_deprecate_racing_resolve_keeps_both_or_refuses_one(make_apollo):
    """Deprecate has read the disputed entry; resolve(accept) runs meanwhile. Resolve
    must wait and then fail (the entry is archived, no longer disputed): the deprecation
    and its reason survive, and credibility is untouched."""
    apollo = await make_apollo(interleaved=True)
    points = apollo.deps.store
    entry_id = await _disputed(apollo)
    admin = apollo.client("moderator", ADMIN)

    gate = points.hold("deprecate", "entries.update")
    deprecating = points.run(
        "deprecate", admin.deprecate_entry(entry_id=entry_id, reason="superseded")
    )
    await points.reached("deprecate", "entries.update")
    resolving = points.run("resolve", admin.resolve_dispute(entry_id=entry_id, resolution="accept"))
    blocked = await points.blocked_or_done(resolving)
    gate.set()
    deprecated, resolved = await points.finish(deprecating, resolving)

    assert blocked, "resolve ran to completion while deprecate held its read"
    assert not isinstance(deprecated, BaseException)
    assert isinstance(resolved, InvalidTransition)
    entry = await apollo.get_entry(entry_id)
    assert Status.ARCHIVED == entry.status
    assert "superseded" == entry.source_context["deprecation_reason"]
    assert "dispute_resolution" not in entry.source_context
    async with apollo.store.unit_of_work() as uow:
        credibility = await uow.credibility.get("claude-a")
    assert (1.0, 1.0) == (credibility.alpha, credibility.beta)
