"""The terms lexical search matches on, and the rank it orders matches by
(apollo_domain.lexical)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apollo_domain.lexical import STOPWORDS, occurrences, query_terms, rank, terms


def test_terms_are_lowercased_tokens_with_identifiers_kept_whole():
    """Names, numbers, versions, hosts and e-mail addresses survive as one term each."""
    expected = ["alice", "moved", "to", "paris", "in", "2023", "v1.2.3", "node.js"]
    assert expected == terms("Alice moved to Paris in 2023: v1.2.3, node.js.")
    assert ["mail", "jo.smith@example.com", "now"] == terms("mail jo.smith@example.com now")


def test_hyphenated_tokens_bring_their_parts_and_underscores_separate():
    assert ["read-only", "read", "only", "err", "42"] == terms("read-only ERR_42")


def test_query_terms_drop_stop_words_and_repeats():
    assert ["alice", "work", "2023"] == query_terms("Where did Alice work in 2023, Alice?")
    assert [] == query_terms("what is the")
    assert {"the", "where", "who"} <= STOPWORDS


@given(st.text(max_size=200))
def test_terms_are_lowercase_non_empty_and_query_terms_a_subset(text):
    found = terms(text)
    assert all(t and t == t.lower() for t in found)
    assert set(query_terms(text)) <= set(found) - STOPWORDS


def _ts_rank(text: str, query: list[str]) -> float:
    """``rank`` of ``text`` for the OR of the distinct ``query`` terms."""
    held = occurrences(text)
    return rank([held[t] for t in sorted(set(query)) if t in held], len(set(query)))


# Each value is what PostgreSQL 18.6 returned for
# SELECT ts_rank(to_tsvector('simple', text), to_tsquery('simple', 'a | b | ...'))::float8
# (ts_rank is single precision; ::float8 shows its exact value).
@pytest.mark.parametrize(
    ("text", "query", "expected"),
    [
        ("kafka", ["kafka"], 0.0607927106320858),
        ("kafka kafka", ["kafka"], 0.07599088549613953),
        ("kafka appears once in this note about queues", ["kafka", "queues"], 0.0607927106320858),
        (
            "alpha beta beta gamma gamma gamma",
            ["alpha", "beta", "gamma", "delta"],
            0.05488230660557747,
        ),
        # a hyphenated token and each of its parts take one position each
        ("read-only replica, read it twice: read", ["read", "only"], 0.07176917046308517),
        # positions past 16383 are all 16383: five occurrences keep three positions
        ("x " * 16380 + "kafka " * 5, ["kafka"], 0.08274563401937485),
        # to_tsvector keeps at most 255 positions of a lexeme
        ("kafka " * 300, ["kafka"], 0.09976206719875336),
    ],
)
def test_rank_is_postgresql_ts_rank(text, query, expected):
    """Exactly, not approximately: computed in PostgreSQL's single-precision steps, so
    ranks that tie there tie here."""
    assert expected == _ts_rank(text, query)


def test_occurrences_count_the_positions_a_tsvector_keeps():
    assert {"read-only": 1, "read": 2, "only": 1} == occurrences("read-only, read")
    assert 255 == occurrences("kafka " * 300)["kafka"]
    assert {"x": 255, "kafka": 3} == occurrences("x " * 16380 + "kafka " * 5)


def test_rank_has_no_length_normalization_and_ignores_other_terms():
    """A long text holding the query terms as often ranks as high as a short one."""
    short = _ts_rank("Ines married", ["ines", "married"])
    assert short == _ts_rank(
        "Ines, after weeks of rain and traffic, finally married", ["ines", "married"]
    )


@given(
    st.lists(st.integers(min_value=1, max_value=300), min_size=1, max_size=6),
    st.integers(min_value=0, max_value=4),
)
def test_rank_grows_with_terms_held_and_with_occurrences(counts, missing):
    """Positive and at most 0.1; holding one more of the query's terms, or a term once
    more, never lowers the rank (nor does anything past the 255 positions kept raise it);
    query terms no entry holds dilute it."""
    size = len(counts) + missing
    base = rank(counts, size)
    assert 0 < base <= 0.1
    if missing:
        assert base < rank([*counts, 1], size)
    assert base <= rank([counts[0] + 1, *counts[1:]], size)
    assert (counts[0] >= 255) == (base == rank([counts[0] + 1, *counts[1:]], size))
    assert rank(counts, size + 1) < base
