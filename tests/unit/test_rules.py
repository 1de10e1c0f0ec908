"""Visibility, source independence and corroboration rules (docs/concepts.md, "The rules in one
page")."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest
from attrs import evolve
from hypothesis import Phase, event, find, given, settings
from hypothesis import strategies as st

from apollo_domain.model import (
    AccessScope,
    ContentType,
    Entry,
    Evidence,
    EvidenceKind,
    Principal,
    SourceRef,
    Status,
    Viewer,
)
from apollo_domain.results import EvidenceView
from apollo_domain.rules import (
    Corroborator,
    independent,
    independent_of_all,
    is_visible,
    may_corroborate,
)
from tests.strategies import (
    CORROBORATION_FIELDS,
    Attempt,
    anonymous_viewers,
    entries,
    make_entry,
    one_field_changed,
    owner_ids,
    source_lists,
    sources,
    viewers,
)

ENTRY_ID = UUID("00000000-0000-0000-0000-000000000001")
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

# -- deduplication ----------------------------------------------------------------------


@given(entries(), st.sampled_from(AccessScope), owner_ids, owner_ids)
def test_the_dedup_partition_ignores_the_owner_of_global_entries(
    entry: Entry, scope: AccessScope, one: str | None, other: str | None
) -> None:
    """The same content in the same scope is one key whoever owns a global entry, and one
    key per owner otherwise."""
    first = evolve(entry, access_scope=scope, owner_id=one)
    second = evolve(entry, access_scope=scope, owner_id=other)
    assert (scope is AccessScope.GLOBAL or one == other) == (first.dedup_key == second.dedup_key)


@given(entries(), entries())
def test_entries_of_different_content_or_scope_never_share_a_dedup_key(
    one: Entry, other: Entry
) -> None:
    if (one.content_hash, one.access_scope) != (other.content_hash, other.access_scope):
        assert one.dedup_key != other.dedup_key


# -- visibility -------------------------------------------------------------------------


@given(entries(scope=st.just(AccessScope.GLOBAL)), viewers)
def test_global_entries_are_visible_to_everyone(entry: Entry, viewer: Viewer) -> None:
    """A global entry is visible to any viewer, anonymous ones included."""
    assert is_visible(entry, viewer)


@given(entries(scope=st.just(AccessScope.PRIVATE)), viewers)
def test_private_entries_are_visible_only_to_their_owner(entry: Entry, viewer: Viewer) -> None:
    """Private: visible exactly when the viewer is resolved and is the owner."""
    expected = viewer.principal_id is not None and viewer.principal_id == entry.owner_id
    assert expected == is_visible(entry, viewer)


@given(entries(scope=st.just(AccessScope.TEAM)), viewers)
def test_team_entries_are_visible_to_the_owner_and_team_members(
    entry: Entry, viewer: Viewer
) -> None:
    """Team: visible to a resolved viewer that is the owner or shares a group with the owner."""
    expected = (
        viewer.principal_id is not None
        and entry.owner_id is not None
        and (viewer.principal_id == entry.owner_id or entry.owner_id in viewer.team_owners)
    )
    assert expected == is_visible(entry, viewer)


@given(entries(), anonymous_viewers)
def test_anonymous_viewers_see_only_global_entries(entry: Entry, viewer: Viewer) -> None:
    """An unresolved principal sees global entries and nothing else."""
    assert (entry.access_scope is AccessScope.GLOBAL) == is_visible(entry, viewer)


def test_team_membership_does_not_open_private_entries() -> None:
    """Sharing a group with the owner shows team entries, never private ones."""
    viewer = Viewer("bob", frozenset({"alice", "bob"}))
    private = make_entry(access_scope=AccessScope.PRIVATE, owner_id="alice")
    team = make_entry(access_scope=AccessScope.TEAM, owner_id="alice")
    assert (False, True) == (is_visible(private, viewer), is_visible(team, viewer))


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        (None, frozenset()),
        ("ops", frozenset({"ops"})),
        (["ops", "dev", "ops"], frozenset({"ops", "dev"})),
    ],
)
def test_principal_groups_become_a_frozenset(groups: object, expected: frozenset[str]) -> None:
    """Groups given as None, one name or any iterable are held as a frozenset of names."""
    assert expected == Principal("alice", groups).groups


def test_anonymous_principal_and_viewer_are_unresolved() -> None:
    """The anonymous principal and viewer carry no id, no groups and no team."""
    expected = (Principal(None), Viewer(None, frozenset()))
    assert expected == (Principal.anonymous(), Viewer.anonymous())


@pytest.mark.parametrize("status", list(Status))
def test_only_archived_entries_are_inactive(status: Status) -> None:
    """Active statuses are candidate, confirmed and disputed."""
    expected = status is not Status.ARCHIVED
    assert (expected, expected) == (status.is_active, make_entry(status=status).is_active)


# -- independence -----------------------------------------------------------------------


@given(sources, sources)
def test_independence_is_symmetric(a: SourceRef, b: SourceRef) -> None:
    """independent(a, b) == independent(b, a)."""
    assert independent(a, b) == independent(b, a)


@given(sources, sources)
def test_independence_is_irreflexive_on_agent(a: SourceRef, b: SourceRef) -> None:
    """Two sources with the same agent id are never independent, whatever else differs."""
    assert not independent(a, evolve(b, agent_id=a.agent_id))


@given(sources, sources)
def test_independence_is_exactly_the_three_rules(a: SourceRef, b: SourceRef) -> None:
    """Independent unless same agent, or both providers known and equal, or both channels
    non-empty and equal."""
    dependent = (
        a.agent_id == b.agent_id
        or ("unknown" not in (a.provider, b.provider) and a.provider == b.provider)
        or (bool(a.channel) and bool(b.channel) and a.channel == b.channel)
    )
    assert (not dependent) == independent(a, b)


@given(source_lists)
def test_evidence_views_count_each_source_independent_of_those_counted_before(
    found: list[SourceRef],
) -> None:
    """The evidence marked independent is pairwise independent, starts with the first
    (origin) source, and every unmarked source depends on one marked before it."""
    evidence = [
        Evidence(ENTRY_ID, source, 1.0, EPOCH, EvidenceKind.ORIGIN if i == 0 else "agreement")
        for i, source in enumerate(found)
    ]
    views = EvidenceView.list_of(evidence)
    assert [s.agent_id for s in found] == [v.agent_id for v in views]
    marked = [s for s, v in zip(found, views, strict=True) if v.independent]
    event(f"independent sources: {min(len(marked), 3)}{'+' if len(marked) > 3 else ''}")
    assert all(independent(a, b) for i, a in enumerate(marked) for b in marked[i + 1 :])
    if found:
        assert views[0].independent
    for i, (source, view) in enumerate(zip(found, views, strict=True)):
        if not view.independent:
            earlier = [s for s, v in zip(found[:i], views[:i], strict=True) if v.independent]
            assert not independent_of_all(source, earlier)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (SourceRef("agent-1", "claude"), SourceRef("agent-1", "openai", "x"), False),
        (SourceRef("claude-a", "claude"), SourceRef("claude-b", "claude"), False),
        (SourceRef("a", "openai", "slack"), SourceRef("b", "gemini", "slack"), False),
        (SourceRef("a", "unknown"), SourceRef("b", "unknown"), True),
        (SourceRef("a", "unknown"), SourceRef("b", "claude"), True),
        (SourceRef("a", "claude", ""), SourceRef("b", "openai", ""), True),
        (SourceRef("a", "claude", None), SourceRef("b", "openai", "slack"), True),
        (SourceRef("a", "claude", "slack"), SourceRef("b", "openai", "email"), True),
    ],
    ids=[
        "same-agent",
        "same-known-provider",
        "same-channel",
        "both-unknown-providers",
        "one-unknown-provider",
        "empty-channels",
        "one-channel-missing",
        "all-different",
    ],
)
def test_independence_examples(a: SourceRef, b: SourceRef, expected: bool) -> None:
    """The three non-independence rules, and unknown providers never making sources dependent."""
    assert expected == independent(a, b)


@given(sources, source_lists)
def test_independent_of_all_means_of_each(source: SourceRef, recorded: list[SourceRef]) -> None:
    """A source is independent of a record exactly when it is independent of each entry in it."""
    assert all(independent(source, r) for r in recorded) == independent_of_all(source, recorded)


# -- corroboration ----------------------------------------------------------------------

THRESHOLD = 0.9


def corroborator_for(target: Entry, **overrides: Any) -> Corroborator:
    """Evidence matching the target in everything, from an independent source."""
    base = Corroborator(
        knowledge_domain=target.knowledge_domain,
        content_type=target.content_type,
        access_scope=target.access_scope,
        owner_id=target.owner_id,
        source=SourceRef("gemini-checker", "gemini", "email"),
    )
    return evolve(base, **overrides)


def scope_allows(
    scope: AccessScope, evidence_owner: str | None, target: Entry, sharing: frozenset[str]
) -> bool:
    """The scope rule, restated: global always; private and team need both owners resolved;
    private the same owner; team the same owner or the target's owner sharing a group."""
    if scope is AccessScope.GLOBAL:
        return True
    if evidence_owner is None or target.owner_id is None:
        return False
    if scope is AccessScope.PRIVATE:
        return evidence_owner == target.owner_id
    return evidence_owner == target.owner_id or target.owner_id in sharing


