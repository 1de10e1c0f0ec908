"""Normalization of everything an agent submits (docs/concepts.md, "The rules in one page")."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable

from . import bounds
from .bounds import Bound
from .errors import ValidationError
from .model import AccessScope, ContentType, SourceRef
from .validation import BIDI_CONTROLS, shown, storable_text

MAX_CONTENT_CHARS = bounds.CONTENT.limit
MAX_TAGS = bounds.TAG_COUNT.limit
#: The longest tag or knowledge domain, in characters after normalization (ASCII, so also in
#: bytes): far above any real tag, far below what a database index entry can hold.
MAX_TAG_CHARS = bounds.TAG.limit
MAX_AGENT_ID = bounds.AGENT_ID.limit
DEFAULT_DOMAIN = "general"
KNOWN_PROVIDERS = frozenset({"claude", "openai", "gemini", "human", "system"})
UNKNOWN_PROVIDER = "unknown"

_CONTENT_TYPE_ALIASES: dict[str, ContentType] = {
    "reasoning": ContentType.CONCEPT,
    "analysis": ContentType.CONCEPT,
    "explanation": ContentType.CONCEPT,
    "text": ContentType.OBSERVATION,
    "general": ContentType.OBSERVATION,
    "note": ContentType.OBSERVATION,
    "summary": ContentType.OBSERVATION,
    "rule": ContentType.PROCEDURE,
    "step": ContentType.PROCEDURE,
    "instruction": ContentType.PROCEDURE,
    "link": ContentType.ASSOCIATION,
    "relation": ContentType.ASSOCIATION,
    "connection": ContentType.ASSOCIATION,
    "inference": ContentType.ASSOCIATION,
    "implication": ContentType.ASSOCIATION,
}
_TAG_ALIASES = {"c#": "csharp", ".net": "dotnet", "c++": "cplusplus", "node.js": "nodejs"}
_WHITESPACE = re.compile(r"\s+")
#: Every code point with the Unicode property Default_Ignorable_Code_Point: soft hyphen,
#: combining grapheme joiner, zero-width and bidirectional marks, Hangul fillers, variation
#: selectors, tags, ... Text with or without them reads the same, so content identity drops
#: them. One character class: a linear scan.
_IGNORABLE_RANGES = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
DEFAULT_IGNORABLE = re.compile(f"[{_IGNORABLE_RANGES}]")
#: A run of what never shows, skipped at once: whitespace, C0 and C1 controls, and the
#: default-ignorable code points.
_UNSHOWN_RUN = re.compile(f"[\\s\x00-\x1f\x7f-\x9f{_IGNORABLE_RANGES}]*")
#: General categories that show nothing: format and control characters, separators.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})
_TAG_DROP = re.compile(r"[^a-z0-9_ -]")
_DASHES = re.compile(r"-+")


def clean_content(content: object) -> str:
    """NUL bytes, invalid surrogates and bidirectional controls removed
    (:func:`storable_text`), stripped; too long (``CONTENT``) or nothing visible
    (:func:`is_visible`) → :class:`ValidationError` naming ``content``."""
    if not isinstance(content, str):
        raise ValidationError("content", "must be a string")
    text = storable_text(content).strip()
    if not text and BIDI_CONTROLS.search(content):  # as invisible-only content is
        raise ValidationError(
            "content", "shows nothing: it holds only invisible, format or control characters"
        )
    if not text:
        raise ValidationError("content", "must not be empty")
    bounds.CONTENT.check(len(text))
    if not is_visible(text):
        raise ValidationError(
            "content", "shows nothing: it holds only invisible, format or control characters"
        )
    return text


def is_visible(text: str) -> bool:
    """Whether something is left of ``text`` without its default-ignorable code points,
    its format and control characters and its whitespace. Linear: runs of what never shows
    are skipped by one pattern, and the scan stops at the first visible character."""
    position, end = 0, len(text)
    while True:
        run = _UNSHOWN_RUN.match(text, position)
        position = run.end() if run is not None else position
        if position >= end:
            return False
        if unicodedata.category(text[position]) not in _INVISIBLE_CATEGORIES:
            return True
        position += 1


def canonical_content(content: str) -> str:
    """The text content identity is computed from: default-ignorable code points
    (:data:`DEFAULT_IGNORABLE`) dropped, Unicode NFKC, lowercased (and NFKC again, since
    lowercasing may decompose), whitespace runs collapsed to one space, stripped. (Neither
    NFKC nor lowercasing turns another character into a default-ignorable one, so they
    are dropped once, first: before NFKC, so that a mark between a letter and its accent
    does not keep them apart.)"""
    text = unicodedata.normalize("NFKC", DEFAULT_IGNORABLE.sub("", content))
    text = unicodedata.normalize("NFKC", text.lower())
    return _WHITESPACE.sub(" ", text).strip()


def content_hash(content: str) -> str:
    """sha256 hex of :func:`canonical_content`: NFC, NFD, NFKC and default-ignorable
    variants of a text (a soft hyphen, a zero-width joiner, a variation selector), and its
    case and whitespace variants, are one entry."""
    return hashlib.sha256(canonical_content(content).encode("utf-8")).hexdigest()


def normalize_content_type(value: object) -> ContentType:
    """Strip a leading ``:``, ``/`` and whitespace → ``_``, lowercase, resolve aliases.

    None or anything unknown is an observation.
    """
    if value is None:
        return ContentType.OBSERVATION
    if isinstance(value, ContentType):
        return value
    text = str(value).strip()
    text = text.removeprefix(":")
    text = _WHITESPACE.sub("_", text.replace("/", "_")).lower()
    if text in ContentType.__members__.values():
        return ContentType(text)
    return _CONTENT_TYPE_ALIASES.get(text, ContentType.OBSERVATION)


def normalize_tag(value: object) -> str | None:
    """One tag: NFKC (full-width ``ｋａｆｋａ`` is ``kafka``), strip, lowercase, aliases, drop
    characters outside ``[a-z0-9_ -]``, whitespace → ``-``, squeeze and trim dashes. None
    when nothing is left."""
    if value is None:
        return None
    text = unicodedata.normalize("NFKC", str(value))
    text = _WHITESPACE.sub(" ", text).strip().lower()
    text = _TAG_ALIASES.get(text, text)
    text = _TAG_DROP.sub("", text)
    text = _WHITESPACE.sub("-", text.strip())
    text = _DASHES.sub("-", text).strip("-")
    return text or None


def normalize_tags(values: Iterable[object] | None) -> tuple[str, ...]:
    """Normalized, deduplicated in order. Each tag is a string (None and tags that
    normalize to nothing are dropped); one longer than ``TAG`` after normalization, or more
    distinct tags than ``TAG_COUNT``, is a :class:`ValidationError` naming ``tags``."""
    if values is None:
        return ()
    if isinstance(values, str | bytes):
        raise ValidationError("tags", "must be a list of strings, not a single string")
    seen: dict[str, None] = {}
    for index, value in enumerate(values):
        if value is not None and not isinstance(value, str):
            raise ValidationError(
                "tags", f"tag {index} must be a string, got {type(value).__name__}"
            )
        tag = normalize_tag(value)
        if tag is not None:
            _check_length(bounds.TAG, tag, f"tag {index}")
            seen.setdefault(tag, None)
            bounds.TAG_COUNT.check(len(seen))
    return tuple(seen)


def normalize_domain(explicit: object, tags: tuple[str, ...]) -> str:
    """The explicit domain, else the first tag, else ``general``; normalized like a tag.
    An explicit domain longer than ``DOMAIN`` after normalization is a
    :class:`ValidationError` naming ``knowledge_domain``."""
    if explicit is not None and not isinstance(explicit, str):
        raise ValidationError("knowledge_domain", "must be a string")
    if explicit is not None and explicit.strip():
        domain = normalize_tag(explicit)
        if domain:
            return _check_length(bounds.DOMAIN, domain)
    return tags[0] if tags else DEFAULT_DOMAIN


def normalize_domain_filter(value: object) -> str | None:
    """A query's domain filter: None (no filter) or a domain that normalizes to something;
    anything else is a :class:`ValidationError` naming ``knowledge_domain`` (a filter that
    normalizes to nothing would silently match everything)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError("knowledge_domain", "must be a string")
    domain = normalize_tag(value)
    if domain is None:
        raise ValidationError(
            "knowledge_domain", f"{_clip(value)!r} normalizes to nothing; it filters nothing"
        )
    return _check_length(bounds.DOMAIN, domain)


