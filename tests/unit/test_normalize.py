"""Normalization of submitted content, types, tags, domains and sources (docs/concepts.md, "The
rules in
one page")."""

from __future__ import annotations

import hashlib
import re
import unicodedata

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from apollo_domain.bounds import SUBMITTED_BY
from apollo_domain.errors import ValidationError
from apollo_domain.model import AccessScope, ContentType, SourceRef
from apollo_domain.normalize import (
    BIDI_CONTROLS,
    DEFAULT_IGNORABLE,
    MAX_CONTENT_CHARS,
    bounded_text,
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
    DEFAULT_IGNORABLE_RANGES,
    KNOWN_PROVIDER_NAMES,
    agent_ids,
    ascii_words,
    default_ignorables,
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
    """Every content type and every alias maps to its type."""
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


def test_more_than_ten_distinct_tags_are_refused_never_cut() -> None:
    """Ten distinct tags are kept; an eleventh is a ValidationError naming tags (cutting the
    list silently used to drop what the caller sent)."""
    raw = [f"tag{i}" for i in range(11)]
    assert tuple(raw[:10]) == normalize_tags(raw[:10])
    with pytest.raises(ValidationError) as caught:
        normalize_tags(raw)
    assert "tags" == caught.value.field
    assert "at most 10 items" in caught.value.message


def test_duplicates_do_not_use_up_the_ten_tags() -> None:
    """The limit applies after deduplication."""
    raw = ["same"] * 20 + [f"t{i}" for i in range(9)]
    assert ("same", *(f"t{i}" for i in range(9))) == normalize_tags(raw)


@given(raw_tag_lists)
def test_tags_are_the_distinct_normalized_tags_or_refused(raw: list[str]) -> None:
    """normalize_tags == the distinct non-empty normalize_tag results, in order, when there
    are at most ten of them; more is a ValidationError naming tags."""
    expected: list[str] = []
    for value in raw:
        tag = normalize_tag(value)
        if tag is not None and tag not in expected:
            expected.append(tag)
    if len(expected) > 10:
        event("more than ten distinct tags: refused")
        with pytest.raises(ValidationError) as caught:
            normalize_tags(raw)
        assert "tags" == caught.value.field
    else:
        event("at most ten distinct tags: kept")
        assert tuple(expected) == normalize_tags(raw)


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


BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # "Trojan Source": an override that shows the end of a line before its start
        ("access = 'user\u202e \u2066// admin\u2069 \u2066'", "access = 'user // admin '"),
        (f"{BIDI}kept{BIDI}", "kept"),
        ("left\u200emark\u200fright", "left\u200emark\u200fright"),  # LRM, RLM stay
        ("שלום \u2067مرحبا\u2069", "שלום مرحبا"),  # right-to-left letters stay
        ("\u202e\x00\ud800x", "x"),
    ],
)
def test_bidirectional_controls_are_removed_and_marks_and_letters_kept(
    raw: str, expected: str
) -> None:
    assert expected == clean_content(raw)


def test_content_of_bidirectional_controls_only_is_refused_as_invisible() -> None:
    with pytest.raises(ValidationError, match="shows nothing") as raised:
        clean_content(f" {BIDI} \u202e ")
    assert "content" == raised.value.field


def test_free_text_fields_lose_bidirectional_controls_too() -> None:
    assert "agent-7" == bounded_text("\u202eagent-7\u2069", SUBMITTED_BY)
    assert bounded_text(BIDI, SUBMITTED_BY) is None


@given(st.text(alphabet=st.sampled_from([*BIDI, "a", "\u200f", " ", "\x00"]), min_size=1))
def test_no_bidirectional_control_is_ever_kept(raw: str) -> None:
    try:
        text = clean_content(raw)
    except ValidationError as error:
        event("refused")
        assert "content" == error.field
        assert "a" not in raw  # only marks, controls, NUL and spaces: nothing shows
        return
    event("kept")
    assert BIDI_CONTROLS.search(text) is None
    assert text == clean_content(text)  # cleaning is idempotent


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


SOURCE_FIELDS = {
    "agent_id": 100,
    "source_provider": 50,
    "source_channel": 100,
    "submitted_by": 255,
    "submitted_from": 255,
}


def _source(**values: str) -> SourceRef:
    return make_source(
        values.get("agent_id", "claude-a"),
        provider=values.get("source_provider"),
        channel=values.get("source_channel"),
        submitted_by=values.get("submitted_by"),
        submitted_from=values.get("submitted_from"),
    )


