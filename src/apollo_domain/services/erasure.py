"""Erasure of one agent's contributions (DESIGN §4 "Erasure")."""

from __future__ import annotations

from attrs import evolve

from ..errors import ValidationError
from ..model import SourceRef, Status
from ..results import ErasureResult
from .context import Deps

REDACTED = "redacted"


async def erase_agent(deps: Deps, agent_id: object) -> ErasureResult:
    """Delete the agent's non-confirmed entries; redact its confirmed ones (source agent
    ``redacted``, provider/channel/submitter/owner cleared); drop the evidence it gave on
    other entries and redact its origin evidence; forget its expertise, and the entity
    mentions and graph edges only its deleted entries supported. One transaction."""
    if not isinstance(agent_id, str) or not agent_id.strip():
        raise ValidationError("agent_id", "must be a non-empty string")
    agent = agent_id.strip()
    async with deps.store.unit_of_work() as uow:
        now = deps.clock.now()
        entries = await uow.entries.by_agent(agent)
        doomed = [e.id for e in entries if e.status is not Status.CONFIRMED]
        deleted = await uow.entries.delete(doomed) if doomed else 0
        redacted = 0
        for entry in entries:
            if entry.status is Status.CONFIRMED:
                await uow.entries.update(
                    evolve(entry, source=SourceRef(REDACTED), owner_id=None, updated_at=now)
                )
                redacted += 1
        await uow.evidence.forget_agent(agent, SourceRef(REDACTED))
        await uow.expertise.forget_agent(agent)
        await uow.graph.prune()  # edges and entities only the deleted entries supported
        await uow.commit()
    return ErasureResult(agent, deleted, redacted)
