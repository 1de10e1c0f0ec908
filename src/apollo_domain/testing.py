"""Hypothesis strategies and invariant checks for code built on Apollo's domain.

The confidence policy is a value (:mod:`apollo_domain.policy`): a program tunes its
settings, never its formulas, and :class:`ConfidencePolicy` cannot be subclassed, since the
stores apply those formulas with the policy's numbers. Every policy whose settings lie in
[0, 1] keeps the invariants every part of Apollo relies on: every function returns a value
in [0, 1] for inputs in [0, 1], boosts never decrease a confidence, decay never increases
one, and decay over h1 then h2 equals decay over h1 + h2. A program can show it for the
policies it runs::

    from apollo_domain.testing import policies, policy_invariants_test

    test_slow_decay_keeps_the_invariants = policy_invariants_test(
        policies(decay_factor_per_hour=st.floats(0.999, 1.0))
    )

or, to combine the check with inputs of your own::

    from hypothesis import given
    from apollo_domain.testing import check_policy_invariants, confidences, hours, ...

    @given(confidences, credibilities, hours, hours)
    def test_my_policy(confidence, credibility, h1, h2):
        check_policy_invariants(MY_POLICY, confidence, credibility, h1, h2)

The strategies (sources, entries, policies, scopes, principals, ...) are the ones Apollo's
own property tests draw from. This module needs hypothesis (``pip install
"apollo-knowledge[testing]"``); nothing else in :mod:`apollo_domain` imports it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from attrs import fields

try:
    from hypothesis import currently_in_test_context, event, given
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without hypothesis
    raise ImportError(
        'apollo_domain.testing needs hypothesis: pip install "apollo-knowledge[testing]"'
    ) from exc

from .model import (
    AccessScope,
    ContentType,
    Entry,
    Principal,
    RelationType,
    SourceRef,
    Status,
    Viewer,
)
from .normalize import content_hash
from .policy import ConfidencePolicy

# -- numbers ---------------------------------------------------------------------------

unit_floats = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
"""Any float in [0, 1], both ends included."""
confidences = unit_floats
"""An entry's confidence."""
credibilities = unit_floats
"""A source's credibility."""
similarities = unit_floats
"""A cosine similarity as the policy sees it."""
hours = st.floats(min_value=0.0, max_value=50_000.0, allow_nan=False, allow_infinity=False)
"""Elapsed hours between two decay runs: zero up to more than five years."""

# -- principals and scopes -------------------------------------------------------------

PRINCIPAL_IDS = ("alice", "bob", "carol", "dave")
GROUP_NAMES = ("netops", "research", "support")

principal_ids = st.sampled_from(PRINCIPAL_IDS)
"""A principal id from a small fixed set, so drawn values collide often."""
owner_ids = st.none() | principal_ids
"""An entry's owner: a principal id, or None for an unresolved writer."""
principals = st.builds(
    Principal,
    id=st.none() | principal_ids,
    groups=st.frozensets(st.sampled_from(GROUP_NAMES), max_size=len(GROUP_NAMES)),
)
"""A caller as the edge knows it: an id (None when unresolved) and some groups."""
viewers = st.builds(
    Viewer,
    principal_id=st.none() | principal_ids,
    team_owners=st.frozensets(principal_ids, max_size=len(PRINCIPAL_IDS)),
)
"""A principal resolved for visibility checks (its team owners already looked up)."""
scopes = st.sampled_from(AccessScope)
"""An access scope: global, team or private."""

# -- sources ---------------------------------------------------------------------------

KNOWN_PROVIDER_NAMES = ("claude", "openai", "gemini", "human", "system")

known_providers = st.sampled_from(KNOWN_PROVIDER_NAMES)
providers = known_providers | st.just("unknown")
"""A provider as stored on a source: a known one or ``unknown``."""
agent_ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=12)
#: Channel names the strategies draw from.
CHANNEL_NAMES = ("slack", "email", "cli", "api")
channels = st.none() | st.just("") | st.sampled_from(CHANNEL_NAMES)
"""A channel: none, empty, or one of a few names (so two sources often share one)."""
sources = st.builds(SourceRef, agent_id=agent_ids, provider=providers, channel=channels)
"""A source ``(agent_id, provider, channel)``; independence rules apply to pairs of them."""

