"""Erasure of one agent's contributions (docs/architecture.md, "The use cases")."""

from __future__ import annotations

from attrs import evolve

from ..commands import EraseAgent
from ..errors import ValidationError
from ..model import Entry, SourceRef, Status
from ..ports import UnitOfWork
from ..redaction import REDACTED
from ..results import ErasureResult
from .context import Caller, Deps, first_application, subject_agent


async def erase_agent(
    deps: Deps, caller: Caller, command: EraseAgent, idempotency_key: str | None = None
) -> ErasureResult:
    """Remove every trace of the agent ``target_agent_id``, in one transaction, its entries
    read under their row locks:

    - its entries that are not confirmed are deleted (with their evidence and relations);
    - its confirmed entries are redacted: source ``redacted`` with provider, channel and
      submitter cleared, its id gone from their ``source_context``. The owner stays, so a
      private entry stays its owner's, and two redacted entries never collide in one
      deduplication partition;
    - the evidence it gave on other entries is deleted, its origin evidence redacted;
    - its credibility record and expertise rows are deleted, and when it earned retrieval
      boosts;
    - its access-log rows are rewritten to ``redacted``;
    - its episodes (the texts it gave ``store_text``) are deleted, their text with them;
    - the entity mentions and graph edges only its deleted entries supported go;
    - its id is replaced by ``redacted`` wherever a ``source_context`` of an entry or a
      relation names it (caller context, GAS routing, ``linked_by``).

    Idempotent: erasing the same agent again changes nothing and returns zero counts; so
    does a redelivery of ``idempotency_key`` (recorded with the erasure).
    """
    agent = subject_agent(command.target_agent_id)
    if agent == REDACTED:
        raise ValidationError("agent_id", f"{REDACTED!r} stands for erased agents")
    async with deps.store.unit_of_work() as uow:
        now = deps.clock.now()
        if not await first_application(uow, "erase_agent", idempotency_key, now):
            return ErasureResult(agent, 0, 0)
        entries = await _locked(uow, await uow.entries.by_agent(agent))
        doomed = [e.id for e in entries if e.status is not Status.CONFIRMED]
        deleted = await uow.entries.delete(doomed) if doomed else 0
        kept = [e for e in entries if e.status is Status.CONFIRMED]
        for entry in kept:
            await uow.entries.update(evolve(entry, source=SourceRef(REDACTED), updated_at=now))
        contexts = await uow.entries.redact_context(agent, REDACTED, now)
        contexts += await uow.relations.redact_context(agent, REDACTED)
        evidence = await uow.evidence.forget_agent(agent, SourceRef(REDACTED))
        credibility = int(await uow.credibility.forget(agent))
        expertise = await uow.expertise.forget_agent(agent)
        await uow.entries.forget_earner(agent)
        access_log = await uow.access_log.redact_agent(agent, REDACTED)
        episodes = await uow.episodes.forget_agent(agent)
        await uow.graph.prune()  # edges and entities only the deleted entries supported
        await uow.commit()
    return ErasureResult(
        agent,
        deleted,
        len(kept),
        evidence=evidence,
        credibility=credibility,
        expertise=expertise,
        access_log=access_log,
        contexts=contexts,
        episodes=episodes,
    )


async def _locked(uow: UnitOfWork, entries: list[Entry]) -> list[Entry]:
    """``entries`` as they are under their row locks (taken in id order), those gone
    meanwhile left out: whether one is deleted or redacted, and the redacted entry written
    back, follow its state as of the lock, so a concurrent change to it is never lost."""
    locked = await uow.entries.lock_many([entry.id for entry in entries])
    return [locked[entry_id] for entry_id in sorted(locked, key=str)]
