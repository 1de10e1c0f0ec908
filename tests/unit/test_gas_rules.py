"""GAS relation gating, deposit accounting and entity extraction (docs/architecture.md, "The
use cases")."""

from __future__ import annotations

from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apollo_domain.gas_rules import (
    DepositCounts,
    FactDeposit,
    ProposedRelation,
    RelationDecision,
    RelationVerdict,
    coerce_facts,
    extract_entities,
    gate_relation,
    unambiguous_deposits,
)
from apollo_domain.model import AccessScope, Outcome, RelationType

FACT_0, FACT_1, FACT_2, TARGET, OTHER = (UUID(int=200 + i) for i in range(5))
GLOBAL, TEAM = AccessScope.GLOBAL, AccessScope.TEAM
GATE = 0.7

DEPOSITS = [
    FactDeposit(0, Outcome.CREATED, FACT_0, GLOBAL),
    FactDeposit(1, Outcome.DEDUPLICATED, FACT_1, GLOBAL),
    FactDeposit(2, Outcome.CORROBORATED, FACT_2, GLOBAL),
]


def decide(
    proposal: ProposedRelation,
    deposits: list[FactDeposit] = DEPOSITS,
    target_scope: AccessScope | None = GLOBAL,
    seen: set[tuple[UUID, UUID, RelationType]] | None = None,
) -> RelationDecision:
    return gate_relation(
        proposal,
        unambiguous_deposits(deposits),
        target_scope,
        set() if seen is None else seen,
        confidence_gate=GATE,
    )


def proposal(
    fact: int = 0, target: UUID = TARGET, kind: str = "causes", confidence: float = 0.8
) -> ProposedRelation:
    return ProposedRelation(fact, target, kind, confidence)


# -- gating -----------------------------------------------------------------------------


def test_a_good_relation_is_persisted_from_the_fact_entry() -> None:
    """Above the gate, supported type, unambiguous deposit, existing target in scope: persist."""
    expected = RelationDecision(RelationVerdict.PERSIST, "", RelationType.CAUSES, FACT_0)
    assert expected == decide(proposal())


@pytest.mark.parametrize(
    ("confidence", "expected"),
    [(0.7, RelationVerdict.PERSIST), (0.6999, RelationVerdict.SKIP), (0.5, RelationVerdict.SKIP)],
)
def test_confidence_gate_is_inclusive(confidence: float, expected: RelationVerdict) -> None:
    """Relations need confidence ≥ gate; below it they are skipped."""
    assert expected == decide(proposal(confidence=confidence)).verdict


def test_the_fallback_relation_is_skipped_by_the_gate() -> None:
    """Without an LLM relations fall back to similar_to at 0.5, which the gate skips."""
    assert RelationVerdict.SKIP == decide(proposal(kind="similar_to", confidence=0.5)).verdict


@pytest.mark.parametrize("kind", ["likes", "", "is a"])
def test_unsupported_relation_types_are_skipped(kind: str) -> None:
    """A type outside the ten relation types is skipped."""
    assert RelationVerdict.SKIP == decide(proposal(kind=kind)).verdict


@pytest.mark.parametrize("kind", ["IS_A", ":depends_on", " supersedes "])
def test_relation_types_are_normalized(kind: str) -> None:
    """Case, a leading colon and spaces do not make a type unsupported."""
    assert RelationVerdict.PERSIST == decide(proposal(kind=kind)).verdict


def test_an_ambiguous_deposit_fails_its_relations() -> None:
    """Two facts landing on the same entry: neither owns it, so their relations fail."""
    deposits = [
        FactDeposit(0, Outcome.CREATED, FACT_0, GLOBAL),
        FactDeposit(1, Outcome.DEDUPLICATED, FACT_0, GLOBAL),
        FactDeposit(2, Outcome.CREATED, FACT_2, GLOBAL),
    ]
    verdicts = [decide(proposal(fact=i), deposits).verdict for i in range(3)]
    assert [RelationVerdict.FAIL, RelationVerdict.FAIL, RelationVerdict.PERSIST] == verdicts


