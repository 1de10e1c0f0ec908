"""Sources: a source's standing (its credibility) and the labels that override it
(docs/concepts.md, "The
rules in one page")."""

from __future__ import annotations

from ..commands import GetSource, LabelSource, UnlabelSource
from ..credibility import SourceCredibility, parse_label
from ..ports import (
    AccessLogRecord,
    CredibilityRecord,
    UnitOfWork,
)
from ..results import (
    SourceReport,
)
from .context import (
    Caller,
    Deps,
    first_application,
    subject_agent,
)


async def current_credibility(uow: UnitOfWork, agent_id: str) -> float:
    """The credibility of the source ``agent_id`` as the store holds it now."""
    r = await uow.credibility.get(agent_id)
    return SourceCredibility(r.agent_id, r.alpha, r.beta, r.label).credibility


def source_report(record: CredibilityRecord) -> SourceReport:
    belief = SourceCredibility(record.agent_id, record.alpha, record.beta, record.label)
    return SourceReport(
        record.agent_id,
        record.alpha,
        record.beta,
        belief.credibility,
        record.label,
        record.validated,
        record.refuted,
    )


async def get_source(deps: Deps, caller: Caller, command: GetSource) -> SourceReport:
    """A source's standing: α, β, credibility, label, validated and refuted counts."""
    agent = subject_agent(command.target_agent_id)
    async with deps.store.reading() as uow:
        return source_report(await uow.credibility.get(agent))


async def label_source(
    deps: Deps, caller: Caller, command: LabelSource, idempotency_key: str | None = None
) -> SourceReport:
    """Label a source (``moderator``/``admin`` → credibility 1.0, ``troll``/``flagged`` →
    0.05); α, β and the counts are kept, so removing the label restores them. A redelivery
    of ``idempotency_key`` changes nothing and reports the source as it is now."""
    agent, label = subject_agent(command.target_agent_id), parse_label(command.label)
    return await _set_label(deps, caller, agent, label, "label_source", idempotency_key)


async def unlabel_source(
    deps: Deps, caller: Caller, command: UnlabelSource, idempotency_key: str | None = None
) -> SourceReport:
    """Remove a source's label: its credibility is α / (α + β) again. A redelivery of
    ``idempotency_key`` changes nothing and reports the source as it is now."""
    agent = subject_agent(command.target_agent_id)
    return await _set_label(deps, caller, agent, None, "unlabel_source", idempotency_key)


async def _set_label(
    deps: Deps, caller: Caller, agent: str, label: str | None, kind: str, key: str | None
) -> SourceReport:
    async with deps.store.unit_of_work() as uow:
        if not await first_application(uow, kind, key, deps.clock.now()):
            return source_report(await uow.credibility.get(agent))
        record = await uow.credibility.set_label(agent, label)
        await uow.access_log.record(
            [
                AccessLogRecord(
                    "label_source",
                    caller.agent_id,
                    None,
                    deps.clock.now(),
                    {"source": agent, "label": label},
                )
            ]
        )
        await uow.commit()
    return source_report(record)