# -- entries ---------------------------------------------------------------------------

content_types = st.sampled_from(ContentType)
statuses = st.sampled_from(Status)
relation_types = st.sampled_from(RelationType)
knowledge_domains = st.sampled_from(("general", "networking", "databases", "python"))
datetimes = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1), timezones=st.just(UTC)
)
"""A timezone-aware UTC datetime between 2020 and 2030."""


@st.composite
def entries(
    draw: st.DrawFn,
    *,
    scope: st.SearchStrategy[AccessScope] = scopes,
    status: st.SearchStrategy[Status] = statuses,
) -> Entry:
    """Any entry: scope, owner, status, domain, type, confidence and times drawn freely.

    ``scope`` and ``status`` narrow what is drawn, e.g. ``entries(status=st.just(
    Status.CONFIRMED))``. The content hash matches the content; there is no embedding.
    """
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
        updated_at=updated,  # type: ignore[arg-type]  # a store may leave it unset
    )


#: When :func:`make_entry`'s entries are created, unless told otherwise.
ENTRY_TIME = datetime(2026, 1, 1, tzinfo=UTC)


def make_entry(content: str = "BGP uses TCP port 179", **fields: Any) -> Entry:
    """One entry, as a store test writes it: a new global candidate of agent ``claude-1``
    (provider ``claude``) in ``networking``, with no owner and no embedding, created (and
    last updated) at :data:`ENTRY_TIME`, with a fresh id. Keyword arguments replace any
    field; the content hash follows ``content`` unless given, and ``updated_at`` follows
    ``created_at``. A suite binds what its entries share, e.g.
    ``functools.partial(make_entry, embedding=(1.0, 0.0, 0.0))``."""
    created = fields.pop("created_at", ENTRY_TIME)
    values: dict[str, Any] = {
        "id": uuid4(),
        "content": content,
        "content_hash": content_hash(content),
        "content_type": ContentType.FACT,
        "knowledge_domain": "networking",
        "tags": ("networking",),
        "confidence": 0.5,
        "status": Status.CANDIDATE,
        "source": SourceRef("claude-1", "claude"),
        "access_scope": AccessScope.GLOBAL,
        "owner_id": None,
        "created_at": created,
        "updated_at": created,
        "source_context": {"origin": "test"},
    }
    values.update(fields)
    embedding = values.get("embedding")
    if embedding is not None:
        values["embedding"] = tuple(float(x) for x in embedding)
    return Entry(**values)


# -- policies --------------------------------------------------------------------------

POLICY_SETTINGS: tuple[str, ...] = tuple(a.name for a in fields(ConfidencePolicy))
"""The names of every confidence-policy setting."""


def policies(**settings: Any) -> st.SearchStrategy[ConfidencePolicy]:
    """Policies with every setting of :class:`ConfidencePolicy` drawn from [0, 1].

    ``settings`` fix some of them, or draw them from a narrower strategy:
    ``policies(decay_factor_per_hour=st.floats(0.99, 1.0), archive_below=0.2)``; a name
    that is not a setting is a :class:`ValueError`.
    """
    unknown = sorted(set(settings) - set(POLICY_SETTINGS))
    if unknown:
        raise ValueError(f"not confidence policy settings: {', '.join(unknown)}")
    drawn: dict[str, st.SearchStrategy[Any]] = {name: unit_floats for name in POLICY_SETTINGS}
    for name, value in settings.items():
        drawn[name] = value if isinstance(value, st.SearchStrategy) else st.just(value)
    return st.builds(ConfidencePolicy, **drawn)


# -- invariant checks ------------------------------------------------------------------