def normalize_tag_filter(values: object) -> tuple[str, ...] | None:
    """A query's tag filter: None or an empty list (no filter), else the normalized tags,
    at least one of which must be left (a filter that normalizes to nothing would silently
    match everything: :class:`ValidationError` naming ``tags``)."""
    if values is None:
        return None
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise ValidationError("tags", "must be a list of strings")
    given = list(values)
    if not given:
        return None
    tags = normalize_tags(given)
    if not tags:
        raise ValidationError("tags", "every tag normalizes to nothing; the filter filters nothing")
    return tags


def _check_length(bound: Bound, value: str, what: str = "") -> str:
    """``value`` (a tag or domain once normalized) within ``bound``; the error says which."""
    try:
        return bound.text(value)
    except ValidationError as exc:
        prefix = f"{what} " if what else ""
        raise ValidationError(exc.field, f"{prefix}{exc.message} once normalized") from None


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def normalize_scope(value: object) -> AccessScope:
    if value is None:
        return AccessScope.GLOBAL
    try:
        return AccessScope(str(value).strip().lower().removeprefix(":"))
    except ValueError:
        allowed = ", ".join(s.value for s in AccessScope)
        raise ValidationError(
            "access_scope", f"must be one of {allowed}, got {shown(value)}"
        ) from None


