"""The terms lexical search matches on (apollo_domain.lexical)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from apollo_domain.lexical import STOPWORDS, query_terms, terms


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
