"""The hypothesis strategies shared by the unit suites, plus a plain entry factory for examples.

The strategies a user of Apollo may want too live in :mod:`apollo_domain.testing` and are
re-exported here, so each is defined once; the rest serve only Apollo's own tests.
"""

from __future__ import annotations

import functools
import math
from datetime import UTC, datetime, timedelta
from uuid import UUID

from attrs import evolve, frozen
from benchmarks._common import ADVERSARIAL_UNITS
from hypothesis import strategies as st

from apollo_domain import testing
from apollo_domain.causal import MAX_POSITION, PREFIX, CausalToken
from apollo_domain.confusables import CONFUSABLES
from apollo_domain.model import AccessScope, ContentType, Entry, Relation, SourceRef, Status, Viewer
from apollo_domain.normalize import make_source
from apollo_domain.retry import OutboxRetry
from apollo_domain.rules import Corroborator
from apollo_domain.testing import (
    CHANNEL_NAMES,
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

causal_tokens = st.builds(CausalToken, st.integers(min_value=0, max_value=MAX_POSITION))
#: What a caller may send where a causal token goes: tokens, near misses (upper case,
#: leading zeros, too long, another version, stray whitespace) and any text at all.
token_texts = st.one_of(
    causal_tokens.map(str),
    causal_tokens.map(lambda t: str(t).upper()),
    causal_tokens.map(lambda t: f"{PREFIX}0{t.position:x}"),
    causal_tokens.map(lambda t: f"{t}\n"),
    causal_tokens.map(lambda t: f"c2.{t.position:x}"),
    st.integers(min_value=MAX_POSITION + 1, max_value=2**80).map(lambda n: f"{PREFIX}{n:x}"),
    st.text(alphabet="c1.0123456789abcdefx -/", max_size=24),
    st.text(max_size=40),
)

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

#: The ranges of the Unicode property Default_Ignorable_Code_Point (Unicode 15).
DEFAULT_IGNORABLE_RANGES = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
default_ignorables = st.one_of(
    [st.integers(low, high).map(chr) for low, high in DEFAULT_IGNORABLE_RANGES]
)

ascii_words = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1)
whitespace_runs = st.text(alphabet=" \t\n\r", min_size=1, max_size=4)


# -- adversarial texts -------------------------------------------------------------------
#
# Texts built to make a backtracking pattern re-read a run from each of its characters: one
# short unit repeated to the wanted length, then a tail that makes a match fail at the end.