def bounded_text(value: object, bound: Bound, field: str | None = None) -> str | None:
    """An optional free-text value: :func:`storable_text`, stripped (None when nothing is left);
    longer than ``bound`` → :class:`ValidationError` naming ``field`` (default: the bound's),
    never truncated. A value that is not a string is refused."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(field or bound.field, "must be a string")
    text = storable_text(value).strip()
    return bound.text(text, field) or None


def derive_provider(agent_id: str, explicit: object = None) -> str:
    """The explicit provider if given, else the agent id's first token when it is a known
    provider (claude, openai, gemini, human, system), else ``unknown``."""
    given = bounded_text(explicit, bounds.PROVIDER)
    if given:
        return given.lower()
    first = re.split(r"[-_]", agent_id.strip().lower(), maxsplit=1)[0]
    return first if first in KNOWN_PROVIDERS else UNKNOWN_PROVIDER


def make_source(
    agent_id: object,
    provider: object = None,
    channel: object = None,
    submitted_by: object = None,
    submitted_from: object = None,
) -> SourceRef:
    """A normalized source (each value stripped); an empty agent id, or a value over its
    bound, is a :class:`ValidationError` naming the field (never truncated)."""
    agent = bounded_text(agent_id, bounds.AGENT_ID)
    if not agent:
        raise ValidationError("agent_id", "must not be empty")
    return SourceRef(
        agent_id=agent,
        provider=derive_provider(agent, provider),
        channel=bounded_text(channel, bounds.CHANNEL),
        submitted_by=bounded_text(submitted_by, bounds.SUBMITTED_BY),
        submitted_from=bounded_text(submitted_from, bounds.SUBMITTED_FROM),
    )


__all__ = [
    "BIDI_CONTROLS",
    "DEFAULT_DOMAIN",
    "DEFAULT_IGNORABLE",
    "KNOWN_PROVIDERS",
    "MAX_CONTENT_CHARS",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "bounded_text",
    "canonical_content",
    "clean_content",
    "content_hash",
    "derive_provider",
    "is_visible",
    "make_source",
    "normalize_content_type",
    "normalize_domain",
    "normalize_domain_filter",
    "normalize_scope",
    "normalize_tag",
    "normalize_tag_filter",
    "normalize_tags",
    "storable_text",
]