RETRIEVAL_RAISED = "retrieval raised the confidence"
RETRIEVAL_CAPPED = "retrieval boost capped at 1"
CORROBORATION_RAISED = "corroboration raised the confidence"
CORROBORATION_CAPPED = "corroboration boost capped at 1"
DECAY_LOWERED = "decay lowered the confidence"
DECAY_COMPOSED = "decay composed two positive intervals above 0"
SYNTHESIS_CAPPED = "synthesis held at its cap"

POLICY_CASES: tuple[str, ...] = (
    RETRIEVAL_RAISED,
    RETRIEVAL_CAPPED,
    CORROBORATION_RAISED,
    CORROBORATION_CAPPED,
    DECAY_LOWERED,
    DECAY_COMPOSED,
    SYNTHESIS_CAPPED,
)
"""The notable cases :func:`check_policy_invariants` reports when it meets them."""


def _in_unit(value: float) -> bool:
    return 0.0 <= value <= 1.0


def _require_unit(name: str, value: float) -> None:
    if not _in_unit(value):
        raise ValueError(f"{name} must be within [0, 1], got {value!r}")


def _require_in_unit(call: str, value: float) -> None:
    if not _in_unit(value):
        raise AssertionError(f"{call} = {value!r} is outside [0, 1]")


def check_policy_invariants(
    policy: ConfidencePolicy,
    confidence: float,
    credibility: float,
    hours: float,
    more_hours: float,
    *,
    similarity: float | None = None,
    source_confidences: Sequence[float] = (),
    tolerance: float = 1e-9,
) -> frozenset[str]:
    """Assert the confidence policy's invariants for ``policy`` at one point.

    - every function of the policy returns a value in [0, 1] (confidence, credibility,
      similarity and each source confidence must be in [0, 1]; hours ≥ 0);
    - ``after_retrieval`` and ``after_corroboration`` never lower ``confidence``;
    - ``decayed`` never raises it;
    - decaying over ``hours`` then over ``more_hours`` equals decaying once over their
      sum, within ``tolerance``;
    - a synthesis never starts above ``synthesis_confidence_cap``.

    Raises :class:`AssertionError` naming the call that broke an invariant. Returns the
    :data:`POLICY_CASES` this call met (e.g. a boost capped at 1), which inside a
    hypothesis test are also recorded with :func:`hypothesis.event`, so
    ``--hypothesis-show-statistics`` shows how often each assertion saw such a case.
    """
    _require_unit("confidence", confidence)
    _require_unit("credibility", credibility)
    if similarity is not None:
        _require_unit("similarity", similarity)
    for value in source_confidences:
        _require_unit("source_confidences", value)
    for name, elapsed in (("hours", hours), ("more_hours", more_hours)):
        if math.isnan(elapsed) or elapsed < 0.0:
            raise ValueError(f"{name} must be a number ≥ 0, got {elapsed!r}")

    cases: set[str] = set()
    c = confidence

    retrieved = policy.after_retrieval(c)
    _require_in_unit(f"after_retrieval({c!r})", retrieved)
    if retrieved < c:
        raise AssertionError(f"after_retrieval({c!r}) = {retrieved!r} lowers the confidence")
    if retrieved > c:
        cases.add(RETRIEVAL_RAISED)
    if c + policy.retrieval_boost > 1.0:
        cases.add(RETRIEVAL_CAPPED)

    _require_in_unit(f"credibility_weight({credibility!r})", policy.credibility_weight(credibility))
    amount = policy.corroboration_amount(credibility)
    _require_in_unit(f"corroboration_amount({credibility!r})", amount)
    corroborated = policy.after_corroboration(c, credibility)
    _require_in_unit(f"after_corroboration({c!r}, {credibility!r})", corroborated)
    if corroborated < c:
        raise AssertionError(
            f"after_corroboration({c!r}, {credibility!r}) = {corroborated!r} lowers the confidence"
        )
    if corroborated > c:
        cases.add(CORROBORATION_RAISED)
    if c + amount > 1.0:
        cases.add(CORROBORATION_CAPPED)

    for elapsed in (hours, more_hours, hours + more_hours):
        _require_in_unit(f"decay_multiplier({elapsed!r})", policy.decay_multiplier(elapsed))
        decayed = policy.decayed(c, elapsed)
        _require_in_unit(f"decayed({c!r}, {elapsed!r})", decayed)
        if decayed > c:
            raise AssertionError(f"decayed({c!r}, {elapsed!r}) = {decayed!r} raises the confidence")
        if decayed < c:
            cases.add(DECAY_LOWERED)

    stepwise = policy.decayed(policy.decayed(c, hours), more_hours)
    at_once = policy.decayed(c, hours + more_hours)
    if abs(stepwise - at_once) > tolerance:
        raise AssertionError(
            f"decayed over {hours!r} h then {more_hours!r} h = {stepwise!r}, "
            f"but over {hours + more_hours!r} h at once = {at_once!r}"
        )
    if hours > 0.0 and more_hours > 0.0 and at_once > 0.0:
        cases.add(DECAY_COMPOSED)

    if similarity is not None:
        _require_in_unit(f"novelty({similarity!r})", policy.novelty(similarity))

    synthesized = policy.synthesis_confidence(source_confidences)
    call = f"synthesis_confidence({list(source_confidences)!r})"
    _require_in_unit(call, synthesized)
    if synthesized > policy.synthesis_confidence_cap:
        raise AssertionError(
            f"{call} = {synthesized!r} exceeds the cap {policy.synthesis_confidence_cap!r}"
        )
    if source_confidences and synthesized == policy.synthesis_confidence_cap:
        cases.add(SYNTHESIS_CAPPED)

    if currently_in_test_context():
        for case in sorted(cases):
            event(case)
    return frozenset(cases)


