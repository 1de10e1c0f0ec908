"""Reading entries as the caller may see them: one entry, its evidence, and the counts over
the visible ones."""

from __future__ import annotations

from attrs import evolve

from ..commands import GetEntry, GetEvidence, Stats
from ..errors import NotFound
from ..model import Entry, Evidence
from ..ports import StoreStats
from ..rules import is_visible
from .context import Caller, Deps, resolve_viewer
from .graph import parse_id


async def get_entry(deps: Deps, caller: Caller, command: GetEntry) -> Entry:
    """The stored entry, when the caller may see it (the embedding program, calling as
    itself, sees every one); unknown and invisible ids are :class:`NotFound` alike. Who
    wrote it is not shown to an anonymous caller (``owner_id`` and ``submitted_by`` are
    cleared)."""
    target = parse_id("entry_id", command.entry_id)
    async with deps.store.unit_of_work() as uow:
        entry = await uow.entries.get(target)
    if entry is None:
        raise NotFound(f"entry {target} not found")
    if caller.trusted:
        return entry
    viewer = await resolve_viewer(deps.store.directory, caller.principal)
    if not is_visible(entry, viewer):
        raise NotFound(f"entry {target} not found")
    if caller.principal.id is None:
        entry = evolve(entry, owner_id=None, source=evolve(entry.source, submitted_by=None))
    return entry


async def get_evidence(deps: Deps, caller: Caller, command: GetEvidence) -> list[Evidence]:
    """The evidence recorded on an entry the caller may see (:func:`get_entry`'s rule),
    origin first, in the order recorded."""
    await get_entry(deps, caller, GetEntry(entry_id=command.entry_id))
    async with deps.store.unit_of_work() as uow:
        return await uow.evidence.for_entry(parse_id("entry_id", command.entry_id))


async def stats(deps: Deps, caller: Caller, command: Stats) -> StoreStats:
    """Counts over the entries the caller may see."""
    viewer = await resolve_viewer(deps.store.directory, caller.principal)
    async with deps.store.unit_of_work() as uow:
        return await uow.entries.stats(viewer, deps.clock.now())
