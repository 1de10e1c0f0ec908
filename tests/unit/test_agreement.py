"""The agreement rule (docs/concepts.md, "The rules in one page") over random stories.

A story: sources say one fact — its exact text (up to case) or a restatement at cosine
0.97 — in some content type; then perhaps a confirmed neighbour (cosine 0.92) appears;
then the corroboration checker runs once. The entry confirms iff two mutually
independent sources agree on it — a source agrees when every corroboration rule allows
it (same content type, independent of every source already recorded) — or a confirmed
neighbour corroborates it. No source counts twice; sources that are not independent of
one another never confirm anything.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from itertools import combinations
from uuid import uuid4

from attrs import frozen
from hypothesis import event, given, settings

from apollo_adapters.clock import ManualClock
from apollo_app import Apollo
from apollo_domain.model import (
    AccessScope,
    ContentType,
    Entry,
    Evidence,
    EvidenceKind,
    Outcome,
    SourceRef,
    Status,
)
from apollo_domain.normalize import content_hash
from apollo_domain.rules import agreeing_sources, independent, independent_of_all
from tests.strategies import (
    Submission,
    agreement_sources,
    make_entry,
    neighbour_sources,
    source_lists,
    submission_lists,
)
from tests.support import KeyedEmbedder, at_cosine

FACT = "Kafka partitions are ordered logs"
RESTATED = "Kafka's partitions are each an ordered log"
NEIGHBOUR = "Each Kafka partition keeps its records in order"
TEXTS = {"same": FACT, "shouted": FACT.upper(), "restated": RESTATED}
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


@frozen
class Told:
    """What a story did: each submission's outcome (or rejection reason), and how the
    entry ended: ``agreement``, ``neighbour`` or ``candidate``."""

    outcomes: tuple[str, ...]
    ending: str
    agreement: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()


def _label(outcome: Outcome, reason: str | None) -> str:
    if outcome is Outcome.REJECTED:
        return (reason or "").split(":")[0]
    return outcome.value if reason is None else f"{outcome.value}: {reason}"


async def _tell(story: Sequence[Submission], neighbour: SourceRef | None) -> Told:
    embedder = KeyedEmbedder(16)
    for text in (FACT, FACT.upper()):
        embedder.set(text, embedder.basis(0))
    embedder.set(RESTATED, at_cosine(embedder.basis(0), 0.97, 1))
    clock = ManualClock(EPOCH)
    async with Apollo.in_memory(embedder=embedder, clock=clock) as apollo:
        outcomes = []
        first = None
        for said in story:
            result = await apollo.client(said.source.agent_id).store_knowledge(
                content=TEXTS[said.wording],
                content_type=said.content_type.value,
                source_channel=said.source.channel,
            )
            first = first or result.entry_id
            outcomes.append(_label(result.outcome, result.reason))
            clock.advance(seconds=1)
        assert first is not None
        entry = await apollo.get_entry(first)
        if neighbour is not None:
            await _confirmed_neighbour(apollo, entry, neighbour, embedder)
        report = await apollo.check_corroboration()
        entry = await apollo.get_entry(first)
        evidence = tuple(await apollo.get_evidence(first))
    if entry.status is Status.CANDIDATE:
        return Told(tuple(outcomes), "candidate", evidence=evidence)
    assert Status.CONFIRMED == entry.status
    if report.bootstrapped:
        agreement = tuple(entry.source_context["bootstrap"]["agreement"])
        return Told(tuple(outcomes), "agreement", agreement, evidence)
    return Told(tuple(outcomes), "neighbour", evidence=evidence)


async def _confirmed_neighbour(
    apollo: Apollo, entry: Entry, source: SourceRef, embedder: KeyedEmbedder
) -> None:
    """A confirmed entry at cosine 0.92 to ``entry``, in its domain and content type."""
    vector = at_cosine((await embedder.embed([entry.content]))[0], 0.92, 3)
    now = apollo.deps.clock.now()
    neighbour = make_entry(
        id=uuid4(),
        content=NEIGHBOUR,
        content_hash=content_hash(NEIGHBOUR),
        content_type=entry.content_type,
        knowledge_domain=entry.knowledge_domain,
        tags=(),
        source=source,
        access_scope=AccessScope.GLOBAL,
        owner_id=None,
        created_at=now,
        updated_at=now,
        confirmed_at=now,
        embedding=tuple(vector),
    )
    async with apollo.store.unit_of_work() as uow:
        await uow.entries.add(neighbour)
        await uow.evidence.add(Evidence(neighbour.id, source, 1.0, now, EvidenceKind.ORIGIN))
        await uow.commit()


def _expected(story: Sequence[Submission], neighbour: SourceRef | None) -> Told:
    """The rules of docs/concepts.md, "The rules in one page", step by step, as a reference
    model."""
    origin, *rest = story
    recorded = [origin.source]  # every source with evidence on the entry
    agreed = [origin.source]  # the origin and the sources whose agreement was recorded
    exact = {"same", "shouted"} if origin.wording != "restated" else {"restated"}
    outcomes = ["created"]
    for said in rest:
        independent_now = independent_of_all(said.source, recorded)
        allowed = independent_now and said.content_type is origin.content_type
        if allowed:
            outcomes.append("deduplicated: agreement recorded")
            recorded.append(said.source)
            agreed.append(said.source)
        elif said.wording in exact:
            outcomes.append("deduplicated: exact duplicate")
            if said.source not in recorded:
                recorded.append(said.source)
        else:
            outcomes.append("near_duplicate" if not independent_now else "low_novelty")
    if len(agreed) >= 2:
        return Told(tuple(outcomes), "agreement", tuple(s.agent_id for s in agreed))
    if neighbour is not None and independent_of_all(neighbour, recorded):
        return Told(tuple(outcomes), "neighbour")
    return Told(tuple(outcomes), "candidate")


@settings(max_examples=150, deadline=None)
@given(story=submission_lists, neighbour=neighbour_sources)
def test_an_entry_confirms_iff_independent_sources_agree_or_a_neighbour_corroborates(
    story: list[Submission], neighbour: SourceRef | None
) -> None:
    told = asyncio.run(_tell(story, neighbour))
    event(f"ends {told.ending}")
    expected = _expected(story, neighbour)
    assert expected.outcomes == told.outcomes
    assert (expected.ending, expected.agreement) == (told.ending, told.agreement)


@settings(max_examples=100, deadline=None)
@given(story=submission_lists)
def test_no_source_counts_twice_and_dependent_sources_never_confirm(
    story: list[Submission],
) -> None:
    told = asyncio.run(_tell(story, None))
    keys = [(e.source.agent_id, e.source.provider, e.source.channel) for e in told.evidence]
    assert len(keys) == len(set(keys)), "one source recorded twice"
    agreeing = [e.source for e in told.evidence if e.kind is not EvidenceKind.DUPLICATE]
    assert all(independent(a, b) for a, b in combinations(agreeing, 2))
    sources = {said.source for said in story}
    if all(not independent(a, b) for a, b in combinations(sources, 2)):
        event("no two sources independent of each other")
        assert "candidate" == told.ending
    else:
        event("two sources independent of each other")
    if told.ending == "agreement":
        assert len(set(told.agreement)) == len(told.agreement) >= 2
        assert set(told.agreement) <= {s.agent_id for s in sources}


@given(origin=agreement_sources, recorded=source_lists)
def test_agreeing_sources_are_mutually_independent_and_start_at_the_origin(
    origin: SourceRef, recorded: list[SourceRef]
) -> None:
    entry = make_entry(source=origin, status=Status.CANDIDATE)
    evidence = [
        Evidence(entry.id, s, 1.0, EPOCH, kind)
        for s, kind in zip(
            recorded,
            [EvidenceKind.AGREEMENT, EvidenceKind.DUPLICATE, EvidenceKind.CORROBORATION] * 2,
            strict=False,
        )
    ]
    agreeing = agreeing_sources(entry, evidence)
    assert origin == agreeing[0]
    assert all(independent(a, b) for a, b in combinations(agreeing, 2))
    counted = [e.source for e in evidence if e.kind is not EvidenceKind.DUPLICATE]
    assert all(s in counted for s in agreeing[1:])


def test_a_duplicate_never_agrees() -> None:
    """Evidence recorded as a duplicate (it passed no corroboration rule) is not counted,
    even from a source independent of the origin."""
    entry = make_entry(source=SourceRef("claude-1", "claude"), content_type=ContentType.FACT)
    duplicate = Evidence(entry.id, SourceRef("openai-1", "openai"), 1.0, EPOCH, "deduplication")
    assert [entry.source] == agreeing_sources(entry, [duplicate])