def repeated(unit: str, length: int, tail: str = "") -> str:
    """``unit`` repeated to ``length`` characters, then ``tail``."""
    return (unit * (length // len(unit) + 1))[:length] + tail


_punctuation_units = st.sampled_from(list(",.-'’&\"“”_@:/;!?%$=+#*()[]"))
_alternation_units = st.text(alphabet="aA1 ,.-_'’&:/@=%$\t\n", min_size=2, max_size=4)
_number_units = st.tuples(
    st.text(alphabet="0123456789", min_size=1, max_size=3),
    st.sampled_from([",", ".", "-", ", ", "/", ":", "%", ",000"]),
).map("".join)
_capitalized_units = st.tuples(
    st.lists(
        st.sampled_from(
            ["Alpha", "The", "A", "De", "of", "May", "I", "Bank", "O'Neil", "AT&T", "U.S.", "Dr."]
        ),
        min_size=1,
        max_size=4,
    ).map(" ".join),
    st.sampled_from([" ", "  ", "\t", "-", ".", ", ", "_"]),
).map("".join)
_quote_units = st.tuples(
    st.sampled_from(['"', "“", "”", "'", "’"]), st.text(alphabet="aA ", max_size=3)
).map("".join)
ADVERSARIAL_KINDS = {
    "punctuation run": _punctuation_units,
    "alternation": _alternation_units,
    "digits and separators": _number_units,
    "capitalized words": _capitalized_units,
    "quotes": _quote_units,
}
_tails = st.sampled_from(["", "x", "_", "é", "!", "@", "://", "=", " kg", ".js", "A"])


@st.composite
def adversarial_texts(draw: st.DrawFn, length: int = 20_000) -> tuple[str, str]:
    """(kind, text): a text of about ``length`` characters repeating one unit of a kind of
    :data:`ADVERSARIAL_KINDS`, with a tail that may make a pattern fail at its very end."""
    kind = draw(st.sampled_from(sorted(ADVERSARIAL_KINDS)))
    unit = draw(ADVERSARIAL_KINDS[kind])
    return kind, repeated(unit, length, draw(_tails))


# -- corroboration attempts ------------------------------------------------------------


@frozen
class Attempt:
    """The arguments of one ``may_corroborate`` call (the threshold aside)."""

    evidence: Corroborator
    target: Entry
    similarity: float
    recorded: tuple[SourceRef, ...]
    owners_sharing_group: frozenset[str]


EVIDENCE_AGENT = "EVIDENCE"  # upper case: outside the alphabet of ``agent_ids``


@st.composite
def allowed_attempts(draw: st.DrawFn, threshold: float) -> Attempt:
    """An attempt meeting every corroboration rule, in any scope: evidence of the target's
    domain, type and scope, similar enough, from a source independent of every recorded
    one (the target's own first); private → the target's owner; team → the same owner or
    one sharing a group with it."""
    scope = draw(scopes)
    target = make_entry(
        access_scope=scope,
        owner_id=draw(owner_ids if scope is AccessScope.GLOBAL else principal_ids),
        knowledge_domain=draw(knowledge_domains),
        content_type=draw(content_types),
        source=draw(sources),
    )
    sharing = draw(st.frozensets(principal_ids))
    if scope is AccessScope.GLOBAL:
        owner = draw(owner_ids)
    elif scope is AccessScope.PRIVATE:
        owner = target.owner_id
    else:
        owner = draw(principal_ids)
        if owner != target.owner_id:
            sharing |= {target.owner_id}
    recorded = (target.source, *draw(source_lists))
    used_providers = {s.provider for s in recorded}
    used_channels = {s.channel for s in recorded}
    provider = draw(
        st.sampled_from(["unknown", *(p for p in KNOWN_PROVIDER_NAMES if p not in used_providers)])
    )
    channel = draw(
        st.sampled_from([None, "", *(c for c in CHANNEL_NAMES if c not in used_channels)])
    )
    evidence = Corroborator(
        knowledge_domain=target.knowledge_domain,
        content_type=target.content_type,
        access_scope=scope,
        owner_id=owner,
        source=SourceRef(EVIDENCE_AGENT, provider, channel),
    )
    similarity = draw(st.floats(min_value=threshold, max_value=1.0))
    return Attempt(evidence, target, similarity, recorded, sharing)


CORROBORATION_FIELDS = (
    "similarity",
    "domain",
    "content type",
    "scope",
    "evidence owner",
    "target owner",
    "groups",
    "source",
)


@st.composite
def one_field_changed(draw: st.DrawFn, field: str, threshold: float) -> tuple[Attempt, Attempt]:
    """``(allowed, changed)``: an allowed attempt and a copy with ``field`` (one of
    ``CORROBORATION_FIELDS``) redrawn; the new value may still meet its rule."""
    allowed = draw(allowed_attempts(threshold))
    evidence, target = allowed.evidence, allowed.target
    if field == "similarity":
        edge = st.sampled_from([threshold, math.nextafter(threshold, 0.0)])
        return allowed, evolve(allowed, similarity=draw(edge | similarities))
    if field == "groups":
        return allowed, evolve(allowed, owners_sharing_group=draw(st.frozensets(principal_ids)))
    if field == "target owner":
        return allowed, evolve(allowed, target=evolve(target, owner_id=draw(owner_ids)))
    if field == "source":
        other = draw(st.sampled_from(allowed.recorded))
        shared = draw(st.sampled_from(["agent", "provider", "channel", "nothing"]))
        changes = {
            "agent": {"agent_id": other.agent_id},
            "provider": {"provider": other.provider},
            "channel": {"channel": other.channel},
            "nothing": {},
        }[shared]
        source = evolve(evidence.source, **changes) if changes else draw(sources)
        return allowed, evolve(allowed, evidence=evolve(evidence, source=source))
    redrawn = {
        "domain": ("knowledge_domain", knowledge_domains),
        "content type": ("content_type", content_types),
        "scope": ("access_scope", scopes),
        "evidence owner": ("owner_id", owner_ids),
    }
    name, values = redrawn[field]
    changed = evolve(evidence, **{name: draw(values)})
    return allowed, evolve(allowed, evidence=changed)


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
def outbox_retries(draw: st.DrawFn) -> OutboxRetry:
    """Any valid backoff: a base, a cap at least the base, an attempt budget, a lease."""
    seconds = st.floats(min_value=0.01, max_value=86_400.0, allow_nan=False)
    base, cap = sorted((draw(seconds), draw(seconds)))
    return OutboxRetry(base, cap, draw(st.integers(1, 100)), draw(seconds))


failure_counts = st.integers(min_value=0, max_value=120)


@st.composite
def relations(draw: st.DrawFn) -> Relation:
    return Relation(
        from_id=draw(graph_nodes),
        to_id=draw(graph_nodes),
        relation_type=draw(relation_types),
        weight=draw(relation_weights),
    )


relation_lists = st.lists(relations(), max_size=20)

# -- restatements ----------------------------------------------------------------------

_CLAIM_WORDS = st.sampled_from(
    ["Redis", "PostgreSQL", "port", "9187", "exporter", "replication", "cache", "is", "the",
     "enabled", "disabled", "uses", "TLS", "on", "by", "default", "keeps", "memory"]
)  # fmt: skip


@st.composite
def restatements(draw: st.DrawFn) -> tuple[str, str]:
    """A claim and a restatement of it: the same words, with a ``not`` (or ``never``)
    inserted at some position, or unchanged."""
    words = draw(st.lists(_CLAIM_WORDS, min_size=1, max_size=10))
    restated = list(words)
    if draw(st.booleans()):
        at = draw(st.integers(min_value=0, max_value=len(words)))
        restated.insert(at, draw(st.sampled_from(["not", "never"])))
    return " ".join(words), " ".join(restated)


# -- disguises ---------------------------------------------------------------------------

_LATIN_TWINS: dict[str, list[str]] = {}
for _letter, _latin in CONFUSABLES.items():
    _LATIN_TWINS.setdefault(_latin, []).append(_letter)


@st.composite
def disguised_texts(draw: st.DrawFn) -> tuple[str, str]:
    """An ASCII text and a copy with some of its letters swapped for Cyrillic or Greek
    look-alikes (possibly none); a Latin letter without a look-alike stays in the copy
    (a text without any Latin letter disguises nothing)."""
    keep = draw(st.text(alphabet="fgnrz", min_size=1, max_size=3))
    text = keep + draw(st.text(alphabet="abcdehijopsxyABCEHIKMOPTXY .,0123456789"))
    letters = list(text)
    for i, letter in enumerate(letters):
        twins = _LATIN_TWINS.get(letter)
        if twins and draw(st.booleans()):
            letters[i] = draw(st.sampled_from(twins))
    return text, "".join(letters)


# -- example factory -------------------------------------------------------------------


#: A plain confirmed global entry of alice's: :func:`apollo_domain.testing.make_entry` with
#: the defaults these property tests share; keyword arguments replace any field.
make_entry = functools.partial(
    testing.make_entry,
    content="PostgreSQL uses MVCC for concurrency control",
    knowledge_domain="databases",
    tags=("databases",),
    status=Status.CONFIRMED,
    source=SourceRef("claude-researcher", "claude", "slack"),
    owner_id="alice",
    created_at=EPOCH,
    updated_at=EPOCH + timedelta(hours=1),
)


#: A query's candidate cosines, best first (as a store returns them): none to 20.
candidate_cosines = st.lists(
    st.floats(min_value=-1.0, max_value=1.0, allow_nan=False), max_size=20
).map(lambda cosines: sorted(cosines, reverse=True))


__all__ = [
    "ADVERSARIAL_KINDS",
    "ADVERSARIAL_UNITS",
    "DEFAULT_IGNORABLE_RANGES",
    "EPOCH",
    "GRAPH_NODES",
    "KNOWN_PROVIDER_NAMES",
    "PRINCIPAL_IDS",
    "adversarial_texts",
    "agent_ids",
    "anonymous_viewers",
    "ascii_words",
    "candidate_cosines",
    "causal_tokens",
    "channels",
    "confidences",
    "content_types",
    "credibilities",
    "datetimes",
    "default_ignorables",
    "disguised_texts",
    "entries",
    "entry_counts",
    "failure_counts",
    "graph_nodes",
    "hours",
    "knowledge_domains",
    "known_providers",
    "make_entry",
    "outbox_retries",
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
    "repeated",
    "restatements",
    "scopes",
    "similarities",
    "source_lists",
    "sources",
    "statuses",
    "token_texts",
    "unit_floats",
    "viewers",
    "whitespace_runs",
]
