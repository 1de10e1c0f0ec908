"""Normalization of submitted content, types, tags, domains and sources (DESIGN §2)."""

from __future__ import annotations

import hashlib
import re
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apollo_domain.errors import ValidationError
from apollo_domain.model import AccessScope, ContentType
from apollo_domain.normalize import (
    MAX_CONTENT_CHARS,
    canonical_content,
    clean_content,
    content_hash,
    derive_provider,
    make_source,
    normalize_content_type,
    normalize_domain,
    normalize_scope,
    normalize_tag,
    normalize_tags,
)
from tests.strategies import (
    KNOWN_PROVIDER_NAMES,
    agent_ids,
    ascii_words,
    raw_tag_lists,
    raw_tags,
    whitespace_runs,
)

# -- content types ----------------------------------------------------------------------

CONTENT_TYPE_TABLE = [
    ("fact", ContentType.FACT),
    ("concept", ContentType.CONCEPT),
    ("procedure", ContentType.PROCEDURE),
    ("association", ContentType.ASSOCIATION),
    ("observation", ContentType.OBSERVATION),
    ("reasoning", ContentType.CONCEPT),
    ("analysis", ContentType.CONCEPT),
    ("explanation", ContentType.CONCEPT),
    ("text", ContentType.OBSERVATION),
    ("general", ContentType.OBSERVATION),
    ("note", ContentType.OBSERVATION),
    ("summary", ContentType.OBSERVATION),
    ("rule", ContentType.PROCEDURE),
    ("step", ContentType.PROCEDURE),
    ("instruction", ContentType.PROCEDURE),
    ("link", ContentType.ASSOCIATION),
    ("relation", ContentType.ASSOCIATION),
    ("connection", ContentType.ASSOCIATION),
    ("inference", ContentType.ASSOCIATION),
    ("implication", ContentType.ASSOCIATION),
]


@pytest.mark.parametrize(("raw", "expected"), CONTENT_TYPE_TABLE)
def test_content_type_names_and_aliases(raw: str, expected: ContentType) -> None:
    """Every content type and every alias of DESIGN §2 maps to its type."""
    assert expected == normalize_content_type(raw)


@pytest.mark.parametrize(("raw", "expected"), CONTENT_TYPE_TABLE)
def test_content_type_aliases_ignore_case_and_a_leading_colon(
    raw: str, expected: ContentType
) -> None:
    """`:Name`, NAME and surrounding spaces name the same type."""
    assert expected == normalize_content_type(f" :{raw.upper()} ")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (":Fact", ContentType.FACT),
        ("FACT", ContentType.FACT),
        ("some/thing", ContentType.OBSERVATION),
        (None, ContentType.OBSERVATION),
        ("", ContentType.OBSERVATION),
        ("opinion", ContentType.OBSERVATION),
        (42, ContentType.OBSERVATION),
        (ContentType.PROCEDURE, ContentType.PROCEDURE),
    ],
)
def test_content_type_edge_cases(raw: object, expected: ContentType) -> None:
    """Symbols and upper case resolve; None, unknown names and odd values are observations."""
    assert expected == normalize_content_type(raw)


@given(st.text())
def test_content_type_is_always_a_content_type(raw: str) -> None:
    """Any submitted text resolves to one of the five content types."""
    assert normalize_content_type(raw) in set(ContentType)


# -- tags -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("c#", "csharp"),
        (" C# ", "csharp"),
        (".net", "dotnet"),
        (".NET", "dotnet"),
        ("c++", "cplusplus"),
        ("node.js", "nodejs"),
        ("Node.JS", "nodejs"),
    ],
)
def test_tag_aliases(raw: str, expected: str) -> None:
    """The four tag aliases apply after stripping and lowercasing."""
    assert expected == normalize_tag(raw)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Python", "python"),
        ("Machine Learning", "machine-learning"),
        ("  machine   learning  ", "machine-learning"),
        ("a - b", "a-b"),
        ("--x--", "x"),
        ("x---y", "x-y"),
        ("hello!world?", "helloworld"),
        ("snake_case", "snake_case"),
        ("café", "caf"),
        ("v2.0", "v20"),
        ("!!!", None),
        ("   ", None),
        ("-", None),
        ("", None),
    ],
)
def test_tag_dropping_and_dash_rules(raw: str, expected: str | None) -> None:
    """Characters outside [a-z0-9_ -] drop, spaces become one dash, dashes trim; empty → None."""
    assert expected == normalize_tag(raw)


TAG_SHAPE = re.compile(r"[a-z0-9_]+(?:-[a-z0-9_]+)*")


@given(raw_tags)
def test_a_normalized_tag_has_the_canonical_shape(raw: str) -> None:
    """A kept tag is [a-z0-9_] words joined by single dashes, with no dash at either end."""
    tag = normalize_tag(raw)
    assert tag is None or TAG_SHAPE.fullmatch(tag) is not None


