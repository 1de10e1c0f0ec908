"""The hypothesis strategies shared by the unit suites, plus a plain entry factory for examples."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from attrs import evolve, frozen
from hypothesis import strategies as st

from apollo_domain.model import (
    AccessScope,
    ContentType,
    Entry,
    Relation,
    RelationType,
    SourceRef,
    Status,
    Viewer,
)
from apollo_domain.normalize import content_hash, make_source

EPOCH = datetime(2025, 1, 1, tzinfo=UTC)

# -- numbers ---------------------------------------------------------------------------

unit_floats = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
confidences = unit_floats
credibilities = unit_floats
similarities = unit_floats
hours = st.floats(min_value=0.0, max_value=50_000.0, allow_nan=False, allow_infinity=False)
positive_weights = st.floats(
    min_value=1e-6, max_value=1_000.0, allow_nan=False, allow_infinity=False
)
relation_weights = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
entry_counts = st.integers(min_value=0, max_value=10_000)

# -- identities and sources ------------------------------------------------------------

PRINCIPAL_IDS = ("alice", "bob", "carol", "dave")
principal_ids = st.sampled_from(PRINCIPAL_IDS)
owner_ids = st.none() | principal_ids

KNOWN_PROVIDER_NAMES = ("claude", "openai", "gemini", "human", "system")
known_providers = st.sampled_from(KNOWN_PROVIDER_NAMES)
providers = known_providers | st.just("unknown")

agent_ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=12)
channels = st.none() | st.just("") | st.sampled_from(("slack", "email", "cli", "api"))

sources = st.builds(SourceRef, agent_id=agent_ids, provider=providers, channel=channels)
source_lists = st.lists(sources, max_size=5)

viewers = st.builds(
    Viewer,
    principal_id=st.none() | principal_ids,
    team_owners=st.frozensets(principal_ids, max_size=len(PRINCIPAL_IDS)),
)
anonymous_viewers = st.builds(
    Viewer,
    principal_id=st.none(),
    team_owners=st.frozensets(principal_ids, max_size=len(PRINCIPAL_IDS)),
)

# -- entry fields ----------------------------------------------------------------------

content_types = st.sampled_from(ContentType)
statuses = st.sampled_from(Status)
scopes = st.sampled_from(AccessScope)
relation_types = st.sampled_from(RelationType)
knowledge_domains = st.sampled_from(("general", "networking", "databases", "python"))

raw_tags = st.text(max_size=15) | st.sampled_from(
    ("c#", ".NET", " C++ ", "Node.js", "Machine Learning", "--x--", "!!!", "python", "PYTHON")
)
raw_tag_lists = st.lists(raw_tags, max_size=25)

ascii_words = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1)
whitespace_runs = st.text(alphabet=" \t\n\r", min_size=1, max_size=4)

datetimes = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1), timezones=st.just(UTC)
)


@st.composite
def entries(
    draw: st.DrawFn,
    *,
    scope: st.SearchStrategy[AccessScope] = scopes,
    status: st.SearchStrategy[Status] = statuses,
) -> Entry:
    """Any entry: scope, owner, status, domain, type, confidence and times drawn freely."""
    content = draw(st.text(min_size=1, max_size=40).filter(str.strip))
    created = draw(datetimes)
    updated = draw(st.none() | datetimes)
    return Entry(
        id=draw(st.uuids()),
        content=content,
        content_hash=content_hash(content),
        content_type=draw(content_types),
        knowledge_domain=draw(knowledge_domains),
        tags=(),
        confidence=draw(confidences),
        status=draw(status),
        source=draw(sources),
        access_scope=draw(scope),
        owner_id=draw(owner_ids),
        created_at=created,
        updated_at=updated,  # type: ignore[arg-type]  # the store may leave it unset
    )


# -- agreement stories -----------------------------------------------------------------

AGREEMENT_AGENTS = ("claude-1", "claude-2", "openai-1", "openai-2", "gemini-1", "x-1", "x-2")
agreement_sources = st.builds(
    make_source, st.sampled_from(AGREEMENT_AGENTS), st.none(), st.sampled_from((None, "slack"))
)


@frozen
class Submission:
    """One source saying the story's fact: ``wording`` is ``same`` (the exact text, up to
    case), or ``restated`` (another text at cosine 0.97), in a content type."""

    source: SourceRef
    wording: str
    content_type: ContentType


submissions = st.builds(
    Submission,
    agreement_sources,
    st.sampled_from(("same", "shouted", "restated")),
    st.sampled_from((ContentType.FACT, ContentType.FACT, ContentType.PROCEDURE)),
)
submission_lists = st.lists(submissions, min_size=1, max_size=6)
neighbour_sources = st.none() | agreement_sources
"""The source of a confirmed neighbour (cosine 0.92) that appears before the checker runs."""

# -- relation graphs -------------------------------------------------------------------

GRAPH_NODES: tuple[UUID, ...] = tuple(UUID(int=i) for i in range(1, 9))
graph_nodes = st.sampled_from(GRAPH_NODES)


@st.composite
def relations(draw: st.DrawFn) -> Relation:
    return Relation(
        from_id=draw(graph_nodes),
        to_id=draw(graph_nodes),
        relation_type=draw(relation_types),
        weight=draw(relation_weights),
    )


relation_lists = st.lists(relations(), max_size=20)

# -- example factory -------------------------------------------------------------------


def make_entry(**overrides: Any) -> Entry:
    """A plain confirmed global entry; keyword arguments replace any field."""
    content = overrides.pop("content", "PostgreSQL uses MVCC for concurrency control")
    base = Entry(
        id=uuid4(),
        content=content,
        content_hash=content_hash(content),
        content_type=ContentType.FACT,
        knowledge_domain="databases",
        tags=("databases",),
        confidence=0.5,
        status=Status.CONFIRMED,
        source=SourceRef("claude-researcher", "claude", "slack"),
        access_scope=AccessScope.GLOBAL,
        owner_id="alice",
        created_at=EPOCH,
        updated_at=EPOCH + timedelta(hours=1),
        source_context={"origin": "test"},
    )
    return evolve(base, **overrides)
