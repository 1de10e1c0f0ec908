"""Normalization of everything an agent submits (DESIGN §2)."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable

from .errors import ValidationError
from .model import AccessScope, ContentType, SourceRef

MAX_CONTENT_CHARS = 100_000
MAX_TAGS = 10
#: The longest tag or knowledge domain, in characters after normalization (ASCII, so also in
#: bytes): far above any real tag, far below what a database index entry can hold.
MAX_TAG_CHARS = 64
MAX_AGENT_ID = 100
MAX_PROVIDER = 50
MAX_CHANNEL = 100
MAX_SUBMITTER = 255
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
_ZERO_WIDTH = re.compile("[\u200b-\u200d\u2060\ufeff]")
_TAG_DROP = re.compile(r"[^a-z0-9_ -]")
_DASHES = re.compile(r"-+")


def clean_content(content: object) -> str:
    """NUL bytes removed, invalid surrogates dropped, stripped; empty or too long → error."""
    if not isinstance(content, str):
        raise ValidationError("content", "must be a string")
    text = content.replace("\x00", "")
    text = text.encode("utf-8", "ignore").decode("utf-8")  # lone surrogates cannot encode
    text = text.strip()
    if not text:
        raise ValidationError("content", "must not be empty")
    if len(text) > MAX_CONTENT_CHARS:
        raise ValidationError(
            "content", f"is {len(text)} characters; at most {MAX_CONTENT_CHARS} are allowed"
        )
    return text


def canonical_content(content: str) -> str:
    """The text content identity is computed from: zero-width characters (U+200B..U+200D,
    U+2060, U+FEFF) dropped, Unicode NFKC, lowercased (and NFKC again, since lowercasing
    may decompose), whitespace runs collapsed to one space, stripped."""
    text = unicodedata.normalize("NFKC", _ZERO_WIDTH.sub("", content))
    text = unicodedata.normalize("NFKC", text.lower())
    return _WHITESPACE.sub(" ", text).strip()


def content_hash(content: str) -> str:
    """sha256 hex of :func:`canonical_content`: NFC, NFD, NFKC and zero-width variants of a
    text, and its case and whitespace variants, are one entry."""
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
    """One tag: strip, lowercase, aliases, drop characters outside ``[a-z0-9_ -]``,
    whitespace → ``-``, squeeze and trim dashes. None when nothing is left."""
    if value is None:
        return None
    text = _WHITESPACE.sub(" ", str(value)).strip().lower()
    text = _TAG_ALIASES.get(text, text)
    text = _TAG_DROP.sub("", text)
    text = _WHITESPACE.sub("-", text.strip())
    text = _DASHES.sub("-", text).strip("-")
    return text or None


def normalize_tags(values: Iterable[object] | None) -> tuple[str, ...]:
    """Normalized, deduplicated in order, at most ten. Each tag is a string (None and tags
    that normalize to nothing are dropped); one longer than ``MAX_TAG_CHARS`` after
    normalization is a :class:`ValidationError` naming ``tags``."""
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
            _check_length("tags", tag, f"tag {index} ")
            seen.setdefault(tag, None)
    return tuple(seen)[:MAX_TAGS]


def normalize_domain(explicit: object, tags: tuple[str, ...]) -> str:
    """The explicit domain, else the first tag, else ``general``; normalized like a tag.
    An explicit domain longer than ``MAX_TAG_CHARS`` after normalization is a
    :class:`ValidationError` naming ``knowledge_domain``."""
    if explicit is not None and not isinstance(explicit, str):
        raise ValidationError("knowledge_domain", "must be a string")
    if explicit is not None and explicit.strip():
        domain = normalize_tag(explicit)
        if domain:
            return _check_length("knowledge_domain", domain)
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
    return _check_length("knowledge_domain", domain)


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


def _check_length(name: str, value: str, what: str = "") -> str:
    if len(value) > MAX_TAG_CHARS:
        raise ValidationError(
            name,
            f"{what}is {len(value)} characters long after normalization; "
            f"at most {MAX_TAG_CHARS} are allowed",
        )
    return value


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def normalize_scope(value: object) -> AccessScope:
    if value is None:
        return AccessScope.GLOBAL
    try:
        return AccessScope(str(value).strip().lower().removeprefix(":"))
    except ValueError:
        allowed = ", ".join(s.value for s in AccessScope)
        raise ValidationError("access_scope", f"must be one of {allowed}, got {value!r}") from None


def truncate(value: object, limit: int) -> str | None:
    if value is None:
        return None
    text = str(value).replace("\x00", "").strip()
    return text[:limit].rstrip() or None


def derive_provider(agent_id: str, explicit: object = None) -> str:
    """The explicit provider if given, else the agent id's first token when it is a known
    provider (claude, openai, gemini, human, system), else ``unknown``."""
    given = truncate(explicit, MAX_PROVIDER)
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
    """A normalized source; over-long values are truncated, an empty agent id is an error."""
    agent = truncate(agent_id, MAX_AGENT_ID)
    if not agent:
        raise ValidationError("agent_id", "must not be empty")
    return SourceRef(
        agent_id=agent,
        provider=derive_provider(agent, provider),
        channel=truncate(channel, MAX_CHANNEL),
        submitted_by=truncate(submitted_by, MAX_SUBMITTER),
        submitted_from=truncate(submitted_from, MAX_SUBMITTER),
    )


__all__ = [
    "DEFAULT_DOMAIN",
    "KNOWN_PROVIDERS",
    "MAX_CONTENT_CHARS",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "canonical_content",
    "clean_content",
    "content_hash",
    "derive_provider",
    "make_source",
    "normalize_content_type",
    "normalize_domain",
    "normalize_domain_filter",
    "normalize_scope",
    "normalize_tag",
    "normalize_tag_filter",
    "normalize_tags",
    "truncate",
]