@given(raw_tags)
def test_tag_normalization_is_idempotent(raw: str) -> None:
    """Normalizing a normalized tag changes nothing."""
    tag = normalize_tag(raw)
    if tag is not None:
        assert tag == normalize_tag(tag)


def test_tags_deduplicate_keeping_first_order() -> None:
    """Tags that normalize alike count once, at their first position."""
    expected = ("python", "csharp", "machine-learning")
    assert expected == normalize_tags(["Python", "C#", "python ", "Machine Learning", "c#", "!!"])


def test_tags_keep_at_most_ten() -> None:
    """Only the first ten distinct tags are kept."""
    raw = [f"tag{i}" for i in range(15)]
    assert tuple(raw[:10]) == normalize_tags(raw)


def test_duplicates_do_not_use_up_the_ten_tags() -> None:
    """The limit applies after deduplication."""
    raw = ["same"] * 20 + [f"t{i}" for i in range(12)]
    assert ("same", *(f"t{i}" for i in range(9))) == normalize_tags(raw)


@given(raw_tag_lists)
def test_tags_are_the_first_ten_distinct_normalized_tags(raw: list[str]) -> None:
    """normalize_tags == the distinct non-empty normalize_tag results, in order, at most ten."""
    expected: list[str] = []
    for value in raw:
        tag = normalize_tag(value)
        if tag is not None and tag not in expected:
            expected.append(tag)
    assert tuple(expected[:10]) == normalize_tags(raw)


def test_no_tags() -> None:
    """None is no tags."""
    assert () == normalize_tags(None)


def test_missing_tags_in_a_list_are_dropped() -> None:
    """A null in a tag list (JSON null, None) is no tag, not the tag 'none'."""
    assert ("python", "sql") == normalize_tags(["python", None, "sql"])


def test_a_single_string_is_not_a_tag_list() -> None:
    """A bare string (which would iterate by character) is rejected, naming 'tags'."""
    with pytest.raises(ValidationError) as raised:
        normalize_tags("python")
    assert "tags" == raised.value.field


# -- knowledge domain -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("explicit", "tags", "expected"),
    [
        ("Machine Learning", ("python",), "machine-learning"),
        ("C#", (), "csharp"),
        (None, ("python", "sql"), "python"),
        ("   ", ("python",), "python"),
        ("!!!", ("python",), "python"),
        (None, (), "general"),
        ("", (), "general"),
    ],
)
def test_domain_defaults(explicit: object, tags: tuple[str, ...], expected: str) -> None:
    """The explicit domain (normalized like a tag), else the first tag, else 'general'."""
    assert expected == normalize_domain(explicit, tags)


# -- access scope -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, AccessScope.GLOBAL),
        ("global", AccessScope.GLOBAL),
        (" Team ", AccessScope.TEAM),
        (":private", AccessScope.PRIVATE),
    ],
)
def test_scope_names(raw: object, expected: AccessScope) -> None:
    """Scopes are case-insensitive, may be symbols, and default to global."""
    assert expected == normalize_scope(raw)


def test_unknown_scope_is_a_validation_error() -> None:
    """An unknown scope names the 'access_scope' field."""
    with pytest.raises(ValidationError) as raised:
        normalize_scope("public")
    assert "access_scope" == raised.value.field


# -- content ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("\x00Postgres\x00 uses MVCC\x00", "Postgres uses MVCC"),
        ("a\ud800b", "ab"),
        ("\udfffzz", "zz"),
        ("  padded \n\t", "padded"),
        ("naïve café ☕", "naïve café ☕"),
    ],
)
def test_content_cleaning(raw: str, expected: str) -> None:
    """NUL bytes and lone surrogates are removed and the text stripped; the rest is kept."""
    assert expected == clean_content(raw)


@pytest.mark.parametrize("raw", ["", "   ", "\x00", "\x00 \x00\n", "\ud800", None, 42, b"bytes"])
def test_empty_or_non_text_content_is_rejected(raw: object) -> None:
    """Nothing left after cleaning (or no string at all) → ValidationError on 'content'."""
    with pytest.raises(ValidationError) as raised:
        clean_content(raw)
    assert "content" == raised.value.field


def test_content_at_the_limit_is_kept() -> None:
    """Exactly 100,000 characters (after stripping) are allowed."""
    text = "x" * MAX_CONTENT_CHARS
    assert text == clean_content(f"  {text}  ")


def test_content_over_the_limit_is_rejected() -> None:
    """More than 100,000 characters → ValidationError on 'content'."""
    with pytest.raises(ValidationError) as raised:
        clean_content("x" * (MAX_CONTENT_CHARS + 1))
    assert "content" == raised.value.field


@given(st.text(min_size=1))
def test_cleaned_content_is_stripped_valid_text(raw: str) -> None:
    """Whatever is kept has no NUL, encodes as UTF-8 and has no surrounding whitespace."""
    try:
        text = clean_content(raw)
    except ValidationError as error:
        assert "content" == error.field
        return
    assert "\x00" not in text
    assert text == text.strip()
    text.encode("utf-8")  # raises on a lone surrogate