def policy_invariants_test(
    policy_strategy: st.SearchStrategy[ConfidencePolicy] | None = None,
) -> Callable[[], None]:
    """A hypothesis test that checks :func:`check_policy_invariants` on policies drawn from
    ``policy_strategy`` (default: :func:`policies`) at points drawn from this module's
    strategies. Assign it to a ``test_...`` name in a test module for pytest to collect."""

    @given(
        policy=policy_strategy if policy_strategy is not None else policies(),
        confidence=confidences,
        credibility=credibilities,
        hours=hours,
        more_hours=hours,
        similarity=similarities,
        source_confidences=st.lists(confidences, max_size=6),
    )
    def test_policy_keeps_the_confidence_invariants(
        policy: ConfidencePolicy,
        confidence: float,
        credibility: float,
        hours: float,
        more_hours: float,
        similarity: float,
        source_confidences: list[float],
    ) -> None:
        """Boosts never lower, decay never raises and composes, and every function of the
        policy stays within [0, 1]."""
        check_policy_invariants(
            policy,
            confidence,
            credibility,
            hours,
            more_hours,
            similarity=similarity,
            source_confidences=source_confidences,
        )

    return test_policy_keeps_the_confidence_invariants


__all__ = [
    "CHANNEL_NAMES",
    "CORROBORATION_CAPPED",
    "CORROBORATION_RAISED",
    "DECAY_COMPOSED",
    "DECAY_LOWERED",
    "ENTRY_TIME",
    "GROUP_NAMES",
    "KNOWN_PROVIDER_NAMES",
    "POLICY_CASES",
    "POLICY_SETTINGS",
    "PRINCIPAL_IDS",
    "RETRIEVAL_CAPPED",
    "RETRIEVAL_RAISED",
    "SYNTHESIS_CAPPED",
    "agent_ids",
    "channels",
    "check_policy_invariants",
    "confidences",
    "content_types",
    "credibilities",
    "datetimes",
    "entries",
    "hours",
    "knowledge_domains",
    "known_providers",
    "make_entry",
    "owner_ids",
    "policies",
    "policy_invariants_test",
    "principal_ids",
    "principals",
    "providers",
    "relation_types",
    "scopes",
    "similarities",
    "sources",
    "statuses",
    "unit_floats",
    "viewers",
]
