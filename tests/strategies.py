"""The hypothesis strategies shared by the unit suites, plus a plain entry factory for examples.

The strategies a user of Apollo may want too live in :mod:`apollo_domain.testing` and are
re-exported here, so each is defined once; the rest serve only Apollo's own tests.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from attrs import evolve
from hypothesis import strategies as st

from apollo_domain.model import AccessScope, ContentType, Entry, Relation, SourceRef, Status, Viewer
from apollo_domain.normalize import content_hash
from apollo_domain.testing import (
    KNOWN_PROVIDER_NAMES,
    PRINCIPAL_IDS,
    agent_ids,
    channels,
    confidences,
    content_types,
    credibilities,
    datetimes,
    entries,
    hours,
    knowledge_domains,
    known_providers,
    owner_ids,
    policies,
    principal_ids,
    principals,
    providers,
    relation_types,
    scopes,
    similarities,
    sources,
    statuses,
    unit_floats,
    viewers,
)

EPOCH = datetime(2025, 1, 1, tzinfo=UTC)

# -- test-only strategies (the public ones come from apollo_domain.testing) -------------

positive_weights = st.floats(
    min_value=1e-6, max_value=1_000.0, allow_nan=False, allow_infinity=False
)
relation_weights = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
entry_counts = st.integers(min_value=0, max_value=10_000)

source_lists = st.lists(sources, max_size=5)

anonymous_viewers = st.builds(
    Viewer,
    principal_id=st.none(),
    team_owners=st.frozensets(principal_ids, max_size=len(PRINCIPAL_IDS)),
)

raw_tags = st.text(max_size=15) | st.sampled_from(
    ("c#", ".NET", " C++ ", "Node.js", "Machine Learning", "--x--", "!!!", "python", "PYTHON")
)
raw_tag_lists = st.lists(raw_tags, max_size=25)

ascii_words = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1)
whitespace_runs = st.text(alphabet=" \t\n\r", min_size=1, max_size=4)


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


__all__ = [
    "EPOCH",
    "GRAPH_NODES",
    "KNOWN_PROVIDER_NAMES",
    "PRINCIPAL_IDS",
    "agent_ids",
    "anonymous_viewers",
    "ascii_words",
    "channels",
    "confidences",
    "content_types",
    "credibilities",
    "datetimes",
    "entries",
    "entry_counts",
    "graph_nodes",
    "hours",
    "knowledge_domains",
    "known_providers",
    "make_entry",
    "owner_ids",
    "policies",
    "positive_weights",
    "principal_ids",
    "principals",
    "providers",
    "raw_tag_lists",
    "raw_tags",
    "relation_lists",
    "relation_types",
    "relation_weights",
    "relations",
    "scopes",
    "similarities",
    "source_lists",
    "sources",
    "statuses",
    "unit_floats",
    "viewers",
    "whitespace_runs",
]