# -- content hash -----------------------------------------------------------------------


def test_content_hash_is_sha256_of_the_canonical_text() -> None:
    """Lowercased, whitespace runs collapsed to one space, then sha256 hex."""
    expected = hashlib.sha256(b"postgres uses mvcc").hexdigest()
    assert expected == content_hash("Postgres   uses\n\tMVCC")


@given(st.lists(ascii_words, min_size=1, max_size=6), st.data())
def test_content_hash_ignores_case_and_whitespace_runs(
    words: list[str], data: st.DataObject
) -> None:
    """Two texts differing only in letter case and whitespace runs share a hash."""
    spaced = "".join(w + data.draw(whitespace_runs) for w in words).strip()
    assert content_hash(" ".join(words).lower()) == content_hash(spaced.upper())


def test_content_hash_distinguishes_words() -> None:
    """Different words make a different hash."""
    assert content_hash("port 179") != content_hash("port 180")


# -- sources ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agent_id", "explicit", "expected"),
    [
        ("claude-x", None, "claude"),
        ("openai_y", None, "openai"),
        ("gemini-pro-2", None, "gemini"),
        ("human_reviewer", None, "human"),
        ("system", None, "system"),
        ("Claude-Opus", None, "claude"),
        ("foo", None, "unknown"),
        ("claudex", None, "unknown"),
        ("my-claude", None, "unknown"),
        ("claude-x", "gemini", "gemini"),
        ("foo", "Acme", "acme"),
        ("claude-x", "", "claude"),
    ],
)
def test_provider_derivation(agent_id: str, explicit: object, expected: str) -> None:
    """Explicit provider wins; else the agent id's first token if known; else 'unknown'."""
    assert expected == derive_provider(agent_id, explicit)


@given(agent_ids)
def test_derived_provider_is_known_or_unknown(agent_id: str) -> None:
    """Without an explicit value the provider is one of the known five or 'unknown'."""
    assert derive_provider(agent_id) in {*KNOWN_PROVIDER_NAMES, "unknown"}


def test_over_long_source_fields_are_truncated() -> None:
    """agent_id ≤ 100, provider ≤ 50, channel ≤ 100, submitted_by/from ≤ 255 characters."""
    source = make_source(
        "a" * 150,
        provider="p" * 80,
        channel="c" * 150,
        submitted_by="b" * 300,
        submitted_from="f" * 300,
    )
    expected = ("a" * 100, "p" * 50, "c" * 100, "b" * 255, "f" * 255)
    actual = (
        source.agent_id,
        source.provider,
        source.channel,
        source.submitted_by,
        source.submitted_from,
    )
    assert expected == actual


def test_short_source_fields_are_kept() -> None:
    """Values within the limits are kept (stripped); absent optional values stay None."""
    source = make_source(" claude-researcher ", channel=" slack ")
    expected = ("claude-researcher", "claude", "slack", None, None)
    actual = (
        source.agent_id,
        source.provider,
        source.channel,
        source.submitted_by,
        source.submitted_from,
    )
    assert expected == actual


@pytest.mark.parametrize("agent_id", [None, "", "   ", "\x00"])
def test_a_source_needs_an_agent_id(agent_id: object) -> None:
    """An empty agent id is a ValidationError on 'agent_id'."""
    with pytest.raises(ValidationError) as raised:
        make_source(agent_id)
    assert "agent_id" == raised.value.field


ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
unicode_texts = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30
)


@given(unicode_texts, st.sampled_from(["NFC", "NFD", "NFKC", "NFKD"]))
def test_content_hash_is_the_same_in_every_unicode_normal_form(text: str, form: str) -> None:
    """Composed, decomposed and compatibility forms of a text are one entry."""
    assert content_hash(unicodedata.normalize("NFKC", text)) == content_hash(
        unicodedata.normalize(form, text)
    )


@given(unicode_texts, st.lists(st.tuples(st.integers(0, 30), st.sampled_from(ZERO_WIDTH))))
def test_content_hash_ignores_zero_width_characters(
    text: str, inserts: list[tuple[int, str]]
) -> None:
    """Zero-width spaces, joiners, the word joiner and the BOM never change the hash."""
    padded = text
    for position, char in inserts:
        padded = padded[:position] + char + padded[position:]
    assert content_hash(text.replace("\ufeff", "")) == content_hash(padded)


def test_content_hash_folds_unicode_variants_of_one_text() -> None:
    """NFC, NFD, fullwidth and zero-width variants hash like the plain text."""
    plain = content_hash("Café crème costs €3")
    variants = [
        "Cafe\u0301 cre\u0300me costs €3",
        "Caf\u200bé crème\ufeff costs €3",
        "\uff23afé crème costs €\uff13",
    ]
    assert [plain] * 3 == [content_hash(v) for v in variants]
    assert canonical_content("Cafe\u0301\u200d  CRÈME") == "café crème"
