"""The built-in heuristic entity extractor (apollo_adapters.heuristics.extraction)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from apollo_adapters.heuristics import HeuristicEntityExtractor, extract_entities
from apollo_domain.entities import (
    EntityMention,
    Extraction,
    TypedMention,
    normalize_entity_name,
    normalize_relation,
)


def found(text: str) -> list[tuple[str, str | None]]:
    return [(e.name, e.kind) for e in extract_entities(text).entities]


def test_capitalized_multi_word_names_and_names_inside_a_sentence():
    assert [
        ("Alice Moreau", "name"),
        ("Lisbon", "name"),
        ("Bank of America", "name"),
    ] == found("Alice Moreau moved to Lisbon to work for the Bank of America.")


def test_a_single_capitalized_word_opening_a_sentence_is_not_a_name():
    """Precision over recall: ``Yesterday`` or ``Soup`` open sentences; stop words,
    months, days and ``I`` are never names."""
    assert [] == found("Yesterday we met. Soup is hot. I think The")
    assert [("Bruno Diaz", "name")] == found("Later Bruno Diaz left.")
    assert [("Beatles", "name")] == found("I think The Beatles were great on Monday.")


def test_dates():
    assert [
        ("2024-05-01", "date"),
        ("March 3, 2024", "date"),
        ("May 2023", "date"),
        ("2019", "date"),
    ] == found("Shipped 2024-05-01, reviewed March 3, 2024, planned in May 2023 and 2019.")


def test_numbers_with_units_and_currencies():
    assert [
        ("42 kg", "quantity"),
        ("35%", "quantity"),
        ("120 ms", "quantity"),
        ("$1,200", "quantity"),
    ] == found("The 42kg crate cut latency by 35% to 120 ms for $1,200.")
    assert [] == found("we counted 42 of them")


def test_identifiers_and_versions():
    assert [
        ("v2.4.1", "identifier"),
        ("3.11.2", "identifier"),
        ("INC-1234", "identifier"),
        ("max_connections", "identifier"),
        ("node.js", "identifier"),
    ] == found("upgrade to v2.4.1 and 3.11.2 after INC-1234; raise max_connections in node.js")


def test_quoted_names():
    assert [("Project Orion", "quoted")] == found('we shipped "Project Orion" today')
    assert [] == found('he said "a very long quote with many more than six words" and "42"')


def test_typed_edges_from_a_verb_between_two_names():
    extraction = extract_entities(
        "In 2019 Bob Lee joined Globex. Carol Diaz lives in New York City. Dan Ko met Eve Li."
    )
    assert (
        TypedMention("Bob Lee", "works_at", "Globex"),
        TypedMention("Carol Diaz", "lives_in", "New York City"),
    ) == extraction.edges


def test_repeated_mentions_are_reported_once():
    assert [("Alice Moreau", "name")] == found(
        "Then Alice Moreau left; later Alice   Moreau returned."
    )


def test_plain_lowercase_text_has_no_entities():
    assert Extraction() == extract_entities("kafka partitions order messages")


async def test_the_port_adapter_returns_the_same_extraction():
    text = "Alice Moreau works at Acme Corp since 2021."
    assert extract_entities(text) == await HeuristicEntityExtractor().extract(text)


def test_names_and_relations_normalize():
    assert "new york city" == normalize_entity_name("  New   York\tCity ")
    assert "works_at" == normalize_relation(" Works At ")
    assert "new york city" == EntityMention("New York  City").key


def test_resolvable_mentions_include_edge_endpoints_once():
    extraction = Extraction(
        (EntityMention("Alice"), EntityMention("ALICE"), EntityMention("  ")),
        (TypedMention("alice", "uses", "Kafka"),),
    )
    assert ["alice", "kafka"] == [m.key for m in extraction.resolvable()]


@given(st.text(max_size=300))
def test_any_text_gives_entities_with_non_empty_distinct_keys(text):
    extraction = extract_entities(text)
    keys = [e.key for e in extraction.entities]
    assert all(keys) and len(keys) == len(set(keys))
    names = {e.name for e in extraction.entities}
    assert all(e.src in names and e.dst in names for e in extraction.edges)


def test_a_single_name_opening_a_sentence_that_names_another_is_a_name():
    """``Globex`` opens its sentence, but the sentence also names ``Paris``: both are
    names. Among common words alone (``Soup is hot``) it is not; another sentence's name
    does not count."""
    assert [("Globex", "name"), ("Paris", "name")] == found("Globex headquarters are in Paris")
    assert [("Lisbon", "name")] == found("Soup is hot. We moved to Lisbon.")
    assert [] == found("Soup is hot. Nightly backups run.")
