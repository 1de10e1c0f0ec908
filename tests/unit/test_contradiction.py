"""The built-in contradiction heuristic: negation, antonym and number mismatch."""

from __future__ import annotations

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from apollo_adapters.heuristics import HeuristicContradictionJudge
from apollo_domain.contradiction import HEURISTIC_ANTONYMS, flips_negation, heuristic_contradicts
from apollo_domain.ports import ContradictionJudge
from tests.strategies import restatements

CONTRADICTIONS = [
    ("BGP uses TCP port 179", "BGP uses TCP port 180"),
    ("X is enabled by default", "X is disabled by default"),
    ("Redis is fast", "Redis is slow"),
    ("Redis is fast", "Redis is not fast"),
    ("The request timeout is 30s", "The request timeout is 60s"),
    ("The request timeout is 30 seconds", "The request timeout is 60 seconds"),
    ("Python 3.11 added exception groups", "Python 3.10 added exception groups"),
    ("Always validate input before writing", "Never validate input before writing"),
    (
        "HTTP/2 multiplexes streams over one TCP connection",
        "HTTP/2 can't multiplex streams over one TCP connection",
    ),
    (
        "Kafka retains messages for 7 days by default",
        "Kafka retains messages for 3 days by default",
    ),
    (
        "The cache hit ratio increased after the deploy",
        "The cache hit ratio decreased after the deploy",
    ),
    ("Compression is required for replication", "Compression is optional for replication"),
    ("The feature flag is on in production", "The feature flag is off in production"),
    ("Anonymous users are allowed to read the wiki", "Anonymous users are denied to read the wiki"),
    ("The migration tool supports SQLite", "The migration tool does not support SQLite"),
    ("Pod restarts are never logged", "Pod restarts are logged"),
    ("The API returns 404 for a missing entry", "The API returns 410 for a missing entry"),
]

CONSISTENT = [
    ("Redis is fast", "Paris is in France"),
    ("PostgreSQL supports JSON columns", "JSON columns are supported by PostgreSQL"),
    ("Redis is fast", "Redis isn't slow"),
    ("X is not enabled by default", "X is disabled by default"),
    ("The server has 4 cores and 16 GB of RAM", "The server has 16 GB of RAM and 4 cores"),
    ("TLS 1.3 removes RSA key exchange", "TLS 1.3 removed RSA key exchange entirely"),
    (
        "The database server does not support TLS",
        "The database server handles thousands of connections",
    ),
    (
        "Kafka retains messages for 7 days by default",
        "Kafka keeps messages for seven days by default",
    ),
    (
        "Use connection pooling for PostgreSQL",
        "Connection pooling with PgBouncer reduces PostgreSQL load",
    ),
    ("Caching is enabled", "Logging is disabled"),
    ("Git stores snapshots, not diffs", "Docker images are built from layers"),
    ("The port is 179", "BGP sessions run over TCP"),
    ("Rust has no garbage collector", "Rust uses ownership and borrowing for memory safety"),
]


@pytest.mark.parametrize(("new", "existing"), CONTRADICTIONS)
def test_contradictions_are_detected(new: str, existing: str) -> None:
    """Negated, opposite or re-numbered statements about the same things contradict."""
    assert heuristic_contradicts(new, existing) is True
    assert heuristic_contradicts(existing, new) is True


@pytest.mark.parametrize(("new", "existing"), CONSISTENT)
def test_unrelated_or_paraphrased_texts_do_not_contradict(new: str, existing: str) -> None:
    """Different subjects, paraphrases and double negations are not contradictions."""
    assert heuristic_contradicts(new, existing) is False
    assert heuristic_contradicts(existing, new) is False


def test_antonyms_are_symmetric() -> None:
    """Every word is an opposite of each of its opposites."""
    for word, opposites in HEURISTIC_ANTONYMS.items():
        assert opposites
        for opposite in opposites:
            assert word in HEURISTIC_ANTONYMS[opposite]


async def test_judge_implements_the_port() -> None:
    """The judge is the port's built-in adapter and answers like the function."""
    judge = HeuristicContradictionJudge()
    assert isinstance(judge, ContradictionJudge)
    assert await judge.contradicts("X is enabled by default", "X is disabled by default")
    assert not await judge.contradicts("Redis is fast", "Paris is in France")


_WORDS = st.sampled_from(
    [
        "redis",
        "Redis",
        "port",
        "179",
        "180",
        "not",
        "never",
        "always",
        "enabled",
        "disabled",
        "is",
        "the",
        "TCP",
        "30s",
        "fast",
        "slow",
        "default",
        "isn't",
        "1,000",
        "3.10",
        "by",
        "X",
    ]
)
_SENTENCES = st.one_of(
    st.text(max_size=200),
    st.lists(_WORDS, max_size=12).map(" ".join),
)


@given(_SENTENCES)
def test_a_text_never_contradicts_itself(text: str) -> None:
    assert heuristic_contradicts(text, text) is False


@given(_SENTENCES, _SENTENCES)
def test_the_judgement_is_symmetric(a: str, b: str) -> None:
    assert heuristic_contradicts(a, b) == heuristic_contradicts(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("X is enabled on port 9187", "X is not enabled on port 9187"),
        ("X is enabled on port 9187", "X isn't enabled on port 9187"),
        ("X is enabled by default", "X is disabled by default"),
        ("Redis never loses writes on failover", "Redis loses writes on failover"),
    ],
)
def test_a_negated_or_opposite_restatement_flips(a: str, b: str) -> None:
    assert (True, True) == (flips_negation(a, b), flips_negation(b, a))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("X is not enabled on port 9187", "X is disabled on port 9187"),  # both deny it
        ("X is enabled on port 9187", "X is enabled on port 9188"),  # numbers, not polarity
        ("Redis is not durable", "Paris is not in Germany"),  # about other things
        ("Redis keeps the dataset in memory", "Redis keeps the whole dataset in memory"),
    ],
)
def test_agreeing_or_unrelated_texts_do_not_flip(a: str, b: str) -> None:
    assert (False, False) == (flips_negation(a, b), flips_negation(b, a))


@given(restatements())
def test_a_flip_is_symmetric_never_of_itself_and_always_a_contradiction(
    pair: tuple[str, str],
) -> None:
    """The rule ingest and the checker use is the judge's own polarity rule."""
    a, b = pair
    flipped = flips_negation(a, b)
    event(f"flips: {flipped}")
    assert flipped == flips_negation(b, a)
    assert flips_negation(a, a) is False
    if flipped:
        assert heuristic_contradicts(a, b)