@pytest.mark.parametrize(
    "deposit",
    [
        FactDeposit(0, Outcome.REJECTED, None, GLOBAL),
        FactDeposit(0, None, None, GLOBAL),
        FactDeposit(0, Outcome.CREATED, None, GLOBAL),
    ],
    ids=["rejected", "raised", "no-entry-id"],
)
def test_a_failed_deposit_fails_its_relations(deposit: FactDeposit) -> None:
    """A fact that was not deposited cannot be related."""
    assert RelationVerdict.FAIL == decide(proposal(), [deposit]).verdict


def test_an_unknown_fact_index_fails() -> None:
    """A relation for a fact the batch does not have fails."""
    assert RelationVerdict.FAIL == decide(proposal(fact=7)).verdict


def test_a_missing_target_fails() -> None:
    """A target that does not exist (or is invisible) fails the relation."""
    assert RelationVerdict.FAIL == decide(proposal(), target_scope=None).verdict


def test_a_self_link_is_skipped() -> None:
    """A fact related to the entry it was deposited as is skipped."""
    assert RelationVerdict.SKIP == decide(proposal(target=FACT_0)).verdict


def test_a_target_in_another_scope_is_skipped() -> None:
    """Relations never cross access scopes."""
    assert RelationVerdict.SKIP == decide(proposal(), target_scope=TEAM).verdict


def test_a_duplicate_in_the_batch_is_skipped() -> None:
    """The same edge proposed twice is persisted once; another type or target is not a duplicate."""
    seen: set[tuple[UUID, UUID, RelationType]] = set()
    verdicts = [
        decide(p, seen=seen).verdict
        for p in (
            proposal(),
            proposal(kind=":CAUSES", confidence=0.9),
            proposal(kind="extends"),
            proposal(target=OTHER),
        )
    ]
    expected = [
        RelationVerdict.PERSIST,
        RelationVerdict.SKIP,
        RelationVerdict.PERSIST,
        RelationVerdict.PERSIST,
    ]
    assert expected == verdicts


def test_skipped_and_failed_relations_are_not_remembered() -> None:
    """Only persisted edges enter the batch's seen set."""
    seen: set[tuple[UUID, UUID, RelationType]] = set()
    decide(proposal(confidence=0.1), seen=seen)
    decide(proposal(), target_scope=None, seen=seen)
    assert set() == seen


# -- unambiguous deposits ---------------------------------------------------------------

deposits_strategy = st.lists(
    st.builds(
        FactDeposit,
        index=st.integers(min_value=0, max_value=20),
        outcome=st.none() | st.sampled_from(Outcome),
        entry_id=st.none() | st.sampled_from([FACT_0, FACT_1, FACT_2]),
        access_scope=st.sampled_from(AccessScope),
    ),
    max_size=8,
    unique_by=lambda d: d.index,
)


@given(deposits_strategy)
def test_unambiguous_deposits_are_successful_and_alone_on_their_entry(
    deposits: list[FactDeposit],
) -> None:
    """Kept: successful deposits whose entry id no other successful deposit shares."""
    landed = [d.entry_id for d in deposits if d.succeeded]
    expected = {d.index: d for d in deposits if d.succeeded and landed.count(d.entry_id) == 1}
    assert expected == unambiguous_deposits(deposits)


# -- counts -----------------------------------------------------------------------------


