"""Every text path is linear in its input (docs/concepts.md, "The rules in one page").

Adversarial texts (long runs of one punctuation character, alternations, digits and
separators, runs of capitalized words, quotes) go through each path that reads a text an
agent wrote: entity extraction, GAS entity names, content cleaning and identity, tag and
entity-name normalization, lexical terms, the hashing embedder's tokenizer, redaction and
the contradiction heuristic. The bounds are generous (CPU seconds, not wall time, so a busy
machine does not fail them): they catch only catastrophic backtracking, which took seconds
to minutes on these texts.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, event, given, settings

from apollo_adapters.embedders import HashingEmbedder
from apollo_adapters.heuristics import extract_entities
from apollo_domain.contradiction import heuristic_contradicts
from apollo_domain.entities import normalize_entity_name, normalize_relation
from apollo_domain.errors import ValidationError
from apollo_domain.gas_rules import extract_entities as gas_entity_names
from apollo_domain.lexical import occurrences, query_terms
from apollo_domain.normalize import MAX_CONTENT_CHARS, clean_content, content_hash, normalize_tag
from apollo_domain.secrets import redact
from tests.strategies import ADVERSARIAL_UNITS, adversarial_texts, repeated

_EMBEDDER = HashingEmbedder()


def _clean(text: str) -> object:
    try:
        return clean_content(text)
    except ValidationError as refused:  # (whitespace only): a refusal is an answer too
        return refused


TEXT_PATHS: dict[str, Callable[[str], object]] = {
    "entity extraction": extract_entities,
    "GAS entity names": lambda text: gas_entity_names([text]),
    "content cleaning": _clean,
    "content identity": content_hash,
    "tag normalization": normalize_tag,
    "entity name": normalize_entity_name,
    "relation label": normalize_relation,
    "lexical terms": occurrences,
    "query terms": query_terms,
    "hashing embedder": lambda text: _EMBEDDER.embed_sync([text]),
    "redaction": redact,
    "contradiction heuristic": lambda text: heuristic_contradicts(text, "not " + text[::-1]),
}

#: CPU seconds a 20,000-character text may take on any path (linear paths take milliseconds;
#: before they were linear, some took 5 to 20 seconds).
BOUND_20K = 2.0
#: CPU seconds a 100,000-character text may take (the slowest linear path, the contradiction
#: heuristic over two such texts, takes about 0.2 s; quadratic ones took 3.5 s to minutes).
BOUND_100K = 2.0


def cpu_seconds(path: Callable[[str], object], text: str) -> float:
    started = time.process_time()
    path(text)
    return time.process_time() - started


@pytest.mark.parametrize("path", sorted(TEXT_PATHS))
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adversarial_texts(20_000))
def test_an_adversarial_text_of_20k_characters_takes_far_less_than_2_seconds(
    path: str, kind_and_text: tuple[str, str]
) -> None:
    kind, text = kind_and_text
    event(f"kind: {kind}")
    elapsed = cpu_seconds(TEXT_PATHS[path], text)
    event("timed")
    assert elapsed < BOUND_20K, f"{path} took {elapsed:.2f} s on {kind}: {text[:20]!r}..."


@pytest.mark.parametrize("name", sorted(ADVERSARIAL_UNITS))
@pytest.mark.parametrize("path", sorted(TEXT_PATHS))
def test_an_adversarial_text_at_the_content_bound_takes_bounded_time(path: str, name: str) -> None:
    """100,000 characters (the content bound) of each named kind, through every path."""
    text = repeated(ADVERSARIAL_UNITS[name], MAX_CONTENT_CHARS - 1, "x")
    assert MAX_CONTENT_CHARS == len(text)
    elapsed = cpu_seconds(TEXT_PATHS[path], text)
    assert elapsed < BOUND_100K, f"{path} took {elapsed:.2f} s on 100,000 {name}"


def test_extraction_still_finds_entities_in_a_long_adversarial_text() -> None:
    """A linear extractor is not one that gives up: entities around a 100,000-character run
    of commas are still found."""
    text = "Alice Moreau paid $1,200 for 42 kg in Lisbon. " + repeated("1,", 99_000, " ok")
    names = {entity.name for entity in extract_entities(text).entities}
    assert {"Alice Moreau", "$1,200", "42 kg", "Lisbon"} <= names


def test_a_long_number_does_not_crash_the_contradiction_heuristic() -> None:
    """int() refuses strings of more than 4,300 digits; the heuristic compares long numbers
    without it."""
    assert heuristic_contradicts("port " + "1" * 5_000, "port " + "1" * 4_999 + "2")
    assert not heuristic_contradicts("port 0" + "1" * 5_000, "port " + "1" * 5_000)