def test_source_fields_at_their_bounds_are_kept_whole() -> None:
    """agent_id ≤ 100, provider ≤ 50, channel ≤ 100, submitted_by/from ≤ 255 characters."""
    source = _source(**{name: name[0] * limit for name, limit in SOURCE_FIELDS.items()})
    expected = tuple(name[0] * limit for name, limit in SOURCE_FIELDS.items())
    actual = (
        source.agent_id,
        source.provider,
        source.channel,
        source.submitted_by,
        source.submitted_from,
    )
    assert expected == actual


@pytest.mark.parametrize(("name", "limit"), SOURCE_FIELDS.items())
def test_an_over_long_source_field_is_refused_never_truncated(name: str, limit: int) -> None:
    """One character over the bound is a ValidationError naming the field."""
    with pytest.raises(ValidationError) as caught:
        _source(**{name: "x" * (limit + 1)})
    assert name == caught.value.field


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


@given(
    unicode_texts,
    st.lists(st.tuples(st.integers(0, 30), default_ignorables), min_size=1, max_size=5),
)
def test_content_hash_folds_every_default_ignorable_code_point(
    text: str, inserts: list[tuple[int, str]]
) -> None:
    """A soft hyphen, a combining grapheme joiner, a variation selector, a tag character or
    any other Default_Ignorable_Code_Point inserted anywhere never changes the hash."""
    padded = text
    for position, char in inserts:
        padded = padded[:position] + char + padded[position:]
    event(f"inserted U+{ord(inserts[0][1]):04X} block {ord(inserts[0][1]) >> 8:X}")
    assert content_hash(DEFAULT_IGNORABLE.sub("", text)) == content_hash(padded)


@pytest.mark.parametrize("mark", ["\u00ad", "\u034f", "\ufe0f", "\u180e", "\U000e0041"])
def test_one_text_with_a_default_ignorable_mark_hashes_like_the_text(mark: str) -> None:
    plain = "Kafka partitions order messages"
    assert content_hash(plain) == content_hash(f"Kaf{mark}ka parti{mark}tions order messages")


def test_every_default_ignorable_code_point_is_folded_and_nothing_else() -> None:
    """The character class holds exactly the property's ranges."""
    ignorable = {code for low, high in DEFAULT_IGNORABLE_RANGES for code in range(low, high + 1)}
    folded = {code for code in range(0x110000) if DEFAULT_IGNORABLE.fullmatch(chr(code))}
    assert ignorable == folded


def test_neither_nfkc_nor_lowercasing_makes_a_default_ignorable_code_point() -> None:
    """Why canonical_content drops them once, before NFKC: no other character becomes one
    (U+3164 and U+FFA0 become U+1160, but all three are dropped first)."""
    made = []
    for code in range(0x110000):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF or DEFAULT_IGNORABLE.match(char):
            continue
        folded = unicodedata.normalize("NFKC", char)
        if DEFAULT_IGNORABLE.search(folded + unicodedata.normalize("NFKC", folded.lower())):
            made.append(f"U+{code:04X}")
    assert [] == made


def test_a_mark_between_a_letter_and_its_accent_does_not_keep_them_apart() -> None:
    assert content_hash("caf\u00e9") == content_hash("cafe\u034f\u0301")


@pytest.mark.parametrize(
    "content",
    ["\u200b\u200c\u200d", "\u00ad", "\u034f\ufe0f", "\u2060 \ufeff\t", "\x01\x02", "\u3164"],
)
def test_content_that_shows_nothing_is_refused(content: str) -> None:
    """Zero-width, format and control characters alone are an invisible entry."""
    with pytest.raises(ValidationError) as caught:
        clean_content(content)
    assert "content" == caught.value.field


@pytest.mark.parametrize("content", ["a\u200b", "\u034fé", "😀\ufe0f", "\u0301"])
def test_content_with_something_visible_is_kept(content: str) -> None:
    assert content == clean_content(content)


def test_a_full_width_domain_and_tag_fold_like_their_ascii_text() -> None:
    """NFKC first: ｋａｆｋａ is kafka, not a domain that normalizes to nothing."""
    assert "kafka" == normalize_domain("ｋａｆｋａ", ())
    assert ("kafka", "ml") == normalize_tags(["ｋａｆｋａ", "ＭＬ"])
