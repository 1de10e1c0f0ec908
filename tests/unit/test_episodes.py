"""The deterministic split of texts into statements, and how a text is read into turns
(apollo_domain.episodes)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from apollo_domain.bounds import TEXT, TURNS
from apollo_domain.episodes import Turn, episode_id, read_turns, split_sentences
from apollo_domain.errors import ValidationError
from apollo_domain.model import AccessScope

CONVERSATION = [
    {"speaker": "Maya", "text": "Hey! How was the trip to Porto last week?", "at": "2026-05-11"},
    {
        "speaker": "Leo",
        "text": "Great, thanks. We stayed near the Ribeira for five nights. It rained twice, "
        "but the food made up for it.",
    },
    {"speaker": "Leo", "text": "Yes. The queue took an hour. Next time I'll book online."},
]


def test_a_real_conversation_splits_into_statements_that_stand_alone() -> None:
    turns, conversation = read_turns(CONVERSATION)
    assert conversation
    said = split_sentences(turns)
    assert [(s.turn, s.content) for s in said] == [
        (0, "Maya: Hey! How was the trip to Porto last week?"),
        (
            1,
            "Leo: Great, thanks. We stayed near the Ribeira for five nights. It rained "
            "twice, but the food made up for it.",
        ),
        (2, "Leo: Yes. The queue took an hour."),
        (2, "Leo: Next time I'll book online."),
    ]
    assert said[0].at == datetime(2026, 5, 11, tzinfo=UTC)
    assert said[1].at is None


def test_a_document_splits_at_sentences_blank_lines_and_list_items() -> None:
    turns, conversation = read_turns(
        'He said "stop." Then he left, e.g. at 3.5 km. Prices fell 2.5 percent today.\n\n'
        "Second paragraph stands here.\n- one item of a list\n- another item of it"
    )
    assert not conversation
    # "He" and "Then" lean on what came before: at the text's start, on what comes next
    assert [s.content for s in split_sentences(turns)] == [
        'He said "stop." Then he left, e.g. at 3.5 km. Prices fell 2.5 percent today.',
        "Second paragraph stands here.",
        "- one item of a list",
        "- another item of it",
    ]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (None, "text"),
        (b"bytes", "text"),
        ({"text": "an object"}, "text"),
        ("", "text"),
        ([], "text"),
        ([{"text": "  "}], "text"),
        ([{"speaker": "ann", "text": 1}], "text[0].text"),
        ([{"text": "hi", "at": "2026-13-40"}], "text[0].at"),
        ([{"text": "hi", "at": "x" * 41}], "text[0].at"),
        ([{"text": "hi", "speaker": "x" * 101}], "text[0].speaker"),
        ([{"text": "x" * TEXT.limit}, {"text": "y"}], "text"),
        ([{"text": "t"}] * (TURNS.limit + 1), "text"),
    ],
)
def test_what_is_not_a_text_is_refused_naming_the_field(text: object, field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        read_turns(text)
    assert field == refused.value.field


def test_an_episode_is_known_by_what_was_said_by_whom_where() -> None:
    one = (Turn("Kafka keeps  seven DAYS", "ann"),)
    same = (Turn("kafka keeps seven days", "ann"),)
    assert episode_id("a", AccessScope.GLOBAL, None, one) == episode_id(
        "a", AccessScope.GLOBAL, None, same
    )
    others = {
        episode_id("b", AccessScope.GLOBAL, None, one),
        episode_id("a", AccessScope.PRIVATE, "p", one),
        episode_id("a", AccessScope.GLOBAL, None, (Turn("Kafka keeps seven days", "bob"),)),
        episode_id("a", AccessScope.GLOBAL, None, (Turn("Kafka keeps eight days", "ann"),)),
    }
    assert episode_id("a", AccessScope.GLOBAL, None, one) not in others
    assert 4 == len(others)


_WORDS = st.sampled_from(
    ["It", "it", "They", "The", "cluster", "runs", "on", "port", "5432", "Yes", "e.g.", "3.5"]
)
_SENTENCE = st.builds(
    lambda words, end: " ".join(words) + end,
    st.lists(_WORDS, min_size=1, max_size=7),
    st.sampled_from([".", "!", "?", "", '."', ".\n\n"]),
)


@given(st.lists(st.lists(_SENTENCE, min_size=1, max_size=5).map(" ".join), min_size=1, max_size=4))
def test_the_split_loses_and_adds_nothing_and_keeps_each_turn_in_order(texts: list[str]) -> None:
    """Every word of every turn is in its statements, in order, and nothing else is; each
    statement keeps its turn."""
    turns = tuple(Turn(text, f"s{i}") for i, text in enumerate(texts))
    said = split_sentences(turns)
    for index, turn in enumerate(turns):
        mine = [s.text for s in said if s.turn == index]
        assert " ".join(mine).split() == turn.text.split()
    assert [s.turn for s in said] == sorted(s.turn for s in said)
    joined = sum(len(t.text.split(". ")) for t in turns) - len(said)
    event("sentences joined" if joined > 0 else "no sentence joined")
    event(f"{len(said)} statements" if len(said) < 4 else "4 or more statements")