def depends_on(a: SourceRef, b: SourceRef) -> bool:
    """The dependence rule, restated: same agent, same known provider or same non-empty
    channel."""
    same_provider = a.provider == b.provider and "unknown" not in (a.provider, b.provider)
    return a.agent_id == b.agent_id or same_provider or bool(a.channel and a.channel == b.channel)


def rule_of(field: str, attempt: Attempt) -> bool:
    """Whether ``attempt`` meets the one rule that changing ``field`` can break."""
    evidence, target = attempt.evidence, attempt.target
    if field == "similarity":
        return attempt.similarity >= THRESHOLD
    if field == "domain":
        return evidence.knowledge_domain == target.knowledge_domain
    if field == "content type":
        return evidence.content_type == target.content_type
    if field == "scope":
        return evidence.access_scope is target.access_scope
    if field in ("evidence owner", "target owner", "groups"):
        return scope_allows(
            target.access_scope, evidence.owner_id, target, attempt.owners_sharing_group
        )
    if field == "source":
        return not any(depends_on(evidence.source, r) for r in attempt.recorded)
    raise AssertionError(f"no rule for {field!r}")


def corroborates_in(attempt: Attempt) -> bool:
    return may_corroborate(
        attempt.evidence,
        attempt.target,
        attempt.similarity,
        attempt.recorded,
        min_similarity=THRESHOLD,
        owners_sharing_group=attempt.owners_sharing_group,
    )