def test_deposit_counts_accounting() -> None:
    """Successful ingests (deduplication included) count as deposited facts or synthesis;
    rejected or raised ingests as failed; relation verdicts each have their counter."""
    counts = DepositCounts()
    counts.count_ingest(Outcome.CREATED, FACT_0, synthesis=False)
    counts.count_ingest(Outcome.DEDUPLICATED, FACT_1, synthesis=False)
    counts.count_ingest(Outcome.CORROBORATED, FACT_2, synthesis=False)
    counts.count_ingest(Outcome.CREATED, OTHER, synthesis=True)
    counts.count_ingest(Outcome.REJECTED, None, synthesis=False)
    counts.count_ingest(None, None, synthesis=True)
    counts.count_ingest(Outcome.CREATED, None, synthesis=False)
    for verdict in (
        RelationVerdict.PERSIST,
        RelationVerdict.PERSIST,
        RelationVerdict.SKIP,
        RelationVerdict.FAIL,
        RelationVerdict.SKIP,
        RelationVerdict.SKIP,
    ):
        counts.count_relation(verdict)
    expected = {
        "deposited": 4,
        "facts": 3,
        "synthesis": 1,
        "failed": 3,
        "relations": 2,
        "relations_failed": 1,
        "relations_skipped": 3,
    }
    assert expected == counts.as_dict()


@given(
    st.lists(
        st.tuples(st.none() | st.sampled_from(Outcome), st.none() | st.just(FACT_0), st.booleans())
    ),
    st.lists(st.sampled_from(RelationVerdict)),
)
def test_every_ingest_and_relation_is_counted_once(
    ingests: list[tuple[Outcome | None, UUID | None, bool]], verdicts: list[RelationVerdict]
) -> None:
    """deposited = facts + synthesis; deposited + failed = ingests; relation counters sum up."""
    counts = DepositCounts()
    for outcome, entry_id, synthesis in ingests:
        counts.count_ingest(outcome, entry_id, synthesis=synthesis)
    for verdict in verdicts:
        counts.count_relation(verdict)
    expected = (counts.facts + counts.synthesis, len(ingests), len(verdicts))
    actual = (
        counts.deposited,
        counts.deposited + counts.failed,
        counts.relations + counts.relations_failed + counts.relations_skipped,
    )
    assert expected == actual


# -- comprehension output ---------------------------------------------------------------


def test_coerce_facts_keeps_well_formed_items() -> None:
    """Items need non-empty text content; content is stripped, the type kept as text."""
    items = [
        {"content": " BGP uses TCP port 179 ", "content_type": "fact"},
        {"content": "Redis is single-threaded"},
        {"content": "   "},
        {"content": 42},
        {"text": "no content key"},
        "not a mapping",
        {"content": "Typed by a symbol", "content_type": ":Concept"},
    ]
    expected = [
        ("BGP uses TCP port 179", "fact"),
        ("Redis is single-threaded", None),
        ("Typed by a symbol", ":Concept"),
    ]
    assert expected == coerce_facts(items)  # type: ignore[arg-type]


# -- entities ---------------------------------------------------------------------------


def test_extract_entities_finds_names_acronyms_and_identifiers() -> None:
    """Capitalised phrases, acronyms, snake_case and camelCase identifiers, in order, with
    leading stop words removed and duplicates (case-insensitive) dropped."""
    texts = [
        "PostgreSQL uses MVCC for snapshots. The Redis cache sets max_connections and maxPoolSize.",
        "redis is fast",
        "Apache   Kafka keeps logs; REDIS again",
    ]
    expected = ["PostgreSQL", "MVCC", "Redis", "max_connections", "maxPoolSize", "Apache Kafka"]
    assert expected == extract_entities(texts)


def test_extract_entities_ignores_plain_lowercase_prose() -> None:
    """Ordinary lowercase words are not entities."""
    assert [] == extract_entities(["the cache is warm and the queue is empty"])


@given(st.lists(st.text(max_size=80), max_size=5))
def test_extracted_entities_are_trimmed_and_distinct(texts: list[str]) -> None:
    """Every entity is at least two characters, has no stray whitespace, and appears once
    regardless of case."""
    found = extract_entities(texts)
    lowered = [name.lower() for name in found]
    assert len(set(lowered)) == len(lowered)
    for name in found:
        assert len(name) >= 2
        assert name == " ".join(name.split())
