"""Texts and episodes (docs/texts.md): a document or a conversation as Apollo keeps it.

A caller gives ``store_text`` a string or a list of turns (``{speaker, text, at}``).
:func:`read_turns` validates it into :class:`Turn` values (a string is one turn without a
speaker); a splitter (:class:`~apollo_domain.ports.TextSplitter`) makes the turns into
:class:`Statement` values, each of which is stored through the ordinary write path and
remembers its episode and its position there. Without a language model the splitter is
:func:`split_sentences`: deterministic, turn by turn and sentence by sentence.

An episode's identity is what was said, by whom, where: the same text (by
:func:`~apollo_domain.normalize.content_hash` of its canonical form, turn by turn) from
the same agent in the same deduplication partition is the same episode, so giving it again
creates nothing new (:func:`episode_id`).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from attrs import frozen

from . import bounds as b
from .entities import Extraction
from .errors import ValidationError
from .model import AccessScope
from .normalize import canonical_content, is_visible
from .validation import shown, storable_text

#: The namespace of episode ids (:func:`episode_id`): any fixed UUID would do.
EPISODE_NAMESPACE: Final = uuid.UUID("6d1c1f5e-2f63-4a51-9d7e-1f0c9a7e0b3d")
#: The key of an entry's context that says where in its episode its statement was said
#: (the episode's id, the turn, its speaker and time); written by Apollo alone.
EPISODE_CONTEXT: Final = "episode"


@frozen
class Turn:
    """One turn of a conversation (or the whole of a document): its text, who said it and
    when, as far as the caller said."""

    text: str
    speaker: str | None = None
    at: datetime | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "speaker": self.speaker,
            "text": self.text,
            "at": None if self.at is None else self.at.isoformat(),
        }


def turn_from_json(value: Mapping[str, Any]) -> Turn:
    """A turn as :meth:`Turn.as_json` wrote it (a store reading an episode back)."""
    at = value.get("at")
    return Turn(
        value["text"],
        value.get("speaker"),
        None if at is None else datetime.fromisoformat(at).astimezone(UTC),
    )


@frozen
class Statement:
    """One statement a text was split into: its text, the speaker and time of the turn it
    came from (``turn``: that turn's index), and, when a language model read it, the
    entities and typed edges it names (None: the entity extractor reads the text)."""

    text: str
    turn: int = 0
    speaker: str | None = None
    at: datetime | None = None
    extraction: Extraction | None = None

    @property
    def content(self) -> str:
        """What is stored: the text, after its speaker when it has one (``"alice: ..."``),
        so a statement keeps who said it wherever it is shown or searched."""
        return self.text if self.speaker is None else f"{self.speaker}: {self.text}"


@frozen
class Episode:
    """A text as it was given (``turns``), by whom (``agent_id``), where (scope and owner,
    as an entry's) and when; ``statements``: how many statements it was split into."""

    id: uuid.UUID
    agent_id: str
    access_scope: AccessScope
    owner_id: str | None
    created_at: datetime
    turns: tuple[Turn, ...]
    statements: int
    conversation: bool  # given as a list of turns (else as one string)

    def raw(self) -> str | list[dict[str, Any]]:
        """The text in the shape it was given: a string, or the list of turns."""
        if not self.conversation:
            return self.turns[0].text
        return [turn.as_json() for turn in self.turns]


def read_turns(text: object) -> tuple[tuple[Turn, ...], bool]:
    """``text`` (a string, or a list of ``{speaker, text, at}`` objects) as turns, and
    whether it was a conversation. :class:`ValidationError` naming ``text`` or
    ``text[<i>].<key>`` for anything else, over :data:`~apollo_domain.bounds.TEXT` in all or
    :data:`~apollo_domain.bounds.TURNS` turns, or showing nothing at all."""
    if isinstance(text, str):
        turns: tuple[Turn, ...] = (Turn(storable_text(text)),)
        conversation = False
    elif isinstance(text, Sequence) and not isinstance(text, bytes | bytearray):
        b.TURNS.check(len(text), "text")
        turns = tuple(_turn(index, item) for index, item in enumerate(text))
        conversation = True
    else:
        raise ValidationError(
            "text", f"must be a string or a list of {{speaker, text, at}} turns, got {shown(text)}"
        )
    b.TEXT.check(sum(len(turn.text) for turn in turns), "text")
    if not any(is_visible(turn.text) for turn in turns):
        raise ValidationError("text", "must show something (not only invisible characters)")
    return turns, conversation


def _turn(index: int, item: object) -> Turn:
    where = f"text[{index}]"
    if not isinstance(item, Mapping):
        raise ValidationError(where, f"must be an object {{speaker, text, at}}, got {shown(item)}")
    unknown = sorted(str(key) for key in item if key not in ("speaker", "text", "at"))
    if unknown:
        raise ValidationError(f"{where}.{unknown[0]}", "is not a field of a turn")
    words = item.get("text")
    if not isinstance(words, str):
        raise ValidationError(f"{where}.text", f"must be a string, got {shown(words)}")
    speaker = item.get("speaker")
    if speaker is not None:
        if not isinstance(speaker, str):
            raise ValidationError(f"{where}.speaker", f"must be a string, got {shown(speaker)}")
        speaker = " ".join(storable_text(speaker).split()) or None
        if speaker is not None:
            b.SPEAKER.check(len(speaker), f"{where}.speaker")
    return Turn(storable_text(words), speaker, _time(f"{where}.at", item.get("at")))


def _time(where: str, value: object) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime) and value.tzinfo is not None:  # a library caller's
        return value.astimezone(UTC)
    if not isinstance(value, str) or len(value) > 40:
        raise ValidationError(where, f"must be an ISO 8601 time, got {shown(value)}")
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError(where, f"must be an ISO 8601 time, got {shown(value)}") from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def episode_id(
    agent_id: str, access_scope: AccessScope, owner_id: str | None, turns: Sequence[Turn]
) -> uuid.UUID:
    """The id of the episode these turns make for this agent in this partition: the same
    for the same canonical text (case, width and whitespace variants are one text, as for
    entries), speakers and times, so the same text given again is found, not stored again."""
    parts = [agent_id, access_scope.value, owner_id or ""]
    for turn in turns:
        parts += [turn.speaker or "", "" if turn.at is None else turn.at.isoformat()]
        parts.append(canonical_content(turn.text))
    return uuid.uuid5(EPISODE_NAMESPACE, "\x1f".join(parts))


# ------------------------------------------------------------------ the deterministic split

# A sentence ends at . ! ? or … (or one of them and a closing quote or bracket) before white
# space and a start that is not lowercase, at a blank line, and before a list item: "e.g.
# this" and "3.5" end none.
_SENTENCE_END = re.compile(
    r"(?:(?<=[.!?…])|(?<=[.!?…][\"')\]»”’]))\s+(?=[^a-z\s])|\n\s*\n|\n(?=\s*[-*•]\s)"
)
#: Words that stand for or lean on something said before: a sentence opening with one keeps its
#: predecessor (split apart, "It listens on 5432." would no longer say what does).
ANAPHORA: Final = frozenset(
    [
        "it",
        "its",
        "it's",
        "this",
        "that",
        "these",
        "those",
        "they",
        "them",
        "their",
        "theirs",
        "he",
        "she",
        "him",
        "her",
        "his",
        "hers",
        "there",
        "then",
        "also",
        "too",
        "which",
        "so",
    ]
)
#: A sentence of fewer words than this is too thin to stand alone ("Yes.", "Sure, why not?").
MIN_WORDS: Final = 3
_WORD = re.compile(r"\w+(?:['’]\w+)?")


def split_sentences(turns: Sequence[Turn]) -> list[Statement]:
    """The deterministic split: each turn into its sentences, in order, each keeping its
    turn's speaker and time. A sentence that opens with a word standing for something said
    before (:data:`ANAPHORA`) or has fewer than :data:`MIN_WORDS` words joins the sentence
    before it in its turn, or, at the turn's start, the first one after it that stands
    alone ("Yes. The queue took an hour." is one statement). Turns that show nothing give
    nothing; a sentence is never cut (``store_text`` refuses one over
    :data:`~apollo_domain.bounds.STATEMENT`)."""
    statements: list[Statement] = []
    for index, turn in enumerate(turns):
        for text in _sentences(turn.text):
            statements.append(Statement(text, index, turn.speaker, turn.at))
    return statements


def _sentences(text: str) -> list[str]:
    kept: list[str] = []
    opening = ""  # leaning sentences before the turn's first that stands alone
    for raw in _SENTENCE_END.split(text):
        sentence = " ".join(raw.split())
        if not is_visible(sentence):
            continue
        words = _WORD.findall(sentence.lower())
        leans = not words or len(words) < MIN_WORDS or words[0] in ANAPHORA
        if kept and leans:
            kept[-1] = f"{kept[-1]} {sentence}"
        elif leans:
            opening = f"{opening} {sentence}".lstrip()
        else:
            kept.append(f"{opening} {sentence}".lstrip())
            opening = ""
    if opening:
        kept.append(opening)
    return kept


class SentenceSplitter:
    """The splitter used without a language model: :func:`split_sentences`."""

    async def split(self, turns: Sequence[Turn]) -> list[Statement]:
        return split_sentences(turns)


__all__ = [
    "ANAPHORA",
    "EPISODE_CONTEXT",
    "MIN_WORDS",
    "Episode",
    "SentenceSplitter",
    "Statement",
    "Turn",
    "episode_id",
    "read_turns",
    "split_sentences",
    "turn_from_json",
]