@pytest.mark.parametrize("field", CORROBORATION_FIELDS)
@given(data=st.data())
def test_corroboration_never_crosses_partitions(field: str, data: st.DataObject) -> None:
    """Corroboration is allowed exactly when every rule of corroboration holds: an attempt
    meeting them all corroborates, and with one field changed it corroborates exactly when
    that field still meets its rule (so scope, owners and groups never let evidence cross
    into another partition). The events count both outcomes for each field."""
    allowed, changed = data.draw(one_field_changed(field, THRESHOLD))
    assert corroborates_in(allowed)
    expected = rule_of(field, changed)
    event("allowed" if expected else "refused")
    assert expected == corroborates_in(changed)


@pytest.mark.parametrize("field", CORROBORATION_FIELDS)
@pytest.mark.parametrize("outcome", ["allowed", "refused"])
def test_each_changed_field_is_drawn_both_allowed_and_refused(field: str, outcome: str) -> None:
    """The property above meets both outcomes for every field: ``find`` raises
    NoSuchExample when the strategy cannot produce one."""
    changed = find(
        one_field_changed(field, THRESHOLD),
        lambda case: rule_of(field, case[1]) == (outcome == "allowed"),
        settings=settings(phases=[Phase.generate], database=None),
    )[1]
    assert (outcome == "allowed") == corroborates_in(changed)


@given(entries(scope=st.just(AccessScope.GLOBAL)), st.floats(min_value=THRESHOLD, max_value=1.0))
def test_matching_global_evidence_corroborates(target: Entry, similarity: float) -> None:
    """Same domain, type and scope, similar enough, independent source: corroborates."""
    evidence = corroborator_for(target)
    recorded = [SourceRef("claude-origin", "claude", "slack")]
    assert may_corroborate(evidence, target, similarity, recorded, min_similarity=THRESHOLD)


def corroborates(
    evidence: Corroborator,
    target: Entry,
    similarity: float = 0.95,
    recorded: list[SourceRef] | None = None,
    owners_sharing_group: frozenset[str] = frozenset(),
) -> bool:
    """may_corroborate with the target's own source recorded as its origin by default."""
    return may_corroborate(
        evidence,
        target,
        similarity,
        [target.source] if recorded is None else recorded,
        min_similarity=THRESHOLD,
        owners_sharing_group=owners_sharing_group,
    )


TARGET = make_entry(source=SourceRef("claude-origin", "claude", "slack"))


@pytest.mark.parametrize(
    ("evidence", "target", "kwargs", "expected"),
    [
        (corroborator_for(TARGET), TARGET, {}, True),
        (corroborator_for(TARGET), TARGET, {"similarity": 0.9}, True),
        (corroborator_for(TARGET), TARGET, {"similarity": 0.8999}, False),
        (corroborator_for(TARGET, knowledge_domain="python"), TARGET, {}, False),
        (corroborator_for(TARGET, content_type=ContentType.CONCEPT), TARGET, {}, False),
        (corroborator_for(TARGET, access_scope=AccessScope.TEAM), TARGET, {}, False),
        (
            corroborator_for(TARGET, source=SourceRef("claude-other", "claude", "email")),
            TARGET,
            {},
            False,
        ),
        (
            corroborator_for(TARGET, source=SourceRef("someone", "unknown", "slack")),
            TARGET,
            {},
            False,
        ),
        (
            corroborator_for(TARGET),
            TARGET,
            {"recorded": [TARGET.source, SourceRef("gemini-x", "gemini")]},
            False,
        ),
    ],
    ids=[
        "all-rules-hold",
        "similarity-at-threshold",
        "similarity-below-threshold",
        "other-domain",
        "other-content-type",
        "other-scope",
        "same-provider-as-origin",
        "same-channel-as-origin",
        "dependent-on-a-later-corroborator",
    ],
)
def test_corroboration_rules(
    evidence: Corroborator, target: Entry, kwargs: dict[str, Any], expected: bool
) -> None:
    """Each corroboration rule, one at a time."""
    assert expected == corroborates(evidence, target, **kwargs)


PRIVATE = evolve(TARGET, access_scope=AccessScope.PRIVATE, owner_id="alice")
TEAM = evolve(TARGET, access_scope=AccessScope.TEAM, owner_id="alice")


@pytest.mark.parametrize(
    ("evidence", "target", "kwargs", "expected"),
    [
        (corroborator_for(PRIVATE, owner_id="alice"), PRIVATE, {}, True),
        (corroborator_for(PRIVATE, owner_id="bob"), PRIVATE, {}, False),
        (
            corroborator_for(PRIVATE, owner_id="bob"),
            PRIVATE,
            {"owners_sharing_group": frozenset({"alice"})},
            False,
        ),
        (corroborator_for(PRIVATE, owner_id=None), PRIVATE, {}, False),
        (corroborator_for(PRIVATE, owner_id=None), evolve(PRIVATE, owner_id=None), {}, False),
        (corroborator_for(TEAM, owner_id="alice"), TEAM, {}, True),
        (
            corroborator_for(TEAM, owner_id="bob"),
            TEAM,
            {"owners_sharing_group": frozenset({"alice"})},
            True,
        ),
        (corroborator_for(TEAM, owner_id="bob"), TEAM, {}, False),
        (
            corroborator_for(TEAM, owner_id=None),
            evolve(TEAM, owner_id=None),
            {"owners_sharing_group": frozenset({"alice"})},
            False,
        ),
    ],
    ids=[
        "private-same-owner",
        "private-other-owner",
        "private-other-owner-sharing-a-group",
        "private-unresolved-evidence-owner",
        "private-both-unresolved",
        "team-same-owner",
        "team-owners-share-a-group",
        "team-owners-share-no-group",
        "team-unresolved-owners",
    ],
)
def test_corroboration_scope_rules(
    evidence: Corroborator, target: Entry, kwargs: dict[str, Any], expected: bool
) -> None:
    """Private needs the same resolved owner; team needs a shared group; unresolved never."""
    assert expected == corroborates(evidence, target, **kwargs)
